package zksim

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"pgregory.net/rapid"
)

// RunInfo is what one run of the lock property did.
type RunInfo struct {
	// Schedule is the run's clients and steps (not those of the liveness phase).
	Schedule Schedule
	// Failure is the property the run broke; nil when it passed.
	Failure *Failure

	run *lockRun
}

// Trace tells the run: each step and what it did, the recipe's log lines, the
// liveness phase.
func (ri RunInfo) Trace() []string {
	if ri.run == nil {
		return nil
	}
	return ri.run.lines()
}

// CheckLock checks the lock property of cfg.Recipe with rapid: each check is one run
// of a schedule rapid draws (clients, then steps: client steps and faults), checked
// after every step for mutual exclusion, then driven to the end with faults off for
// liveness, checked for orphaned lock nodes, and its history checked by models'
// mutex checker. A failure is shrunk to a short schedule, which t's log shows step by
// step. The number of checks is rapid's -rapid.checks (100 by default).
func CheckLock(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) {
	t.Helper()
	rapid.Check(t, LockProperty(t, cfg, onRun...))
}

// LockProperty returns the lock property of CheckLock, for rapid.Check and its
// relatives. Each run takes place in a synctest bubble of t. onRun, if given, is
// called after every run; after a failed rapid.Check, the last call is the shrunk
// counterexample's replay.
//
// The first run that fails is replayed twice before rapid may shrink it, and the
// replays' traces compared with its own: if they differ, the recipe (or its client
// library) is not deterministic under the simulator, and t fails saying so and
// where they diverged, rather than let rapid shrink noise.
func LockProperty(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) func(*rapid.T) {
	checked := false
	return func(rt *rapid.T) {
		n := cfg.Clients
		if n == 0 {
			n = rapid.IntRange(2, 5).Draw(rt, "clients")
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
			if run, err = newLockRun(cfg, n, rt.Logf); err != nil {
				return err
			}
			defer run.teardown()
			run.leftOut = leftOut
			m := actions(run)
			for range repeats {
				rt.Repeat(m)
			}
			return run.finish()
		})
		info := RunInfo{Failure: fail, run: run}
		if run != nil {
			info.Schedule = Schedule{Clients: n, Steps: run.steps}
		}
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
		}
		report(rt, fail)
	}
}

// repeats is the number of rapid Repeats a run makes. A Repeat takes 30 steps on
// average (rapid's -rapid.steps); a lock needs more to build a queue, interleave its
// clients and break it.
const repeats = 3

// report fails rt with f. Each kind fails from its own line, so that rapid (which
// tells failures apart by where they happened) shrinks a failure into the same kind.
func report(rt *rapid.T, f *Failure) {
	if f == nil {
		return
	}
	switch f.Kind {
	case FailExclusion:
		rt.Fatal(f)
	case FailModel:
		rt.Fatal(f)
	case FailLiveness:
		rt.Fatal(f)
	case FailOrphan:
		rt.Fatal(f)
	default:
		rt.Fatal(f)
	}
}

// actionKey is one action of the rapid state machine: a name and the step kinds it
// draws from.
type actionKey struct {
	name  string
	kinds []StepKind
}

// actionKeys are the actions of the state machine: one per kind of client step, and
// one for all faults, so that faults come about as often as one kind of client step.
func actionKeys() []actionKey {
	var keys []actionKey
	var faults []StepKind
	for _, kind := range StepKinds() {
		if kind.IsFault() {
			faults = append(faults, kind)
			continue
		}
		keys = append(keys, actionKey{name: string(kind), kinds: []StepKind{kind}})
	}
	return append(keys, actionKey{name: "fault", kinds: faults})
}

// actions is the rapid state machine of a run: its action keys, each skipped when no
// client can take it, and the mutual exclusion invariant.
func actions(run *lockRun) map[string]func(*rapid.T) {
	m := map[string]func(*rapid.T){
		"": func(*rapid.T) {
			if err := run.checkExclusion(); err != nil {
				panic(err)
			}
		},
	}
	for _, key := range actionKeys() {
		m[key.name] = func(rt *rapid.T) { runStep(rt, run, key.kinds) }
	}
	return m
}

