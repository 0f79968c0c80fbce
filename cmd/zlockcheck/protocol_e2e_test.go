package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// Worker protocols v2 and v3 on a real ensemble: every built-in worker kind speaks
// one, a v1 exec worker still works, and a paused holder releases only after it
// resumes.

// TestPlannedProtocolRunsAreValid: gozk (Go) agrees to v3, curator-mutex (Java) and
// kazoo-lock (Python) to v2, and their runs are valid; the binary, started outside the
// checkout with an empty cache, runs the Curator and Kazoo workers it unpacked there
// (TestCuratorAndKazooSmoke's checks, which make test leaves to make test-long).
func TestPlannedProtocolRunsAreValid(t *testing.T) {
	requireIntegration(t)
	cache := t.TempDir()
	for recipe, version := range map[string]string{"gozk": "v3", "curator-mutex": "v2", "kazoo-lock": "v2"} {
		t.Run(recipe, func(t *testing.T) {
			t.Parallel() // three runs side by side, sharing the cache as concurrent runs do
			store := t.TempDir()
			cmd := exec.Command(binary, "run", "--recipe", recipe, "--time", "10s", "--seed", "4", "--store", store, "--hold-max", "5ms")
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "ZLC_CACHE_DIR="+cache)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v, want exit 0 (valid)\n%s", err, out)
			}
			if !strings.Contains(string(out), "protocol "+version+", its clock known to within") {
				t.Errorf("no worker agreed to protocol %s:\n%s", version, out)
			}
			ok, _ := readResults(t, store)["counts"].(map[string]any)["acquire"].(map[string]any)["ok"].(float64)
			if ok < 10 {
				t.Errorf("only %v acquires succeeded in 10 s", ok)
			}
			if recipe != "gozk" { // gozk's worker is the binary itself
				assertWorkerFromCache(t, store, cache)
			}
			assertNothingLeft(t, store)
		})
	}
}

