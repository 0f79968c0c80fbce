package main

import (
	"strings"
	"testing"
)

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
