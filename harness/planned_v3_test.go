package harness

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Protocol v3 on the FAKE worker of planned_test.go: one report per op, its
// completion carrying its invoke's time, and no reply when the last report ends the
// cycle.

// completion sends a v3 report of cycle id: op f invoked at inv, completed now.
func (f *fakeV2) completion(id int64, step, op string, inv int64) {
	now := f.mono()
	f.say(workloads.Message{ID: &id, Step: step, F: op, MonoNS: &now, InvokeNS: &inv})
}

// newV3Session is newPlannedSession with a worker that agreed to v3.
func newV3Session(t *testing.T, script func(f *fakeV2, req workloads.Request)) *plannedRun {
	s := newPlannedSession(t, script)
	s.w.protocol = workloads.ProtocolV3
	return s
}

// TestV3CycleRecordsBothTimesOfEachReport: each report gives its op's invoke and
// completion at the worker's times; the worker counts as holding during its hold and
// releasing once the hold has run out; the cycle ends at the last report, no reply.
// (The hold is long enough that a loaded machine still sees the worker holding.)
func TestV3CycleRecordsBothTimesOfEachReport(t *testing.T) {
	const hold = 300 * time.Millisecond
	var acqAt, relAt int64
	var inHold, afterHold workloads.State
	s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
		acqAt = f.mono()
		time.Sleep(5 * time.Millisecond)
		grant := f.mono()
		f.completion(req.ID, workloads.StepOK, workloads.OpAcquire, acqAt)
		for deadline := time.Now().Add(hold / 2); f.s.w.State() != workloads.Holding && time.Now().Before(deadline); {
			time.Sleep(100 * time.Microsecond)
		}
		inHold = f.s.w.State()
		for f.mono() < grant+(hold+20*time.Millisecond).Nanoseconds() {
			time.Sleep(time.Millisecond)
		}
		afterHold = f.s.w.State()
		relAt = f.mono()
		f.completion(req.ID, workloads.StepOK, workloads.OpRelease, relAt)
	})
	done := make(chan struct{})
	go func() {
		runCycleHolding(t, s, hold)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the cycle did not end at its last report (it waited for a reply v3 does not send)")
	}
	if s.dead || len(s.r.violations) > 0 {
		t.Fatalf("dead %v, violations %v", s.dead, s.r.violations)
	}
	if inHold != workloads.Holding || afterHold != workloads.Releasing {
		t.Errorf("state during the hold %s, after it %s; want holding, releasing", inHold, afterHold)
	}
	h := loadHistory(t, s)
	if got, want := opsString(h), "invoke acquire, ok acquire, invoke release, ok release"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	bound := 2*s.w.clock.Err + int64(time.Millisecond)
	for i, at := range map[int]int64{0: acqAt, 2: relAt} {
		if mapped := at - clockAhead.Nanoseconds(); h[i].Time < mapped-bound || h[i].Time > mapped+bound {
			t.Errorf("op %d at %d, want the worker's invoke time %d ± %d", i, h[i].Time, mapped, bound)
		}
	}
	if waited := time.Duration(h[1].Time - h[0].Time); waited < 4*time.Millisecond {
		t.Errorf("acquire recorded as taking %s, it took 5ms", waited)
	}
}

// TestV3LostDuringHoldWaitsForTheNextLine: a lost event while holding ends the hold
// when the reply follows it (nothing was in flight) and changes nothing when a
// release report follows it (the release was in flight: its outcome decides).
func TestV3LostDuringHoldWaitsForTheNextLine(t *testing.T) {
	lost := workloads.Message{Event: workloads.EventLost, Error: "fake: session expired"}
	cases := []struct {
		name string
		then func(f *fakeV2, id int64, inv int64)
		want string
	}{
		{"reply", func(f *fakeV2, id, _ int64) { f.reply(id) },
			"invoke acquire, ok acquire, invoke release (lost), ok release (lost)"},
		{"release report", func(f *fakeV2, id, inv int64) { f.completion(id, workloads.StepFail, workloads.OpRelease, inv) },
			"invoke acquire, ok acquire, invoke release, fail release"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
				f.completion(req.ID, workloads.StepOK, workloads.OpAcquire, f.mono())
				time.Sleep(5 * time.Millisecond)
				inv := f.mono()
				f.say(lost)
				c.then(f, req.ID, inv)
			})
			runOneCycle(t, s)
			if s.dead || len(s.r.violations) > 0 {
				t.Fatalf("dead %v, violations %v", s.dead, s.r.violations)
			}
			if got := opsString(loadHistory(t, s)); got != c.want {
				t.Fatalf("history %q, want %q", got, c.want)
			}
		})
	}
}

