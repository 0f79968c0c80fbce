package simsched

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// Run is one run of a lock property: a simulator's lock run, as the property
// drives it.
type Run[K Kind] interface {
	// Do applies a step of the schedule, which must be possible now, and takes in
	// what the recipe did; it returns an error when the step is not possible.
	Do(st Step[K]) error
	// CheckExclusion is the invariant checked after every step.
	CheckExclusion() error
	// Finish ends the run: the liveness phase and the final checks.
	Finish() error
	// Teardown ends every recipe goroutine; a second call does nothing.
	Teardown() error
	// Choices returns the kinds among kinds that a random step may take now.
	Choices(kinds []K) []K
	// Targets returns how many targets a random step of kind is drawn from (a
	// draw of one of them moves on to the next that can take it), and those that
	// can take it now.
	Targets(kind K) (n int, can []int)
	// Durations are what a timed step's duration is drawn from, the smallest first.
	Durations() []time.Duration
	// Clients is the run's number of clients; Steps its steps so far.
	Clients() int
	Steps() []Step[K]
	// Schedule renders the run's schedule so far, for ParseSchedule.
	Schedule() string
	// Trace tells the run so far: each step and what it did.
	Trace() []string
}

// Property is a simulator's lock property: what CheckLock checks with rapid and
// ReplayLock replays. I is what the simulator tells of a run (its RunInfo).
type Property[K Kind, R Run[K], I any] struct {
	// Recipe names the recipe under test.
	Recipe string
	// Clients is the number of clients; 0 lets each run draw 2 to MaxClients.
	Clients, MaxClients int
	// Kinds lists every step kind; Optional those a random run may leave out
	// altogether (swarm testing).
	Kinds, Optional []K
	// Start starts a run in the bubble: clients clients, leaving the kinds in
	// leftOut out of its random steps (nil for a replay), each trace line to logf
	// (nil: none). It returns the run it started even with an error, after tearing
	// down what needs it.
	Start func(clients int, leftOut map[K]bool, logf func(string, ...any)) (R, error)
	// Bubble sets up each run's bubble.
	Bubble Bubble
	// Same, if set, rewrites a trace line before it is compared with a replay's:
	// what may differ between two replays that are the same run.
	Same func(line string) string
	// Info tells of a run that ended with fail (nil if it passed).
	Info func(run R, fail *Failure) I
}

// repeats is the number of rapid Repeats a run makes. A Repeat takes 30 steps on
// average (rapid's -rapid.steps); a lock needs more to build a queue, interleave
// its clients and break it.
const repeats = 3

// Check returns the property for rapid.Check: each check draws the clients, the
// kinds the run leaves out and the steps, runs them in a bubble of t, checking
// mutual exclusion after every step, then finishes the run. Each onRun is called
// after every run with what Info tells of it.
//
// The first run that fails is replayed twice before rapid may shrink it, and the
// replays' traces compared with its own: if they differ, the recipe is not
// deterministic under the simulator, and t fails saying where, rather than let
// rapid shrink noise.
func (p Property[K, R, I]) Check(t *testing.T, onRun ...func(I)) func(*rapid.T) {
	return p.check(t, nil, onRun...)
}

// CheckMinimized is rapid.Check of Check, followed, when it fails, by the
// minimizing pass (MinimizeRecorded): t's log then shows the shortest schedule
// found, its failure and its trace.
func (p Property[K, R, I]) CheckMinimized(t *testing.T, onRun ...func(I)) {
	t.Helper()
	var rec Record[K]
	defer func() { // also when rapid.Check ends the test with FailNow
		if rec.Last == nil || !t.Failed() {
			return
		}
		if run, fail, found, done := p.minimizeRecorded(t, &rec); found {
			t.Logf("%s", minimizedReport(rec.LastSteps, len(run.Steps()), done, run.Schedule(), fail, run.Trace()))
		}
	}()
	rapid.Check(t, p.CheckRecorded(t, &rec, onRun...))
}

// Record is what CheckRecorded keeps of a check's runs: the shortest failing
// schedules, and the last run's failure (rapid's shrunk counterexample, when the
// check failed) and its number of steps.
type Record[K Kind] struct {
	Failing   Candidates[K]
	Last      *Failure
	LastSteps int
}