// assertWorkerFromCache: the run's worker command (config.json) is the one the binary
// unpacked into cache (started outside the checkout, with an empty cache, it unpacks
// its embedded workers there, and compiles the Curator one, on first use).
func assertWorkerFromCache(t *testing.T, store, cache string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		WorkerArgv []string `json:"worker_argv"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || len(cfg.WorkerArgv) < 2 || !strings.HasPrefix(cfg.WorkerArgv[1], cache+"/") {
		t.Errorf("worker command %q (%v), want the worker from the cache %s", cfg.WorkerArgv, err, cache)
	}
}

// TestV1ExecWorkerIsValid: an exec worker that speaks v1 only is driven step by step.
func TestV1ExecWorkerIsValid(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir() // not side by side: it checks that no zlc link is left anywhere
	code, stdout, stderr := zlockcheck(t, "run", "--recipe", "exec", "--worker-cmd", binary+" worker --protocol 1 --recipe gozk",
		"--time", "10s", "--seed", "4", "--store", store)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)\nstdout:\n%s\nstderr:\n%s", code, exitValid, stdout, stderr)
	}
	if strings.Contains(stderr, "its clock known") {
		t.Errorf("a v1 worker was taken for v2 or v3:\n%s", stderr)
	}
	assertNothingLeft(t, store)
}

// assertPausedHoldersReleaseAfterResuming: client-pause stops the holder (a v3
// worker, holding on its own) inside its critical section; its release is invoked
// only after it runs again, never while it is stopped. TestClientPauseBreaksGozk's
// run is its history.
func assertPausedHoldersReleaseAfterResuming(t *testing.T, store, stderr string) {
	t.Helper()
	h, _, err := histories.Load(filepath.Join(store, "latest", "history.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	// v2 and v3 ops carry the workers' times, not always in the file's order.
	sort.SliceStable(h, func(i, j int) bool { return h[i].Time < h[j].Time })
	// The nemesis records start before SIGSTOP and stop after SIGCONT; slack covers a
	// release already under way at the start, and one stamped right after SIGCONT.
	const slack = int64(50 * time.Millisecond)
	paused, after := 0, 0
	for i, op := range h {
		pid, process, ok := pausedHolder(op, histories.FStart)
		if !ok {
			continue
		}
		stop := findStop(h[i:], pid)
		if stop < 0 || !holdsAt(h[:i], process) {
			continue
		}
		paused++
		for _, rel := range h[i:] {
			if rel.Process.Nemesis || rel.Process.ID != process || rel.F != histories.FRelease || rel.Type != histories.Invoke {
				continue
			}
			if rel.Time > op.Time+slack && rel.Time < stop-slack {
				t.Errorf("process %d, stopped from %d to %d ns, invoked its release at %d (op %d)", process, op.Time, stop, rel.Time, rel.Index)
			} else if rel.Time >= stop-slack {
				after++
			}
			break
		}
	}
	t.Logf("%d pauses of a holder, %d releases after SIGCONT", paused, after)
	if paused == 0 || after == 0 {
		t.Errorf("no holder was paused mid-hold and released after resuming (%d pauses, %d releases after)\nstderr:\n%s", paused, after, stderr)
	}
}

// pausedHolder reads a client-pause op of phase f: the paused pid and process.
func pausedHolder(op histories.Op, f string) (pid, process int, ok bool) {
	if !op.Process.Nemesis || op.F != f {
		return 0, 0, false
	}
	var v struct {
		Fault        string
		Pid, Process int
	}
	if json.Unmarshal(op.Value, &v) != nil || v.Fault != "client-pause" {
		return 0, 0, false
	}
	return v.Pid, v.Process, true
}

// findStop is the time of the stop of the client-pause of pid, -1 if none.
func findStop(h histories.History, pid int) int64 {
	for _, op := range h {
		if p, _, ok := pausedHolder(op, histories.FStop); ok && p == pid {
			return op.Time
		}
	}
	return -1
}

// holdsAt says whether process's last acquire ok in h is after its last release
// invoke.
func holdsAt(h histories.History, process int) bool {
	holding := false
	for _, op := range h {
		if op.Process.Nemesis || op.Process.ID != process {
			continue
		}
		switch {
		case op.F == histories.FAcquire && op.Type == histories.OK:
			holding = true
		case op.F == histories.FRelease && op.Type == histories.Invoke:
			holding = false
		}
	}
	return holding
}

// TestBaselineShapes: --baseline times the plain loop as goroutines of the harness,
// --baseline-processes as one process per worker slot (in its namespace), after an
// untimed warm-up of the plain loop (--baseline-warmup) that comes before the
// history's clock starts; one run with both completes cycles in each, says which
// shape each was, and leaves no plain-loop process behind.
func TestBaselineShapes(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	code, stdout, stderr := zlockcheck(t, "run", "--time", "3s", "--workers", "3", "--seed", "1", "--hold-max", "1ms",
		"--final-phase=false", "--baseline", "--baseline-processes", "--baseline-warmup", "2s", "--store", store)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)\nstdout:\n%s\nstderr:\n%s", code, exitValid, stdout, stderr)
	}
	res := readResults(t, store)
	w, _ := res["baseline_warmup"].(map[string]any)
	if cycles, _ := w["cycles"].(float64); cycles < 20 || w["duration_ns"] != 2e9 {
		t.Errorf("results.json's baseline_warmup: %v, want 2 s with cycles", res["baseline_warmup"])
	}
	h, _, err := histories.Load(filepath.Join(store, "latest", "history.jsonl"))
	if err != nil || len(h) == 0 || h[0].Time > int64(time.Second) {
		t.Errorf("history (%v): its first op must come within a second of its start, the warm-up before it", err)
	}
	for key, processes := range map[string]bool{"baseline": false, "baseline_processes": true} {
		b, ok := res[key].(map[string]any)
		if !ok {
			t.Errorf("results.json has no %s", key)
			continue
		}
		if cycles, _ := b["cycles"].(float64); cycles < 30 {
			t.Errorf("%s: %v cycles in 3 s, want at least 30: %v", key, b["cycles"], b)
		}
		if procs, _ := b["processes"].(bool); procs != processes || b["goroutines"] != 3.0 {
			t.Errorf("%s %v: want processes %v, 3 sessions", key, b, processes)
		}
	}
	if out, _ := exec.Command("pgrep", "-af", "zlockcheck plain-loop").Output(); len(out) > 0 {
		t.Errorf("plain-loop processes left behind: %s", out)
	}
	assertNothingLeft(t, store)
}
