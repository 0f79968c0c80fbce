package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// requireDatabases skips tests that need root, namespaces, Debian's postgresql and
// mariadb-server (fails under ZLC_REQUIRE_INTEGRATION, as requireIntegration does).
func requireDatabases(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.NFTables, testenv.PostgreSQL, testenv.MariaDB)
}

// TestRunDatabaseLocksAreValid: one run per database lock, each under faults that
// matter to it and that no correct recipe overlaps under (a session ended by the
// server, connection-kill, makes an honest unfenced overlap: docs/databases.md), each
// valid with its liveness judged; config.json records the
// service; nothing of the run is left. pg-advisory's store is root's alone (mode
// 0700), which the postgres account cannot enter: its servers keep their files in a
// directory of their own, gone with them. The runs are independent (each in its own
// namespaces, with its own servers) and run side by side.
func TestRunDatabaseLocksAreValid(t *testing.T) {
	requireDatabases(t)
	cases := []struct {
		name, service string
		args          []string
		log           string // what the run's log says serves
		closed        bool   // the store is root's alone
	}{
		{"pg-table", "postgres", []string{"--recipe", "pg-table", "--nemesis", "reply-loss", "--nemesis-targets", "idle"}, "PostgreSQL 15", false},
		{"pg-table-expiry", "postgres", []string{"--recipe", "pg-table-expiry", "--nemesis", "client-partition", "--nemesis-targets", "holder", "--nodes", "2"}, "PostgreSQL 15", false},
		{"pg-advisory", "postgres", []string{"--recipe", "pg-advisory", "--nemesis", "client-partition,kill", "--nemesis-targets", "holder"}, "PostgreSQL 15", true},
		{"mariadb-getlock", "mariadb", []string{"--recipe", "mariadb-getlock", "--nemesis", "client-kill,kill", "--nemesis-targets", "holder"}, "MariaDB 10.11", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			store := keptIfFailed(t)
			if c.closed {
				if err := os.Chmod(store, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"run", "--time", "12s", "--seed", "7", "--session-timeout", "2s", "--nemesis-interval", "2s", "--store", store}, c.args...)
			code, stdout, stderr := zlockcheck(t, args...)
			t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
			if code != exitValid {
				t.Fatalf("exit %d, want %d (valid)", code, exitValid)
			}
			res := readResults(t, store)
			acq := res["counts"].(map[string]any)["acquire"].(map[string]any)
			if ok, _ := acq["ok"].(float64); ok < 20 {
				t.Errorf("only %v acquires succeeded in 12 s", acq["ok"])
			}
			if !hasCheck(res, "liveness", "valid") {
				t.Errorf("no valid liveness check (the final phase): %v", res["checks"])
			}
			if !strings.Contains(stdout, "nemesis") && !strings.Contains(stderr, "nemesis: start") {
				t.Errorf("no fault was applied:\n%s", stderr)
			}
			var cfg struct {
				Service string `json:"service"`
			}
			data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
			if err != nil || json.Unmarshal(data, &cfg) != nil || cfg.Service != c.service {
				t.Errorf("config.json does not record the service %s: %+v (%v)", c.service, cfg, err)
			}
			if !strings.Contains(stderr, c.log) {
				t.Errorf("the run's log does not say that %s serves:\n%s", c.log, stderr)
			}
			assertNothingLeft(t, store)
			if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "zlcpg-run-*")); c.closed && len(left) > 0 {
				t.Errorf("the servers' own directories are left: %v", left)
			}
		})
	}
}

// TestVanishedHolderKeepsADatabaseLock: a holder whose host vanishes (client-vanish:
// no FIN or reset reaches the server) keeps its session lock, since the server ends
// the session only when its TCP keepalive gives up on the connection (2 h 11 min with
// the kernel's defaults): the final phase finds the lock blocked and classes it
// configuration, naming the database's keepalive settings. The same seed with
// --db-keepalive 3s is valid. On PostgreSQL (pg-advisory) and MariaDB
// (mariadb-getlock), side by side.
func TestVanishedHolderKeepsADatabaseLock(t *testing.T) {
	requireDatabases(t)
	cases := []struct{ recipe, setting string }{
		{"pg-advisory", "tcp_keepalives_idle"},
		{"mariadb-getlock", "tcp_keepalive_time"},
	}
	for _, c := range cases {
		t.Run(c.recipe, func(t *testing.T) {
			t.Parallel()
			for _, keepalive := range []string{"0", "3s"} {
				store := keptIfFailed(t)
				code, stdout, stderr := zlockcheck(t, "run", "--recipe", c.recipe, "--workload", "mutex", "--nemesis", "client-vanish",
					"--nemesis-targets", "holder", "--nemesis-interval", "4s", "--time", "10s", "--seed", "3",
					"--session-timeout", "2s", "--db-keepalive", keepalive, "--store", store)
				res := readResults(t, store)
				assertNothingLeft(t, store)
				if keepalive == "3s" {
					if code != exitValid {
						t.Fatalf("--db-keepalive 3s: exit %d, want valid\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
					}
					if !hasCheck(res, "liveness", "valid") {
						t.Errorf("--db-keepalive 3s: no valid liveness check: %v", res["checks"])
					}
					continue
				}
				if code != exitInvalid || !hasCheck(res, "liveness", "invalid") {
					t.Fatalf("kernel keepalive: exit %d, want the liveness check invalid\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
				}
				if !strings.Contains(stdout, "CONFIGURATION") || !strings.Contains(stdout, c.setting) {
					t.Errorf("kernel keepalive: the cause is not configuration naming %s:\n%s", c.setting, stdout)
				}
			}
		})
	}
}