// MinimizeRecorded minimizes the failing schedules rec kept that failed as its
// last run did (MinimizeBest, for at most MinimizeBudget), and replays the
// shortest found: what Info tells of it; found is false when rec has none.
func (p Property[K, R, I]) MinimizeRecorded(t *testing.T, rec *Record[K]) (info I, found, done bool) {
	t.Helper()
	run, fail, found, done := p.minimizeRecorded(t, rec)
	if !found {
		return info, false, done
	}
	return p.Info(run, fail), true, done
}

// minimizeRecorded is MinimizeRecorded's run of the shortest schedule found.
func (p Property[K, R, I]) minimizeRecorded(t *testing.T, rec *Record[K]) (run R, fail *Failure, found, done bool) {
	if rec.Last == nil {
		return run, nil, false, true
	}
	best, found, done := p.MinimizeBest(t, rec.Failing, rec.Last.Kind, MinimizeBudget)
	if found {
		run, fail, _ = p.replay(t, best.Clients, best.Steps)
	}
	return run, fail, found, done
}

// CheckRecorded is Check, keeping in rec the shortest failing schedules and the
// last run's failure, for MinimizeRecorded.
func (p Property[K, R, I]) CheckRecorded(t *testing.T, rec *Record[K], onRun ...func(I)) func(*rapid.T) {
	return p.check(t, rec, onRun...)
}

// check is Check, keeping in rec what CheckRecorded says (rec may be nil).
func (p Property[K, R, I]) check(t *testing.T, rec *Record[K], onRun ...func(I)) func(*rapid.T) {
	checked := false
	return func(rt *rapid.T) {
		n := p.Clients
		if n == 0 {
			n = rapid.IntRange(2, p.MaxClients).Draw(rt, "clients")
		}
		leftOut := map[K]bool{}
		for _, k := range p.Optional {
			if rapid.Bool().Draw(rt, "leave out "+string(k)) {
				leftOut[k] = true
			}
		}
		var run R
		fail := p.Bubble.Run(t, func() error {
			var err error
			if run, err = p.Start(n, leftOut, rt.Logf); err != nil {
				return err
			}
			defer run.Teardown()
			m := p.actions(run)
			for range repeats {
				rt.Repeat(m)
			}
			if err := run.Finish(); err != nil {
				return err
			}
			return run.Teardown()
		})
		if rec != nil {
			rec.Last = fail
			if fail != nil {
				rec.LastSteps = len(run.Steps())
				rec.Failing.Add(Candidate[K]{Clients: run.Clients(), Steps: run.Steps(), Kind: fail.Kind})
			}
		}
		info := p.Info(run, fail)
		for _, f := range onRun {
			f(info)
		}
		if fail != nil && !checked {
			checked = true
			if d := p.Divergence(t, run.Trace(), run.Clients(), run.Steps()); d != "" {
				if rec != nil {
					rec.Last = nil // nothing to minimize: a replay is not the run
				}
				t.Fatalf("%s is not deterministic under the simulator, so its failure cannot be shrunk or replayed: %s\nthe schedule:\n%s",
					p.Recipe, d, run.Schedule())
			}
		}
		if fail != nil {
			rt.Logf("the schedule, for ParseSchedule and ReplayLock:\n%s", run.Schedule())
		}
		report(rt, fail)
	}
}

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

// ActionKey is one action of the rapid state machine: a name and the step kinds
// it draws from.
type ActionKey[K Kind] struct {
	Name  string
	Kinds []K
}

// ActionKeys are the actions of the state machine over kinds: one per kind of
// client step, and one for all faults, so that faults come about as often as one
// kind of client step.
func ActionKeys[K Kind](kinds []K) []ActionKey[K] {
	var keys []ActionKey[K]
	var faults []K
	for _, kind := range kinds {
		if kind.IsFault() {
			faults = append(faults, kind)
			continue
		}
		keys = append(keys, ActionKey[K]{Name: string(kind), Kinds: []K{kind}})
	}
	return append(keys, ActionKey[K]{Name: "fault", Kinds: faults})
}

