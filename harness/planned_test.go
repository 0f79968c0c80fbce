package harness

import (
	"bufio"
	"encoding/json"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/driver"
)

// These tests drive the harness's side of protocols v2 and v3 (planned.go) against a
// FAKE worker: a goroutine of the test, not a process, attached to the session's
// protocol client by pipes (driver.Attach), that reads the requests and writes the
// lines a v2 (or v3) worker would (script), with times of a clock that runs
// clockAhead ahead of the run's. No ZooKeeper, no lock.

const clockAhead = 5 * time.Second

// plannedRun is a session of a runner with only what a cycle needs, and its history.
type plannedRun struct {
	*session
	r    *runner
	path string
}

// fakeV2 is the test's worker: it answers clock requests itself and hands every
// other request to script, which writes what the worker would (say).
type fakeV2 struct {
	t *testing.T
	s *plannedRun
	// out is the worker's stdout: closing it is the worker's crash.
	out *io.PipeWriter
}

// mono is the fake worker's clock.
func (f *fakeV2) mono() int64 { return f.s.r.rec.now() + clockAhead.Nanoseconds() }

// say sends one line as the worker would write it.
func (f *fakeV2) say(m workloads.Message) {
	line, _ := json.Marshal(m)
	_, _ = f.out.Write(append(line, '\n'))
}

// report sends a step report of cycle id, stamped now.
func (f *fakeV2) report(id int64, step, op string) { f.reportAt(id, step, op, f.mono()) }

// reportAt sends a step report of cycle id, stamped at (the worker's clock).
func (f *fakeV2) reportAt(id int64, step, op string, at int64) {
	f.say(workloads.Message{ID: &id, Step: step, F: op, MonoNS: &at})
}

// reply sends an ok reply to request id.
func (f *fakeV2) reply(id int64) { f.say(workloads.Message{ID: &id, Type: workloads.ReplyOK}) }

// newPlannedSession is a session of a runner with only what a cycle needs (a
// history in a temporary directory), whose worker is a fakeV2 running script.
func newPlannedSession(t *testing.T, script func(f *fakeV2, req workloads.Request)) *plannedRun {
	t.Helper()
	path := filepath.Join(t.TempDir(), "history.jsonl")
	hw, err := histories.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hw.Close() })
	cfg := DefaultConfig()
	r := &runner{cfg: cfg, logf: t.Logf, rec: &recorder{w: hw, start: time.Now()}, hard: newLatch(),
		sessions: map[string]int{}}
	reqs, stdin := io.Pipe()
	out, stdout := io.Pipe()
	// An attached worker has no process: it is never stopped.
	w := &worker{Worker: driver.Attach(stdin, out, driver.Options{}), protocol: 2, now: r.rec.now}
	w.process.Store(7)
	s := &plannedRun{session: &session{env: r.sessionEnv(), w: w, key: cfg.Workload.Key}, r: r, path: path}
	f := &fakeV2{t: t, s: s, out: stdout}
	go func() {
		sc := bufio.NewScanner(reqs)
		for sc.Scan() {
			req, err := workloads.ParseRequest(sc.Bytes())
			if err != nil {
				t.Errorf("fake worker: %v", err)
				return
			}
			if req.Op == workloads.OpClock {
				now := f.mono()
				f.say(workloads.Message{ID: &req.ID, Type: workloads.ReplyOK, MonoNS: &now})
				continue
			}
			script(f, req)
		}
	}()
	t.Cleanup(func() { reqs.Close(); stdout.Close() })
	return s
}

// runOneCycle runs one mutex cycle of a 1 ms hold through s.
func runOneCycle(t *testing.T, s *plannedRun) { t.Helper(); runCycleHolding(t, s, time.Millisecond) }

// runCycleHolding runs one mutex cycle of the given hold through s.
func runCycleHolding(t *testing.T, s *plannedRun, hold time.Duration) {
	t.Helper()
	if err := s.syncClock(); err != nil {
		t.Fatal(err)
	}
	if off := time.Duration(s.w.clock.Offset); off < clockAhead-time.Duration(s.w.clock.Err) || off > clockAhead+time.Duration(s.w.clock.Err) {
		t.Fatalf("clock offset %s ± %s, want %s", off, time.Duration(s.w.clock.Err), clockAhead)
	}
	wl := s.r.cfg.Workload
	wl.HoldMin, wl.HoldMax = hold, hold
	c := wl.NewCycle(rand.New(rand.NewPCG(1, 2)), 0)
	s.runCycle(c, func(workloads.Step) time.Duration { return 5 * time.Second })
}

// runCleanCycle is runOneCycle, which must leave the worker alive and within the
// protocol.
func runCleanCycle(t *testing.T, s *plannedRun) {
	t.Helper()
	runOneCycle(t, s)
	if s.dead || len(s.r.violations) > 0 {
		t.Fatalf("dead %v, violations %v", s.dead, s.r.violations)
	}
}