// TestV3CrashRecordsTheUnreportedOpFromItsEarliestTime: a worker that dies before
// reporting an op may have invoked it: the op is recorded from the earliest moment it
// could have been invoked (the plan's send; the hold's end), as info.
func TestV3CrashRecordsTheUnreportedOpFromItsEarliestTime(t *testing.T) {
	t.Run("before the grant", func(t *testing.T) {
		var sentBy int64
		s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
			sentBy = f.s.r.rec.now()
			time.Sleep(20 * time.Millisecond)
			f.out.CloseWithError(errors.New("fake: worker exited"))
		})
		runOneCycle(t, s)
		h := loadHistory(t, s)
		if got, want := opsString(h), "invoke acquire, info acquire"; got != want {
			t.Fatalf("history %q, want %q", got, want)
		}
		if h[0].Time > sentBy {
			t.Errorf("acquire invoked at %d, after the plan reached the worker (%d)", h[0].Time, sentBy)
		}
	})
	t.Run("after the hold", func(t *testing.T) {
		var grant int64
		s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
			f.completion(req.ID, workloads.StepOK, workloads.OpAcquire, f.mono())
			grant = f.s.r.rec.now()
			time.Sleep(50 * time.Millisecond) // the hold is 1 ms
			f.out.CloseWithError(errors.New("fake: worker exited"))
		})
		runOneCycle(t, s)
		h := loadHistory(t, s)
		if got, want := opsString(h), "invoke acquire, ok acquire, invoke release, info release"; got != want {
			t.Fatalf("history %q, want %q", got, want)
		}
		if late := time.Duration(h[2].Time - grant); late > 10*time.Millisecond {
			t.Errorf("release invoked %s after the grant: want the hold's end (1 ms), not the crash's discovery", late)
		}
	})
}

// TestV3InvokeReportIsAViolation: a worker that agreed to v3 and reports an invoke
// breaks the protocol.
func TestV3InvokeReportIsAViolation(t *testing.T) {
	s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
		f.report(req.ID, workloads.StepInvoke, workloads.OpAcquire)
	})
	runOneCycle(t, s)
	if !s.dead || len(s.r.violations) != 1 || !strings.Contains(s.r.violations[0], "want its acquire report") {
		t.Fatalf("dead %v, violations %v", s.dead, s.r.violations)
	}
	h := loadHistory(t, s)
	if got, want := opsString(h), "invoke acquire, info acquire"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// TestV3LostBetweenNestedReleases: a reentrant cycle that released its inner level
// and lost the lock before the outer release ends with the reply: the outer level is
// recorded as a lost release, not a protocol violation.
func TestV3LostBetweenNestedReleases(t *testing.T) {
	s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
		if req.Depth != 2 {
			t.Errorf("want a cycle of depth 2, got %+v", req)
		}
		for _, op := range []string{workloads.OpAcquire, workloads.OpAcquire, workloads.OpRelease} {
			f.completion(req.ID, workloads.StepOK, op, f.mono())
		}
		f.say(workloads.Message{Event: workloads.EventLost, Error: "fake: session expired"})
		f.reply(req.ID)
	})
	if err := s.syncClock(); err != nil {
		t.Fatal(err)
	}
	runNestedCycle(t, s)
	want := "invoke acquire, ok acquire, invoke acquire, ok acquire, invoke release, ok release, invoke release (lost), ok release (lost)"
	if got := opsString(loadHistory(t, s)); got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// TestV3InnerReleaseDoesNotPushTheOuterOne: with a clock known only to within a wide
