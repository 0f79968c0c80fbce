package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// exampleWorker is one of examples/workers: a worker written from docs/protocol.md
// alone, on a library the project does not otherwise use.
type exampleWorker struct {
	name, service string
	argv          []string
}

// exampleWorkers are the four example workers, their commands absolute.
func exampleWorkers(t *testing.T) []exampleWorker {
	testenv.RequireIntegration(t, testenv.ExampleWorkers)
	root := testenv.ExampleWorkersRoot()
	py := filepath.Join(root, "build/examples-venv/bin/python")
	dir := filepath.Join(root, "examples/workers")
	return []exampleWorker{
		{"redis-py", "redis", []string{py, filepath.Join(dir, "redis_lock.py")}},
		{"ioredis", "redis", []string{"node", filepath.Join(dir, "redis_lock.js")}},
		{"psycopg", "postgres", []string{py, filepath.Join(dir, "pg_advisory.py")}},
		{"node-postgres", "postgres", []string{"node", filepath.Join(dir, "pg_advisory.js")}},
	}
}

// TestExampleWorkersConform: each example worker keeps every rule of protocol v1 on a
// private server of its service, the lost rule included (each says where its lock
// lives).
func TestExampleWorkersConform(t *testing.T) {
	workers := exampleWorkers(t)
	t.Parallel() // beside the other side-by-side runs: private servers, loopback
	for _, w := range workers {
		t.Run(w.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := zlockcheck(t, "conformance", "--service", w.service, "--worker-cmd", strings.Join(w.argv, " "))
			// They speak protocol v1: the cycle rules are skipped, none other.
			if code != exitConforms || strings.Contains(stdout, "skipped lost") || strings.Count(stdout, "\nskipped ") != 2 {
				t.Errorf("%s: exit %d, want every rule passed, none skipped but the v2 and v3 ones\nstdout:\n%s\nstderr:\n%s", w.name, code, stdout, stderr)
			}
		})
	}
}

// TestExampleWorkersUnderFaults: each example worker runs under the faults that
// matter to its lock. The Redis ones, their connection killed by the server (the key
// lives on; the next release goes over a new connection) and their process killed
// (the key lives until its TTL): valid. The PostgreSQL ones, the connection that holds
// killed (the server frees the advisory lock; connection-kill aims at the session their
// acquire names): any overlap is unfenced, never a recipe bug, since they report lost
// at their next heartbeat.
func TestExampleWorkersUnderFaults(t *testing.T) {
	workers := exampleWorkers(t)
	requireRedis(t)
	requireDatabases(t)
	t.Parallel() // beside the other side-by-side runs: each in a network of its own
	for _, w := range workers {
		t.Run(w.name, func(t *testing.T) {
			if w.name == "ioredis" || w.name == "node-postgres" {
				testenv.Long(t, "the JavaScript twin of a Python example worker under the same faults; make test keeps redis-py and psycopg under them, and every example worker's conformance")
			}
			t.Parallel()
			store := keptIfFailed(t)
			args := []string{"run", "--service", w.service, "--recipe", "exec", "--worker-cmd", strings.Join(w.argv, " "),
				"--workers", "3", "--session-timeout", "2s", "--time", "10s", "--seed", "1", "--store", store,
				"--nemesis-targets", "holder", "--nemesis-interval", "3s"}
			if w.service == "redis" {
				args = append(args, "--nemesis", "connection-kill,client-kill")
			} else {
				args = append(args, "--nemesis", "connection-kill", "--hold-max", "5s", "--acquire-timeout", "7s", "--final-phase=false")
			}
			code, stdout, stderr := zlockcheck(t, args...)
			res := readResults(t, store)
			class := causeClass(res)
			t.Logf("%s: exit %d, cause %q", w.name, code, class)
			switch {
			case w.service == "redis" && code != exitValid:
				t.Errorf("%s: exit %d, want valid\nstdout:\n%s\nstderr:\n%s", w.name, code, stdout, stderr)
			case class == "recipe bug" || code == exitError:
				t.Errorf("%s: exit %d, cause %q\nstdout:\n%s\nstderr:\n%s", w.name, code, class, stdout, stderr)
			}
			if !strings.Contains(stdout, "connection-kill") {
				t.Errorf("%s: no connection-kill landed\nstdout:\n%s", w.name, stdout)
			}
			assertNothingLeft(t, store)
		})
	}
}
