package main

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// TestVanishedHolderKeepsADatabaseLock: a holder whose host vanishes (client-vanish:
// no FIN or reset reaches the server) keeps its session lock, since the server ends
// the session only when its TCP keepalive gives up on the connection (2 h 11 min with
// the kernel's defaults): the final phase finds the lock blocked and classes it
// configuration, naming the database's keepalive settings. The same seed with
// --db-keepalive 3s is valid. On PostgreSQL and MariaDB (mariadb-getlock), side by
// side. On PostgreSQL the kernel's keepalive is run with the node-postgres example
// worker, whose advisory lock is on two 32-bit keys of its own, not the one-key
// layout of pg-advisory (which the 3 s run uses): only the place its acquire names
// lets the final phase find its entry and the cause name its session.
func TestVanishedHolderKeepsADatabaseLock(t *testing.T) {
	requireDatabases(t)
	var node []string
	for _, w := range exampleWorkers(t) {
		if w.name == "node-postgres" {
			node = []string{"--service", "postgres", "--recipe", "exec", "--worker-cmd", strings.Join(w.argv, " ")}
		}
	}
	cases := []struct {
		name, setting string
		// lock is the lock under test with each keepalive: "0" the kernel's.
		lock map[string][]string
	}{
		{"postgres", "tcp_keepalives_idle", map[string][]string{"0": node, "3s": {"--recipe", "pg-advisory"}}},
		{"mariadb", "tcp_keepalive_time", map[string][]string{"0": {"--recipe", "mariadb-getlock"}, "3s": {"--recipe", "mariadb-getlock"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.name == "mariadb" {
				testenv.Long(t, "the same vanish on MariaDB's GET_LOCK; make test keeps it on PostgreSQL (an exec worker and pg-advisory)")
			}
			t.Parallel()
			for _, keepalive := range []string{"0", "3s"} {
				store := keptIfFailed(t)
				// Holds up to 300 ms, so that the vanish lands within a hold: with the default
				// 50 ms it can land as the holder's release is already on its way, which frees
				// the lock, and the run is valid (seen in make test on 2026-11-29).
				args := append([]string{"run", "--workload", "mutex", "--nemesis", "client-vanish",
					"--nemesis-targets", "holder", "--nemesis-interval", "4s", "--time", "10s", "--seed", "3", "--hold-max", "300ms",
					"--session-timeout", "2s", "--db-keepalive", keepalive, "--store", store}, c.lock[keepalive]...)
				code, stdout, stderr := zlockcheck(t, args...)
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
				if !strings.Contains(stdout, "CONFIGURATION") || !strings.Contains(stdout, c.setting) || !strings.Contains(stdout, "vanished with its host") {
					t.Errorf("kernel keepalive: the cause is not configuration naming the vanished holder and %s:\n%s", c.setting, stdout)
				}
			}
		})
	}
}

// TestAnExecSessionLockKilledIsNotARecipeBug: a user's own session lock, run as an
// exec worker (here this binary's worker serving mariadb-getlock and pg-advisory,
// which the harness then knows nothing of from the catalogue), says in its acquire
// where its lock lives (workloads.LockPlace: the GET_LOCK name or advisory key, and
// the connection that holds it). Killed by connection-kill, its lock freed by the
// server and lost reported at its next heartbeat, any overlap is an honest unfenced
// one, never a recipe bug; a worker that never notices (the no-heartbeat mutant, as
// an exec worker too) is a recipe bug. On PostgreSQL and MariaDB, the runs side by
// side. PostgreSQL's correct exec workers are the example workers, on psycopg and
// node-postgres (TestExampleWorkersUnderFaults, the same fault). MariaDB's mutant is
// make test-long's: PostgreSQL's is the same family as an exec worker (make test's
// time).
func TestAnExecSessionLockKilledIsNotARecipeBug(t *testing.T) {
	requireDatabases(t)
	cases := []struct{ service, correct, blind string }{
		{"mariadb", "mariadb-getlock", "mutant-mariadb-no-heartbeat"},
		{"postgres", "", "mutant-pg-advisory-no-heartbeat"},
	}
	for _, c := range cases {
		for _, recipe := range []string{c.correct, c.blind} {
			if recipe == "" {
				continue
			}
			t.Run(c.service+"/"+recipe, func(t *testing.T) {
				if recipe == "mutant-mariadb-no-heartbeat" {
					testenv.Long(t, "the same family as an exec worker is postgres/mutant-pg-advisory-no-heartbeat's in make test")
				}
				t.Parallel()
				store := keptIfFailed(t)
				_, stdout, stderr := zlockcheck(t, "run", "--service", c.service, "--recipe", "exec",
					"--worker-cmd", binary+" worker --recipe "+recipe, "--workload", "mutex",
					"--nemesis", "connection-kill", "--nemesis-targets", "holder", "--nemesis-interval", "3s",
					"--hold-max", "12s", "--acquire-timeout", "14s", "--session-timeout", "2s",
					"--time", "15s", "--seed", "1", "--final-phase=false", "--store", store)
				class := causeClass(readResults(t, store))
				t.Logf("%s: cause %q", recipe, class)
				switch {
				case recipe == c.correct && class == "recipe bug":
					t.Errorf("%s as an exec worker: a recipe bug\nstdout:\n%s\nstderr:\n%s", recipe, stdout, stderr)
				case recipe == c.blind && class != "recipe bug":
					t.Errorf("%s as an exec worker: cause %q, want a recipe bug\nstdout:\n%s\nstderr:\n%s", recipe, class, stdout, stderr)
				}
				assertNothingLeft(t, store)
			})
		}
	}
}

// causeClass is the class of the lock check's cause in results ("" when none).
func causeClass(res map[string]any) string {
	checks, _ := res["checks"].([]any)
	for _, c := range checks {
		m, _ := c.(map[string]any)
		if cause, ok := m["cause"].(map[string]any); ok && m["key"] != "liveness" {
			class, _ := cause["class"].(string)
			return class
		}
	}
	return ""
}