func loadHistory(t *testing.T, s *plannedRun) histories.History {
	t.Helper()
	if err := s.r.rec.w.Close(); err != nil {
		t.Fatal(err)
	}
	h, _, err := histories.Load(s.path)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func opsString(h histories.History) string {
	var b []string
	for _, op := range h {
		s := string(op.Type) + " " + op.F
		if op.Lost {
			s += " (lost)"
		}
		b = append(b, s)
	}
	return strings.Join(b, ", ")
}

// TestPlannedCycleRecordsTheWorkersTimes: the ops of a planned cycle carry the
// worker's times mapped onto the run's clock, and the harness knows the worker holds
// while it holds (the nemesis's holder target).
func TestPlannedCycleRecordsTheWorkersTimes(t *testing.T) {
	var okAt, relAt int64
	var stateInHold workloads.State
	s := newPlannedSession(t, func(f *fakeV2, req workloads.Request) {
		if req.Op != workloads.OpCycle || req.HoldUS != 1000 || req.Depth != 1 {
			t.Errorf("want a cycle request of hold_us 1000, depth 1, got %+v", req)
		}
		f.report(req.ID, workloads.StepInvoke, workloads.OpAcquire)
		// Reported 10ms late: the history must have when it happened.
		okAt = f.mono()
		time.Sleep(10 * time.Millisecond)
		f.reportAt(req.ID, workloads.StepOK, workloads.OpAcquire, okAt)
		for deadline := time.Now().Add(2 * time.Second); f.s.w.State() != workloads.Holding && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		stateInHold = f.s.w.State()
		time.Sleep(20 * time.Millisecond)
		relAt = f.mono()
		f.report(req.ID, workloads.StepInvoke, workloads.OpRelease)
		f.report(req.ID, workloads.StepOK, workloads.OpRelease)
		f.reply(req.ID)
	})
	runCleanCycle(t, s)
	if stateInHold != workloads.Holding {
		t.Errorf("state while the worker holds: %s, want holding", stateInHold)
	}
	h := loadHistory(t, s)
	if got, want := opsString(h), "invoke acquire, ok acquire, invoke release, ok release"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	bound := 2*s.w.clock.Err + int64(time.Millisecond)
	for i, at := range map[int]int64{1: okAt, 2: relAt} {
		if mapped := at - clockAhead.Nanoseconds(); h[i].Time < mapped-bound || h[i].Time > mapped+bound {
			t.Errorf("op %d at %d, want the worker's time %d ± %d", i, h[i].Time, mapped, bound)
		}
	}
	if held := time.Duration(h[2].Time - h[1].Time); held < 15*time.Millisecond {
		t.Errorf("hold recorded as %s, the worker held 20ms", held)
	}
}

// TestPlannedCycleLostEndsTheHold: a lost event during the hold is recorded as a
// lost release, and the worker's reply then ends the cycle with no release.
func TestPlannedCycleLostEndsTheHold(t *testing.T) {
	s := newPlannedSession(t, func(f *fakeV2, req workloads.Request) {
		f.report(req.ID, workloads.StepInvoke, workloads.OpAcquire)
		f.report(req.ID, workloads.StepOK, workloads.OpAcquire)
		f.say(workloads.Message{Event: workloads.EventLost, Error: "fake: session expired"})
		f.reply(req.ID)
	})
	runCleanCycle(t, s)
	if got, want := opsString(loadHistory(t, s)), "invoke acquire, ok acquire, invoke release (lost), ok release (lost)"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// TestPlannedCycleRecordsRenewals: a renewed event during the hold is recorded as
// the harness's renewed record, naming the worker and the lock's key, and ends
// nothing.
func TestPlannedCycleRecordsRenewals(t *testing.T) {
	s := newPlannedSession(t, func(f *fakeV2, req workloads.Request) {
		f.report(req.ID, workloads.StepInvoke, workloads.OpAcquire)
		f.report(req.ID, workloads.StepOK, workloads.OpAcquire)
		f.say(workloads.Message{Event: workloads.EventRenewed})
		f.report(req.ID, workloads.StepInvoke, workloads.OpRelease)
		f.report(req.ID, workloads.StepOK, workloads.OpRelease)
		f.reply(req.ID)
	})
	runCleanCycle(t, s)
	h := loadHistory(t, s)
	if got, want := opsString(h), "invoke acquire, ok acquire, info renewed, invoke release, ok release"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	var r histories.Renewal
	if err := json.Unmarshal(h[2].Value, &r); err != nil || r.Process != s.w.Process() || r.Key != s.key || !h[2].Process.Nemesis {
		t.Errorf("renewed record %+v (%v) of %v, want process %d, key %q, the harness's", r, err, h[2].Process, s.w.Process(), s.key)
	}
}

// TestPlannedCycleOutOfOrderIsAViolation: a release reported before the acquire's
// outcome breaks the protocol: the worker is treated as crashed (its acquire info).
func TestPlannedCycleOutOfOrderIsAViolation(t *testing.T) {
	s := newPlannedSession(t, func(f *fakeV2, req workloads.Request) {
		f.report(req.ID, workloads.StepInvoke, workloads.OpAcquire)
		f.report(req.ID, workloads.StepInvoke, workloads.OpRelease)
	})
	runOneCycle(t, s)
	if !s.dead || len(s.r.violations) != 1 || !strings.Contains(s.r.violations[0], "want its acquire completion") {
		t.Fatalf("dead %v, violations %v", s.dead, s.r.violations)
	}
	if got, want := opsString(loadHistory(t, s)), "invoke acquire, info acquire"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// TestV1WorkerGetsSteps: a worker that did not agree to v2 is sent the cycle's
// steps one by one, as before.
func TestV1WorkerGetsSteps(t *testing.T) {
	var ops []string
	s := newPlannedSession(t, func(f *fakeV2, req workloads.Request) {
		ops = append(ops, req.Op)
		f.reply(req.ID)
	})
	s.w.protocol = 1
	runOneCycle(t, s)
	if got, want := strings.Join(ops, " "), "acquire release"; got != want {
		t.Errorf("requests %q, want %q", got, want)
	}
	if got, want := opsString(loadHistory(t, s)), "invoke acquire, ok acquire, invoke release, ok release"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
}