// actions is the rapid state machine of a run: its action keys, each skipped when
// no step of it is possible, and the mutual exclusion invariant.
func (p Property[K, R, I]) actions(run R) map[string]func(*rapid.T) {
	m := map[string]func(*rapid.T){
		"": func(*rapid.T) {
			if err := run.CheckExclusion(); err != nil {
				panic(err)
			}
		},
	}
	for _, key := range ActionKeys(p.Kinds) {
		m[key.Name] = func(rt *rapid.T) { p.step(rt, run, key.Kinds) }
	}
	return m
}

// step draws one of kinds that the run may take now, a target that can take it
// and, for a timed kind, a duration, and applies the step; it skips the action
// when none is possible. The draws of the kind and the target are over all of
// them, moved on to the next one that is possible: so a step keeps its kind and
// target when rapid shrinks away an earlier step, as long as it is still possible.
func (p Property[K, R, I]) step(rt *rapid.T, run R, kinds []K) {
	possible := run.Choices(kinds)
	if len(possible) == 0 {
		rt.Skip("no step of this kind is possible")
	}
	st := Step[K]{Kind: kinds[Pick(rt, "kind", len(kinds), func(i int) bool { return slices.Contains(possible, kinds[i]) })]}
	n, can := run.Targets(st.Kind)
	st.Target = Pick(rt, "target", n, func(i int) bool { return slices.Contains(can, i) })
	if st.Kind.Timed() {
		ds := run.Durations()
		st.D = ds[rapid.IntRange(0, len(ds)-1).Draw(rt, "duration")]
	}
	if err := run.Do(st); err != nil {
		panic(p.Bubble.harness(err))
	}
}

// Pick draws one of 0..n-1 and returns the first from there on, round, for which
// ok holds (one must); it draws nothing when n is 1.
func Pick(rt *rapid.T, label string, n int, ok func(int) bool) int {
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

// Replay runs one explicit schedule, clients clients and steps, in a bubble of t
// exactly as a run of Check: the steps, each checked for mutual exclusion, then
// Finish. It returns what Info tells of the run, and the error of a step that was
// not possible at its turn (the run ends there).
func (p Property[K, R, I]) Replay(t *testing.T, clients int, steps []Step[K]) (I, error) {
	t.Helper()
	run, fail, bad := p.replay(t, clients, steps)
	return p.Info(run, fail), bad
}

// replay is Replay, which returns the run and its failure.
func (p Property[K, R, I]) replay(t *testing.T, clients int, steps []Step[K]) (run R, fail *Failure, bad error) {
	fail = p.Bubble.Run(t, func() error {
		var err error
		if run, err = p.Start(clients, nil, nil); err != nil {
			return err
		}
		defer run.Teardown()
		for _, st := range steps {
			if err := run.Do(st); err != nil {
				bad = err
				return nil
			}
			if err := run.CheckExclusion(); err != nil {
				return err
			}
		}
		if err := run.Finish(); err != nil {
			return err
		}
		return run.Teardown()
	})
	return run, fail, bad
}

// Divergence replays a failed run's schedule (clients and steps) twice and
// returns where a replay's trace first differs from the run's, want (lines
// rewritten by Same), or "" when both agree.
func (p Property[K, R, I]) Divergence(t *testing.T, want []string, clients int, steps []Step[K]) string {
	for i := range 2 {
		again, _, err := p.replay(t, clients, steps)
		if err != nil {
			return fmt.Sprintf("replay %d: %v", i+1, err)
		}
		got := again.Trace()
		for j := range max(len(got), len(want)) {
			var w, g string
			if j < len(want) {
				w = p.same(want[j])
			}
			if j < len(got) {
				g = p.same(got[j])
			}
			if w != g {
				return fmt.Sprintf("replay %d diverged at trace line %d:\n  run:    %s\n  replay: %s", i+1, j+1, w, g)
			}
		}
	}
	return ""
}

// same is line as Same rewrites it.
func (p Property[K, R, I]) same(line string) string {
	if p.Same == nil {
		return line
	}
	return p.Same(line)
}
