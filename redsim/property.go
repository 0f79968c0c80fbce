package redsim

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"
	"testing/cryptotest"
	"testing/synctest"

	"pgregory.net/rapid"
)

// RunInfo is what one run of the lock property did.
type RunInfo struct {
	// Schedule is the run's clients, instances and steps (not the liveness phase's).
	Schedule Schedule
	// Failure is the property the run broke; nil when it passed.
	Failure *Failure
	// Trace tells the run: each step, the requests it served and their replies,
	// the recipe's log lines, the liveness phase.
	Trace []string
}

// CheckLock checks the lock property of cfg.Recipe with rapid: each check is one
// run of a schedule rapid draws, checked after every step for mutual exclusion,
// then driven with faults off for liveness, and checked for an orphaned key. A
// failure is shrunk to a short schedule, which t's log shows step by step. The
// number of checks is rapid's -rapid.checks (100 by default).
func CheckLock(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) {
	t.Helper()
	rapid.Check(t, LockProperty(t, cfg, onRun...))
}

// LockProperty returns the lock property of CheckLock, for rapid.Check and its
// relatives. Each run takes place in a synctest bubble of t, with crypto/rand made
// deterministic (testing/cryptotest, the same seed in every run: so t and its
// ancestors must not be parallel). onRun, if given, is called after every run.
//
// The first run that fails is replayed twice before rapid may shrink it, and the
// replays' traces compared with its own: if they differ, the recipe is not
// deterministic under the simulator, and t fails saying where, rather than let
// rapid shrink noise.
func LockProperty(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) func(*rapid.T) {
	checked := false
	return func(rt *rapid.T) {
		n := cfg.Clients
		if n == 0 {
			n = rapid.IntRange(2, 4).Draw(rt, "clients")
		}
		leftOut := map[StepKind]bool{}
		for _, k := range OptionalKinds() {
			if rapid.Bool().Draw(rt, "leave out "+string(k)) {
				leftOut[k] = true
			}
		}
		var run *lockRun
		fail := inBubble(t, func() error {
			var err error
			run, err = newLockRun(cfg, n, rt.Logf)
			if run != nil {
				defer run.teardown()
			}
			if err != nil {
				return err
			}
			run.leftOut = leftOut
			m := actions(run)
			for range repeats {
				rt.Repeat(m)
			}
			if err := run.finish(); err != nil {
				return err
			}
			return run.teardown()
		})
		info := runInfo(run, fail)
		for _, f := range onRun {
			f(info)
		}
		if fail != nil && !checked {
			checked = true
			if d := divergence(t, cfg, info); d != "" {
				t.Fatalf("%s is not deterministic under the simulator, so its failure cannot be shrunk or replayed: %s\nthe schedule:\n%s",
					cfg.Recipe.Name, d, info.Schedule)
			}
		}
		if fail != nil {
			rt.Logf("the schedule, for ParseSchedule and ReplayLock:\n%s", info.Schedule)
			rt.Fatal(fail)
		}
	}
}

func runInfo(run *lockRun, fail *Failure) RunInfo {
	info := RunInfo{Failure: fail}
	if run != nil {
		info.Schedule = Schedule{Clients: len(run.slots), Instances: run.cfg.Instances, Steps: run.steps}
		info.Trace = run.trace
	}
	return info
}

// repeats is the number of rapid Repeats a run makes (30 steps each on average).
const repeats = 3

// OptionalKinds lists the kinds a random run may leave out altogether (swarm
// testing): a run without releases builds contention, one whose only fault is a
// clock jump jumps often.
func OptionalKinds() []StepKind {
	return []StepKind{StepRelease, StepTimeout, StepLoseReply, StepDrop, StepDelay, StepCrash, StepJump, StepRestart}
}

// actions is the rapid state machine of a run: one action per kind of client
// step, one for all faults, and the mutual exclusion invariant.
func actions(run *lockRun) map[string]func(*rapid.T) {
	m := map[string]func(*rapid.T){
		"": func(*rapid.T) {
			if err := run.checkExclusion(); err != nil {
				panic(err)
			}
		},
	}
	var faults []StepKind
	for _, kind := range StepKinds() {
		if kind.IsFault() {
			faults = append(faults, kind)
			continue
		}
		m[string(kind)] = func(rt *rapid.T) { runStep(rt, run, []StepKind{kind}) }
	}
	m["fault"] = func(rt *rapid.T) { runStep(rt, run, faults) }
	return m
}