// error, a reentrant cycle's inner acquire and release complete at their earliest
// bound, so the outer release, invoked a microsecond after the inner one, is recorded
// no later than its true time (the recorder keeps a process's ops in order: a padded
// inner completion would have pushed the outer invoke later, past a grant that
// release made).
func TestV3InnerReleaseDoesNotPushTheOuterOne(t *testing.T) {
	var outerAt int64
	const err = 20 * time.Millisecond // a clock synced on a loaded machine
	s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
		f.completion(req.ID, workloads.StepOK, workloads.OpAcquire, f.mono())
		// Held for more than twice the clock's error: the outer ops' own bounds do not
		// cross, only the inner ones', back to back, could.
		time.Sleep(3 * err)
		f.completion(req.ID, workloads.StepOK, workloads.OpAcquire, f.mono())
		// The inner release and the outer one, back to back; the harness reads their
		// reports late (a loaded machine), after the outer release is long done.
		inner := f.mono()
		innerDone := inner + 1000
		outerAt = innerDone + 1000
		time.Sleep(err)
		id := req.ID
		f.say(workloads.Message{ID: &id, Step: workloads.StepOK, F: workloads.OpRelease, MonoNS: &innerDone, InvokeNS: &inner})
		f.completion(req.ID, workloads.StepOK, workloads.OpRelease, outerAt)
	})
	if err := s.syncClock(); err != nil {
		t.Fatal(err)
	}
	s.w.clock.Err = err.Nanoseconds()
	runNestedCycle(t, s)
	h := loadHistory(t, s)
	if got, want := opsString(h), "invoke acquire, ok acquire, invoke acquire, ok acquire, invoke release, ok release, invoke release, ok release"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
	truth := outerAt - s.w.clock.Offset
	if h[6].Time > truth {
		t.Errorf("the outer release is recorded at %d, after its true invoke %d (by %s)", h[6].Time, truth, time.Duration(h[6].Time-truth))
	}
}

// runNestedCycle runs a reentrant cycle of depth 2 (1 ms hold) on s, which must end
// with no violation.
func runNestedCycle(t *testing.T, s *plannedRun) {
	t.Helper()
	wl := workloads.Config{Kind: workloads.Reentrant, MaxDepth: 2, HoldMin: time.Millisecond, HoldMax: time.Millisecond}.Defaults()
	var c *workloads.Cycle
	for seed := uint64(0); c == nil; seed++ {
		if cand := wl.NewCycle(rand.New(rand.NewPCG(seed, 1)), 0); func() bool { p, _ := cand.Plan(); return p.Depth == 2 }() {
			c = cand
		}
	}
	s.runCycle(c, func(workloads.Step) time.Duration { return 5 * time.Second })
	if s.dead || len(s.r.violations) > 0 {
		t.Fatalf("dead %v, violations %v", s.dead, s.r.violations)
	}
}