// runStep draws one of kinds that the run may take now, and a client that can take
// it, and applies the step; it skips the action when there is none. Both draws are
// over every kind of the action and every client, moved on to the next one that is
// possible: so a step keeps its kind and client when rapid shrinks away an earlier
// step, as long as it is still possible.
func runStep(rt *rapid.T, run *lockRun, kinds []StepKind) {
	possible := run.choices(kinds)
	if len(possible) == 0 {
		rt.Skip("no client can take this step")
	}
	kind := kinds[pick(rt, "fault", len(kinds), func(i int) bool { return slices.Contains(possible, kinds[i]) })]
	ids := run.enabled(kind)
	id := pick(rt, "client", len(run.slots), func(i int) bool { return slices.Contains(ids, i) })
	if err := run.do(Step{Kind: kind, Client: id}); err != nil {
		panic(failf(FailHarness, "%v", err))
	}
}

// pick draws one of 0..n-1 and returns the first from there on, round, for which ok
// holds (one must); it draws nothing when n is 1.
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

// ReplayLock runs one explicit schedule of the lock property in a synctest bubble of
// t: the steps, each checked for mutual exclusion, then the liveness phase and the
// final checks, exactly as a run of CheckLock. It returns an error when a step is not
// possible at its turn.
func ReplayLock(t *testing.T, cfg LockConfig, s Schedule) (RunInfo, error) {
	t.Helper()
	var run *lockRun
	var bad error
	fail := inBubble(t, func() error {
		var err error
		if run, err = newLockRun(cfg, s.Clients, nil); err != nil {
			return err
		}
		defer run.teardown()
		for _, st := range s.Steps {
			if err := run.do(st); err != nil {
				bad = err
				return nil
			}
			if err := run.checkExclusion(); err != nil {
				return err
			}
		}
		return run.finish()
	})
	info := RunInfo{Failure: fail, run: run}
	if run != nil {
		info.Schedule = Schedule{Clients: s.Clients, Steps: run.steps}
	}
	return info, bad
}

// inBubble runs f in a new synctest bubble of t and returns its failure. A *Failure
// that f panics with is returned too; any other panic is raised again outside the
// bubble (a runtime error with the stack where it happened).
func inBubble(t *testing.T, f func() error) (fail *Failure) {
	var p any
	synctest.Test(t, func(*testing.T) {
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
// trace first differs from the run's (GUIDs masked), or "" when both agree.
func divergence(t *testing.T, cfg LockConfig, ri RunInfo) string {
	want := ri.Trace()
	for i := range 2 {
		again, err := ReplayLock(t, cfg, ri.Schedule)
		if err != nil {
			return fmt.Sprintf("replay %d: %v", i+1, err)
		}
		got := again.Trace()
		for j := range max(len(got), len(want)) {
			var w, g string
			if j < len(want) {
				w = watchesLast(maskGUIDs(want[j]))
			}
			if j < len(got) {
				g = watchesLast(maskGUIDs(got[j]))
			}
			if w != g {
				return fmt.Sprintf("replay %d diverged at trace line %d:\n  run:    %s\n  replay: %s", i+1, j+1, w, g)
			}
		}
	}
	return ""
}

// watchesLast is a trace line with its setWatches requests moved to its end, in their
// order. go-zookeeper re-sends a reconnected session's watches from a goroutine of its
// own (conn.go's sendSetWatches), racing the requests its client queued meanwhile: where
// the setWatches lands among them is the library's scheduling, not the recipe's, and
// was the one divergence seen in replays (TestWireRaceMutantsAreCaught under make
// test's load, 2026-11-29). Every other order still counts.
func watchesLast(line string) string {
	head, body, ok := strings.Cut(line, ": ")
	if !ok || !strings.Contains(body, "setWatches ") {
		return line
	}
	var rest, watches []string
	for _, req := range strings.Split(body, "; ") {
		if strings.HasPrefix(req, "setWatches ") {
			watches = append(watches, req)
		} else {
			rest = append(rest, req)
		}
	}
	return head + ": " + strings.Join(append(rest, watches...), "; ")
}