// runStep draws one of kinds that the run may take now, a target that can take it
// and, for a tick or a jump, a duration; it skips the action when none is possible.
func runStep(rt *rapid.T, run *lockRun, kinds []StepKind) {
	var possible []StepKind
	for _, k := range kinds {
		if !slices.Contains(run.cfg.Without, k) && !run.leftOut[k] && len(run.targets(k)) > 0 {
			possible = append(possible, k)
		}
	}
	if len(possible) == 0 {
		rt.Skip("no step of this kind is possible")
	}
	kind := kinds[pick(rt, "kind", len(kinds), func(i int) bool { return slices.Contains(possible, kinds[i]) })]
	ts := run.targets(kind)
	n := len(run.slots)
	if kind.onInstance() {
		n = run.cfg.Instances
	}
	st := Step{Kind: kind}
	if kind != StepTick {
		st.Target = pick(rt, "target", n, func(i int) bool { return slices.Contains(ts, i) })
	}
	if kind.timed() {
		ds := run.cfg.durations()
		st.D = ds[rapid.IntRange(0, len(ds)-1).Draw(rt, "duration")]
	}
	if err := run.do(st); err != nil {
		panic(failf(FailHarness, "%v", err))
	}
}

// pick draws one of 0..n-1 and returns the first from there on, round, for which ok
// holds (one must): a step keeps its target when rapid shrinks an earlier one away.
func pick(rt *rapid.T, label string, n int, ok func(int) bool) int {
	d := 0
	if n > 1 {
		d = rapid.IntRange(0, n-1).Draw(rt, label)
	}
	for k := range n {
		if i := (d + k) % n; ok(i) {
			return i
		}
	}
	panic("pick: nothing to pick")
}

// ReplayLock runs one explicit schedule of the lock property in a synctest bubble
// of t, exactly as a run of CheckLock: the steps, each checked for mutual
// exclusion, then the liveness phase and the orphan check. cfg.Instances is taken
// from the schedule. It returns an error when a step is not possible at its turn.
func ReplayLock(t *testing.T, cfg LockConfig, s Schedule) (RunInfo, error) {
	t.Helper()
	cfg.Instances = s.Instances
	var run *lockRun
	var bad error
	fail := inBubble(t, func() error {
		var err error
		run, err = newLockRun(cfg, s.Clients, nil)
		if run != nil {
			defer run.teardown()
		}
		if err != nil {
			return err
		}
		for _, st := range s.Steps {
			if err := run.do(st); err != nil {
				bad = err
				return nil
			}
			if err := run.checkExclusion(); err != nil {
				return err
			}
		}
		if err := run.finish(); err != nil {
			return err
		}
		return run.teardown()
	})
	return runInfo(run, fail), bad
}

// seed is crypto/rand's seed in every run: random lock values and backoffs are the
// same in every replay.
const seed = 43

// inBubble runs f in a new synctest bubble of t, crypto/rand seeded, and returns
// its failure. A *Failure that f panics with is returned too; any other panic is
// raised again outside the bubble.
func inBubble(t *testing.T, f func() error) (fail *Failure) {
	// go-redis keeps the timers of its pool's semaphore in a sync.Pool
	// (internal/semaphore.go's semTimers): one made in the last run's bubble, taken
	// in this one, is a channel of another bubble, which the runtime refuses
	// ("select on synctest channel from outside bubble"). Two collections empty
	// every sync.Pool.
	runtime.GC()
	runtime.GC()
	var p any
	synctest.Test(t, func(bt *testing.T) {
		cryptotest.SetGlobalRandom(bt, seed)
		defer func() {
			p = recover()
			if pf, ok := p.(*Failure); ok {
				fail, p = pf, nil
			} else if re, ok := p.(runtime.Error); ok {
				p = fmt.Sprintf("%v\n%s", re, debug.Stack())
			}
		}()
		if err := f(); err != nil {
			if fail, _ = err.(*Failure); fail == nil {
				fail = failf(FailHarness, "%v", err)
			}
		}
	})
	if p != nil {
		panic(p)
	}
	return fail
}

// divergence replays a failed run's schedule twice and returns where a replay's
// trace first differs from the run's, or "" when both agree.
func divergence(t *testing.T, cfg LockConfig, ri RunInfo) string {
	want := ri.Trace
	for i := range 2 {
		again, err := ReplayLock(t, cfg, ri.Schedule)
		if err != nil {
			return fmt.Sprintf("replay %d: %v", i+1, err)
		}
		got := again.Trace
		for j := range max(len(got), len(want)) {
			var w, g string
			if j < len(want) {
				w = want[j]
			}
			if j < len(got) {
				g = got[j]
			}
			if w != g {
				return fmt.Sprintf("replay %d diverged at trace line %d:\n  run:    %s\n  replay: %s", i+1, j+1, w, g)
			}
		}
	}
	return ""
}