// TestV3LostDuringANestedAcquireEndsTheOuterHold: a re-entrant worker holding its
// outer level whose session is lost while a nested acquire is in flight reports that
// acquire's unknown outcome and ends its cycle there, releasing nothing: the lost
// event ended the outer level too: the nested acquire holds nothing (a fail) and the
// outer release is recorded as lost. Else the history would keep it held for ever and a later grant to another would read as an overlap
// (seen: TestEveryKindRunsValid/mariadb-getlock, a server killed as a nested
// GET_LOCK was asked).
func TestV3LostDuringANestedAcquireEndsTheOuterHold(t *testing.T) {
	lost := workloads.Message{Event: workloads.EventLost, Error: "fake: the connection was closed, and the session's locks with it"}
	s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
		if req.Depth < 2 {
			t.Errorf("want a nested cycle, got depth %d", req.Depth)
			return
		}
		f.completion(req.ID, workloads.StepOK, workloads.OpAcquire, f.mono())
		inv := f.mono()
		f.say(lost)
		time.Sleep(5 * time.Millisecond)
		f.completion(req.ID, workloads.ReplyInfo, workloads.OpAcquire, inv) // the worker's cycle ends here
	})
	c := nestedCycle(t, s, time.Millisecond)
	done := make(chan struct{})
	go func() {
		s.runCycle(c, func(workloads.Step) time.Duration { return 5 * time.Second })
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the cycle did not end at the nested acquire's report")
	}
	if s.dead || len(s.r.violations) > 0 {
		t.Fatalf("dead %v, violations %v", s.dead, s.r.violations)
	}
	if got, want := opsString(loadHistory(t, s)), "invoke acquire, ok acquire, invoke acquire, fail acquire, invoke release (lost), ok release (lost)"; got != want {
		t.Fatalf("history %q, want %q", got, want)
	}
}

// TestV3KillDuringANestedAcquireEndsTheOuterHold: a re-entrant worker that a fault
// kills while a nested acquire is in flight held its outer level until the kill: the
// nested acquire holds nothing (a fail: the worker is dead) and the outer release is
// recorded as invoked at the kill, of unknown outcome. Else the nested acquire's info
// would keep the dead worker holding for ever, and the next grant to another would
// read as an overlap (seen: TestEveryKindRunsValid/mariadb-getlock, a holder killed as
// its nested GET_LOCK was asked). A worker that dies of itself keeps the info.
func TestV3KillDuringANestedAcquireEndsTheOuterHold(t *testing.T) {
	for _, c := range []struct {
		name   string
		killed bool
		want   string
	}{
		{"killed by a fault", true, "invoke acquire, ok acquire, invoke acquire, fail acquire, invoke release, info release"},
		{"died of itself", false, "invoke acquire, ok acquire, invoke acquire, info acquire"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var killedAt int64
			s := newV3Session(t, func(f *fakeV2, req workloads.Request) {
				if req.Depth < 2 {
					t.Errorf("want a nested cycle, got depth %d", req.Depth)
					return
				}
				f.completion(req.ID, workloads.StepOK, workloads.OpAcquire, f.mono())
				time.Sleep(5 * time.Millisecond) // the nested acquire is asked
				if c.killed {
					killedAt = f.s.r.rec.now()
					f.s.w.killedAt.Store(killedAt)
				}
				time.Sleep(5 * time.Millisecond) // the harness sees the death later
				f.out.CloseWithError(errors.New("fake: worker gone"))
			})
			cyc := nestedCycle(t, s, time.Second)
			s.runCycle(cyc, func(workloads.Step) time.Duration { return 5 * time.Second })
			h := loadHistory(t, s)
			if got := opsString(h); got != c.want {
				t.Fatalf("history %q, want %q", got, c.want)
			}
			if c.killed && h[4].Time > killedAt {
				t.Errorf("outer release invoked at %d, after the kill at %d", h[4].Time, killedAt)
			}
		})
	}
}

// nestedCycle syncs s's clock and returns a re-entrant cycle of s's workload that
// nests two levels and holds for hold.
func nestedCycle(t *testing.T, s *plannedRun, hold time.Duration) *workloads.Cycle {
	t.Helper()
	if err := s.syncClock(); err != nil {
		t.Fatal(err)
	}
	wl := s.r.cfg.Workload
	wl.Kind, wl.MaxDepth, wl.HoldMin, wl.HoldMax = workloads.Reentrant, 2, hold, hold
	for seed := uint64(1); seed < 100; seed++ {
		c := wl.NewCycle(rand.New(rand.NewPCG(seed, 2)), 0)
		if plan, _ := c.Plan(); plan.Depth == 2 {
			return c
		}
	}
	t.Fatal("no seed below 100 gives a cycle that nests")
	return nil
}
