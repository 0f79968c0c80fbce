package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// TestClientPauseBreaksGozk: go-zookeeper's lock has no fencing, so a holder paused
// for longer than its session overlaps the next holder. The run must say invalid; and
// a paused holder (a v3 worker, holding on its own) invokes its release only after it
// resumes (assertPausedHoldersReleaseAfterResuming). 15 s: with seed 11 the first
// overlap comes at about 6.5 s, the paused holder's release at about 10 s (it ran 30 s
// until 2026-11-29, for make test's time).
func TestClientPauseBreaksGozk(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	code, stdout, stderr := zlockcheck(t, "run", "--recipe", "gozk", "--nemesis", "client-pause", "--nemesis-targets", "holder",
		"--nemesis-interval", "3s", "--time", "15s", "--seed", "11", "--store", store)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d (invalid)", code, exitInvalid)
	}
	if !strings.Contains(stderr, `"fault":"client-pause"`) {
		t.Error("no client-pause fault was logged")
	}
	res := readResults(t, store)
	witness := res["checks"].([]any)[0].(map[string]any)["witness"].(string)
	if !strings.Contains(witness, "2 holders at once") {
		t.Errorf("witness does not show the overlap: %s", witness)
	}
	data, _ := os.ReadFile(filepath.Join(store, "latest", "history.jsonl"))
	if !strings.Contains(string(data), `"process":"nemesis"`) {
		t.Error("history has no nemesis ops")
	}
	assertPausedHoldersReleaseAfterResuming(t, store, stderr)
	assertNothingLeft(t, store)
}

// TestServerFaultsRaiseNoFalseAlarm: server-side faults only, the lock stays safe.
// (The 5-seed, 60 s version is `make chaos`.) A control, make test-long's: make test
// keeps server faults without a false alarm in TestObserversServerFaultsValid.
func TestServerFaultsRaiseNoFalseAlarm(t *testing.T) {
	requireIntegration(t)
	testenv.Long(t, "a control; make test keeps kill, pause and partition valid in TestObserversServerFaultsValid")
	store := t.TempDir()
	code, stdout, stderr := zlockcheck(t, "run", "--recipe", "gozk", "--nemesis", "kill,pause,partition",
		"--nemesis-interval", "3s", "--time", "30s", "--seed", "5", "--store", store)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)", code, exitValid)
	}
	if strings.Count(stderr, "nemesis: start") < 2 {
		t.Errorf("fewer than 2 faults in 30 s:\n%s", stderr)
	}
	assertNothingLeft(t, store)
}

// TestSIGINTDuringPartitionHealsAndLeavesNothing interrupts a run while a partition is
// on: the run must heal, tear down, and leave a history that checks.
func TestSIGINTDuringPartitionHealsAndLeavesNothing(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	cmd := exec.Command(binary, "run", "--nemesis", "partition", "--nemesis-interval", "1s",
		"--time", "120s", "--seed", "9", "--store", store, "--quiet")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	started := false
	for time.Now().Before(deadline) && !started {
		data, _ := os.ReadFile(filepath.Join(store, "latest", "history.jsonl"))
		lines := strings.Split(string(data), "\n")
		// A partition is on when the last nemesis op is a start.
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], `"process":"nemesis"`) {
				started = strings.Contains(lines[i], `"f":"start"`) && strings.Contains(lines[i], "partition")
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !started {
		_ = cmd.Process.Kill()
		t.Fatal("no partition started within 60 s")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatal(err)
	}
	assertNothingLeft(t, store)
	data, _ := os.ReadFile(filepath.Join(store, "latest", "history.jsonl"))
	if !strings.Contains(string(data), `"f":"stop"`) {
		t.Error("the partition's heal was not recorded")
	}
	code, out, _ := zlockcheck(t, "check", filepath.Join(store, "latest", "history.jsonl"))
	if code != exitValid {
		t.Errorf("history of the interrupted run: exit %d\n%s", code, out)
	}
}
