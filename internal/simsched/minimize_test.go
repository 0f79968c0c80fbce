package simsched

import (
	"slices"
	"testing"
	"time"
)

// toyRun is a fake simulator's run for the minimizing tests only: it fails with
// FailExclusion once it has seen a "crash" of c1 and, later, a "poke" of c0; a
// "poke" of c1 is impossible after its crash (Do errs), as a step of a dead
// client is in the simulators, so a try keeping one passes.
type toyRun struct {
	steps   []Step[kind]
	crashed bool
	failed  bool
}

func (r *toyRun) Do(st Step[kind]) error {
	if st.Kind == "poke" && st.Target == 1 && r.crashed {
		return errImpossible
	}
	r.steps = append(r.steps, st)
	switch {
	case st.Kind == "crash" && st.Target == 1:
		r.crashed = true
	case st.Kind == "poke" && st.Target == 0 && r.crashed:
		r.failed = true
	}
	return nil
}

var errImpossible = Failf(FailHarness, "not possible")

func (r *toyRun) CheckExclusion() error {
	if r.failed {
		return Failf(FailExclusion, "two holders")
	}
	return nil
}
func (r *toyRun) Finish() error               { return nil }
func (r *toyRun) Teardown() error             { return nil }
func (r *toyRun) Choices(kinds []kind) []kind { return kinds }
func (r *toyRun) Targets(kind) (int, []int)   { return 3, []int{0, 1, 2} }
func (r *toyRun) Durations() []time.Duration  { return []time.Duration{time.Millisecond} }
func (r *toyRun) Clients() int                { return 3 }
func (r *toyRun) Steps() []Step[kind]         { return r.steps }
func (r *toyRun) Schedule() string            { return "" }
func (r *toyRun) Trace() []string             { return nil }

var _ Run[kind] = (*toyRun)(nil)

func toyProperty() Property[kind, *toyRun, []Step[kind]] {
	return Property[kind, *toyRun, []Step[kind]]{
		Recipe: "toy", Kinds: toyKinds(),
		Start: func(int, map[kind]bool, func(string, ...any)) (*toyRun, error) { return &toyRun{}, nil },
		Info:  func(r *toyRun, _ *Failure) []Step[kind] { return r.steps },
	}
}

// TestMinimizeKeepsWhatTheFailureNeeds: of a long failing schedule, the minimizing
// pass keeps the two steps the failure needs, in order; a
// schedule whose failure is of another kind is left alone; a budget of nothing
// returns at once, not done.
func TestMinimizeKeepsWhatTheFailureNeeds(t *testing.T) {
	p := toyProperty()
	poke := func(c int) Step[kind] { return Step[kind]{Kind: "poke", Target: c} }
	crash := func(c int) Step[kind] { return Step[kind]{Kind: "crash", Target: c} }
	tick := Step[kind]{Kind: "tick", D: time.Millisecond}
	long := []Step[kind]{poke(2), tick, poke(0), poke(1), tick, crash(1), poke(2), tick, poke(0), tick, poke(2)}
	if got, _ := p.Minimize(t, 3, []Step[kind]{crash(1), poke(1), poke(0)}, FailExclusion, time.Minute); len(got) != 2 {
		t.Errorf("past an impossible step: minimized to %v, want the crash and the poke of c0", got)
	}
	got, done := p.Minimize(t, 3, long, FailExclusion, time.Minute)
	if want := []Step[kind]{crash(1), poke(0)}; !done || !slices.Equal(got, want) {
		t.Errorf("minimized to %v (done %v), want %v", got, done, want)
	}
	if got, err := p.Replay(t, 3, got); err != nil || len(got) != 2 {
		t.Errorf("the minimized schedule replays as %v (%v)", got, err)
	}
	if got, _ := p.Minimize(t, 3, long, FailLiveness, time.Minute); !slices.Equal(got, long) {
		t.Errorf("a failure of another kind: minimized to %v, want it left alone", got)
	}
	if got, done := p.Minimize(t, 3, long, FailExclusion, 0); done || !slices.Equal(got, long) {
		t.Errorf("no budget: %v (done %v), want the schedule as it was, not done", got, done)
	}
}

// TestMinimizeBestTriesTheShortest: Candidates keeps the shortest failing
// schedules, each once, at most MaxCandidates; MinimizeBest minimizes those of the
// kind asked and returns the shortest result, and finds none of another kind.
func TestMinimizeBestTriesTheShortest(t *testing.T) {
	p := toyProperty()
	poke := func(c int) Step[kind] { return Step[kind]{Kind: "poke", Target: c} }
	crash := func(c int) Step[kind] { return Step[kind]{Kind: "crash", Target: c} }
	var cs Candidates[kind]
	for n := 12; n >= 1; n-- { // n pokes of c2, then the two steps the failure needs
		steps := append(slices.Repeat([]Step[kind]{poke(2)}, n), crash(1), poke(0))
		cs.Add(Candidate[kind]{Clients: 3, Steps: steps, Kind: FailExclusion})
		cs.Add(Candidate[kind]{Clients: 3, Steps: steps, Kind: FailExclusion})
	}
	cs.Add(Candidate[kind]{Clients: 3, Steps: []Step[kind]{poke(0)}, Kind: FailLiveness})
	if len(cs) != MaxCandidates || len(cs[0].Steps) != 1 || len(cs[1].Steps) != 3 || len(cs[MaxCandidates-1].Steps) != 9 {
		t.Fatalf("kept %d candidates, %d to %d steps", len(cs), len(cs[0].Steps), len(cs[len(cs)-1].Steps))
	}
	best, found, done := p.MinimizeBest(t, cs, FailExclusion, time.Minute)
	if !found || !done || !slices.Equal(best.Steps, []Step[kind]{crash(1), poke(0)}) {
		t.Errorf("best %v (found %v, done %v), want the crash and the poke", best.Steps, found, done)
	}
	if _, found, _ := p.MinimizeBest(t, cs, FailOrphan, time.Minute); found {
		t.Error("found a candidate of a kind none has")
	}
}
