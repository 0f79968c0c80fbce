package explore

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

func TestProbesLeaveOutUnfencedOnlyFaults(t *testing.T) {
	unfenced := []nemesis.Class{nemesis.ClassClientPause, nemesis.ClassSessionExpire}
	has := func(ps []Probe) bool {
		for _, p := range ps {
			for _, c := range p.Classes {
				if slices.Contains(unfenced, c) {
					return true
				}
			}
		}
		return false
	}
	if has(Probes(4*time.Second, false)) {
		t.Error("an unfenced menu has client-pause or session-expire: they only produce overlaps no recipe can prevent")
	}
	if !has(Probes(4*time.Second, true)) {
		t.Error("a fenced menu lacks client-pause and session-expire: fencing must hold under them")
	}
	for _, p := range Probes(4*time.Second, true) {
		if len(p.Regimes) == 0 || len(p.Aims) == 0 {
			t.Errorf("probe %q: want regimes and aims", p.Name)
		}
		for _, r := range p.Regimes {
			if err := r.Validate(); err != nil {
				t.Errorf("probe %q: %v", p.Name, err)
			}
		}
	}
}

// table is a coverage table with these counts.
func table(counts map[string]int) coverage.Table {
	var t coverage.Table
	for id, n := range counts {
		t.Rows = append(t.Rows, coverage.Row{ID: id, Count: n})
	}
	return t
}

func TestChooseVisitsEachProbeThenTheLeastCovered(t *testing.T) {
	menu := []Probe{probe("a", "x"), probe("b", "y", "z"), probe("c", "x", "y")}
	rng := rand.New(rand.NewPCG(1, 1))
	tally := NewTally()
	var order []string
	for range 3 {
		p := Choose(menu, tally, rng)
		order = append(order, p.Name)
		tally.Add(p, table(map[string]int{"x": 5, "y": 5, "z": 5}))
	}
	if !slices.Equal(order, []string{"a", "b", "c"}) {
		t.Fatalf("first pass %v, want the menu's order", order)
	}
	tally.Coverage = table(map[string]int{"x": 15, "y": 15, "z": 0}) // only b aims at z
	if p := Choose(menu, tally, rng); p.Name != "b" {
		t.Errorf("chose %q, want b (its aim z was never exercised)", p.Name)
	}
	tally.Coverage = table(map[string]int{"x": 5, "y": 5, "z": 50})
	tally.Runs["a"] = 9 // a and c both reach x at 5 (or y): c ran fewer rounds
	if p := Choose(menu, tally, rng); p.Name != "c" {
		t.Errorf("chose %q, want c (as little covered as a, fewer rounds)", p.Name)
	}
}

// TestChooseLetsNoProbeStarveTheOthers: b's aim z is never exercised, yet once b has
// run more than twice as often as the others, they run again.
func TestChooseLetsNoProbeStarveTheOthers(t *testing.T) {
	menu := []Probe{probe("a", "x"), probe("b", "z"), probe("c", "y")}
	rng := rand.New(rand.NewPCG(1, 1))
	tally := NewTally()
	tally.Runs = map[string]int{"a": 1, "b": 1, "c": 1}
	tally.Coverage = table(map[string]int{"x": 5, "y": 5, "z": 0})
	var order []string
	for range 4 {
		p := Choose(menu, tally, rng)
		order = append(order, p.Name)
		tally.Runs[p.Name]++
	}
	if !slices.Equal(order[:2], []string{"b", "b"}) || slices.Index(order, "a") < 0 || slices.Index(order, "c") < 0 {
		t.Errorf("order %v, want b twice (it is least covered), then a and c before b runs a fourth time", order)
	}
}

func TestRoundConfigAppliesTheProbe(t *testing.T) {
	base := harness.Config{Seed: 100, Workload: workloads.Config{Kind: workloads.Mutex}}
	p := Probes(2*time.Second, false)[1]
	c := roundConfig(base, p, workloads.Fixed{AcquireTimeout: 150 * time.Millisecond}, 3, 20*time.Second)
	if c.Seed != 103 || c.Duration != 20*time.Second || !slices.Equal(c.Nemesis, p.Classes) || c.NemesisInterval != p.Interval || c.Workload.KeepAfterInfo != p.KeepWorkers {
		t.Fatalf("round config %+v does not carry probe %q", c, p.Name)
	}
	if c.Workload.RegimeLength*time.Duration(len(p.Regimes)) != c.Duration {
		t.Errorf("regimes of %s each in a %s round", c.Workload.RegimeLength, c.Duration)
	}
	for _, r := range c.Workload.Regimes {
		if len(r.Timeouts) != 1 || r.Timeouts[0].Min != 150*time.Millisecond {
			t.Errorf("regime %q: timeouts %v, want the fixed 150ms", r.Name, r.Timeouts)
		}
	}
	if base.Nemesis != nil || base.Workload.Regimes != nil {
		t.Error("roundConfig changed the base")
	}
	if !c.EndOnOverlap {
		t.Error("a round of a probe that does not run through ends at an overlap")
	}
	for _, p := range RedisProbes(2*time.Second, true) {
		if c := roundConfig(base, p, workloads.Fixed{}, 0, 20*time.Second); c.EndOnOverlap == p.RunThrough {
			t.Errorf("%s: EndOnOverlap %v with RunThrough %v", p.Name, c.EndOnOverlap, p.RunThrough)
		}
	}
}

// fakeRounds stands in for real runs (this is a unit test of the loop): each round
// returns the next verdict of the list.
func fakeRounds(verdicts ...models.Verdict) (roundFunc, *[]harness.Config) {
	var seen []harness.Config
	return func(_ context.Context, c harness.Config) (Round, error) {
		seen = append(seen, c)
		v := verdicts[min(len(seen), len(verdicts))-1]
		return Round{Verdict: v, Coverage: table(map[string]int{coverage.RowTimedOutQueued: 1})}, nil
	}, &seen
}

func TestRunStopsAtTheFirstViolation(t *testing.T) {
	run, seen := fakeRounds(models.Valid, models.Unknown, models.Invalid, models.Valid)
	s, err := Config{Budget: time.Hour}.loop(context.Background(), harness.Config{SessionTimeout: 2 * time.Second}, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Rounds) != 3 || len(*seen) != 3 || s.Verdict != models.Invalid {
		t.Fatalf("%d rounds, verdict %s; want 3, invalid", len(s.Rounds), s.Verdict)
	}
	if n := s.Tally.count(coverage.RowTimedOutQueued); n != 3 {
		t.Errorf("tally %d, want the rounds' coverage summed (3)", n)
	}
}

// TestRunGoesOnAfterAnHonestFinding: a round invalid only by an honest cause (the
// truth about the service) is kept and the session goes on; the next round invalid by
// a recipe bug ends it.
func TestRunGoesOnAfterAnHonestFinding(t *testing.T) {
	rounds := []Round{{Verdict: models.Invalid, Cause: "clock", Honest: true}, {Verdict: models.Valid},
		{Verdict: models.Invalid, Cause: "recipe bug"}, {Verdict: models.Valid}}
	n := 0
	run := func(context.Context, harness.Config) (Round, error) {
		n++
		return rounds[n-1], nil
	}
	s, err := Config{Budget: time.Hour}.loop(context.Background(), harness.Config{SessionTimeout: 2 * time.Second}, run)
	if err != nil || len(s.Rounds) != 3 || s.Verdict != models.Invalid || s.Rounds[2].Cause != "recipe bug" {
		t.Fatalf("rounds %+v, verdict %s, err %v; want 3 rounds ending at the recipe bug", s.Rounds, s.Verdict, err)
	}
}

func TestRunKeepsGoingToTheBudget(t *testing.T) {
	run, _ := fakeRounds(models.Invalid, models.Valid)
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	counted := func(c context.Context, cfg harness.Config) (Round, error) {
		if n++; n == 4 {
			cancel()
		}
		return run(c, cfg)
	}
	s, err := Config{Budget: time.Hour, KeepGoing: true}.loop(ctx, harness.Config{SessionTimeout: 2 * time.Second}, counted)
	if err != nil || len(s.Rounds) != 4 || s.Verdict != models.Invalid {
		t.Fatalf("rounds %d, verdict %s, err %v; want 4 rounds (cancelled), invalid", len(s.Rounds), s.Verdict, err)
	}
}

func TestRunReportsARoundThatCouldNotRun(t *testing.T) {
	broken := func(context.Context, harness.Config) (Round, error) { return Round{}, errors.New("no quorum") }
	s, err := Config{Budget: time.Hour}.loop(context.Background(), harness.Config{}, broken)
	if err == nil || len(s.Rounds) != 0 {
		t.Fatalf("err %v, %d rounds; want the round's error", err, len(s.Rounds))
	}
	if s, err := Run(context.Background(), Config{Base: harness.Config{Recipe: "gozk"}}); err == nil || s.Dir != "" {
		t.Error("a session without a budget ran")
	}
}

// probe is a fault-free probe of this name aimed at these rows.
func probe(name string, aims ...string) Probe {
	return Probe{Setup: nemesis.Setup{Name: name}, Aims: aims}
}

// TestFirstPassRoundsAreShort: the first round of every probe runs FirstRound
// (never longer than Round; unset, the full Round); the rounds the feedback sends
// afterwards run the full Round. Run sets every menu's first rounds short; a kind
// with no menu of its own gets full ones.
func TestFirstPassRoundsAreShort(t *testing.T) {
	for _, tc := range []struct {
		cfg         Config
		first, rest time.Duration
	}{
		{Config{}, DefaultRound, DefaultRound},
		{Config{FirstRound: menuOf(kind.ZooKeeper).firstRound}, DefaultFirstRound, DefaultRound},
		{Config{FirstRound: menuOf(kind.Redis).firstRound}, DefaultFirstRound, DefaultRound},
		{Config{FirstRound: menuOf(kind.Postgres).firstRound}, DefaultFirstRound, DefaultRound},
		{Config{FirstRound: menuOf("toy").firstRound}, DefaultRound, DefaultRound},
		{Config{Round: 30 * time.Second, FirstRound: 5 * time.Second}, 5 * time.Second, 30 * time.Second},
		{Config{Round: 6 * time.Second}, 6 * time.Second, 6 * time.Second},
	} {
		run, seen := fakeRounds(models.Valid, models.Valid, models.Valid, models.Valid, models.Valid, models.Invalid)
		cfg := tc.cfg
		cfg.Budget, cfg.Menu = time.Hour, []Probe{probe("a", "x"), probe("b", "y"), probe("c", "z")}
		if _, err := cfg.loop(context.Background(), harness.Config{SessionTimeout: 2 * time.Second}, run); err != nil {
			t.Fatal(err)
		}
		var got []time.Duration
		for _, c := range *seen {
			got = append(got, c.Duration)
		}
		want := []time.Duration{tc.first, tc.first, tc.first, tc.rest, tc.rest, tc.rest}
		if !slices.Equal(got, want) {
			t.Errorf("%+v: round lengths %v, want %v", tc.cfg, got, want)
		}
	}
}

// TestNarrowRacesAreAimedAt: a fault-free probe aims at the narrow races' moment
// (coverage.RowEdge) with the regime that opens it (two workers, holds under a
// millisecond, acquire timeouts long enough for the missed wake-up watch), and the
// first probe of the menu runs that regime too.
func TestNarrowRacesAreAimedAt(t *testing.T) {
	st := 4 * time.Second
	menu := Probes(st, false)
	var aimed []Probe
	for _, p := range menu {
		if slices.Contains(p.Aims, coverage.RowEdge) {
			aimed = append(aimed, p)
		}
	}
	if len(aimed) < 2 || aimed[0].Name != menu[0].Name {
		t.Fatalf("probes aimed at %s: %d, the first %q; want the first probe and another", coverage.RowEdge, len(aimed), aimed[0].Name)
	}
	for _, p := range aimed {
		if len(p.Classes) != 0 {
			t.Errorf("probe %q aims at a fault-free race with faults %v", p.Name, p.Classes)
		}
		r := p.Regimes[0]
		if r.Active*5 > 2 || r.Holds[0].Max > time.Millisecond || r.Timeouts[0].Min <= st/2 {
			t.Errorf("probe %q's first regime %+v: want two of five workers, holds under 1ms, timeouts over half a session timeout", p.Name, r)
		}
	}
}

// TestAProbeMayLookLongerFirst: a probe's FirstLook, when longer than the first pass's
// rounds, is its first round's length, even beyond Round; when longer than Round, it
// is the length of the probe's later rounds too (a fake round function).
func TestAProbeMayLookLongerFirst(t *testing.T) {
	valid := slices.Repeat([]models.Verdict{models.Valid}, 7)
	run, seen := fakeRounds(append(valid, models.Invalid)...)
	slow, slowest := probe("b", "y"), probe("d", "q")
	slow.FirstLook, slowest.FirstLook = 12*time.Second, time.Minute
	cfg := Config{Budget: time.Hour, Round: 20 * time.Second, FirstRound: 8 * time.Second,
		Menu: []Probe{probe("a", "x"), slow, probe("c", "z"), slowest}}
	s, err := cfg.loop(context.Background(), harness.Config{SessionTimeout: 2 * time.Second}, run)
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Duration
	for _, c := range (*seen)[:4] {
		got = append(got, c.Duration)
	}
	if want := []time.Duration{8 * time.Second, 12 * time.Second, 8 * time.Second, time.Minute}; !slices.Equal(got, want) {
		t.Errorf("first pass's round lengths %v, want %v", got, want)
	}
	later := map[string]time.Duration{"a": 20 * time.Second, "b": 20 * time.Second, "c": 20 * time.Second, "d": time.Minute}
	for i, r := range s.Rounds[4:] {
		if got, want := (*seen)[4+i].Duration, later[r.Probe]; got != want {
			t.Errorf("round %d (%s): %s, want %s", 5+i, r.Probe, got, want)
		}
	}
	if n := s.Tally.Runs["d"]; n < 2 {
		t.Errorf("the long-look probe ran %d rounds, want a later one too", n)
	}
}

// TestChooseFollowsTheTable: after the first pass, a situation the session's table
// flags not exercised pulls the next round to the probe aimed at it, whatever else is
// at 0; else a probe whose own rounds never landed its aim (another probe raised
// that row) looks again; a probe whose aims do not apply to the service (a queue's
// row on Redis) is neither pulled nor looked at again for them.
func TestChooseFollowsTheTable(t *testing.T) {
	menu := []Probe{probe("a", "x"), probe("b", "z"), probe("c", "y"), probe("d", "q")}
	rng := rand.New(rand.NewPCG(1, 1))
	tally := NewTally()
	own := map[string]coverage.Table{
		"a": table(map[string]int{"x": 0}), "b": table(map[string]int{"z": 0}),
		"c": table(map[string]int{"y": 3, "x": 4}), "d": table(map[string]int{}),
	}
	for _, p := range menu {
		tally.Add(p, own[p.Name])
	}
	session := func(flagZ bool) coverage.Table {
		// x and z at 0, but only z is a row where bugs live (x: a finding, like
		// orphans, never flagged); q does not apply to the service.
		rows := []coverage.Row{{ID: "x", Count: 4}, {ID: "y", Count: 3}, {ID: "z"}, {ID: "q", NotApplicable: "not applicable: no queue"}}
		if flagZ {
			rows[2].NotExercised = "not exercised: the run could not have found ..."
		}
		return coverage.Table{Exercised: true, Rows: rows}
	}
	tally.Coverage = session(true)
	tally.Coverage.Rows[0].Count = 0 // x at 0 too, unflagged; a has run fewer rounds
	tally.Runs["b"] = 2
	if p := Choose(menu, tally, rng); p.Name != "b" {
		t.Errorf("z flagged: chose %q, want b (the table pulls it)", p.Name)
	}
	tally.Runs["b"] = 1
	// z not flagged: a's own rounds never raised x (c's did): a looks again, though x
	// is the session's best covered row but y.
	tally.Coverage = session(false)
	tally.ByProbe["b"] = table(map[string]int{"z": 1})
	if p := Choose(menu, tally, rng); p.Name != "a" {
		t.Errorf("a's aim missed: chose %q, want a", p.Name)
	}
	// Every aim landed: the least covered over the session (y at 3); d, whose aim
	// does not apply, comes last.
	tally.ByProbe["a"] = table(map[string]int{"x": 1})
	tally.Coverage.Rows[2].Count = 5 // z
	if p := Choose(menu, tally, rng); p.Name != "c" {
		t.Errorf("every aim landed: chose %q, want c (y is the least covered)", p.Name)
	}
	if !tally.Landed(probe("d", "q")) {
		t.Error("d's only aim does not apply: it counts as landed")
	}
}

// TestEverySecondLookBeforeAThird: once every probe's aim has landed and no row is
// flagged, a probe whose aim is a rare row (x: a handful a round, where y and z
// come by the dozen) does not take a third look while others have had one: the
// others' second looks come first, least covered first. Only then does x's probe
// run again.
func TestEverySecondLookBeforeAThird(t *testing.T) {
	menu := []Probe{probe("a", "x"), probe("b", "y"), probe("c", "z")}
	rng := rand.New(rand.NewPCG(1, 1))
	tally := NewTally()
	for _, p := range menu {
		tally.Add(p, table(map[string]int{p.Aims[0]: 1}))
	}
	tally.Add(menu[0], table(map[string]int{"x": 1}))
	tally.Coverage = table(map[string]int{"x": 2, "y": 50, "z": 40})
	var order []string
	for range 3 {
		p := Choose(menu, tally, rng)
		order = append(order, p.Name)
		tally.Runs[p.Name]++
	}
	if !slices.Equal(order, []string{"c", "b", "a"}) {
		t.Errorf("order %v, want c and b's second looks (z less covered than y), then a's third", order)
	}
}

// TestFeedbackSendsAMissedProbeBack: a session on ZooKeeper's own menu, whose rounds
// are faked (this is a unit test of the loop): a recipe whose bug shows only when a
// reply is lost while a create is in flight. Replies lost's first look lands its
// faults on idle workers only; crashing clients raise the same rows (client faults
// on acquirers, acquires ended unknown) many times over, so the session's table says
// those rows are well covered. The feedback sends the next round after the first
// pass back to replies lost, whose own aim never landed (by the session's counts
// alone it would be the last choice), and that round finds the bug.
func TestFeedbackSendsAMissedProbeBack(t *testing.T) {
	menu, s := fakeZooKeeperSession(t, func(name string, look int, counts map[string]int) models.Verdict {
		counts[coverage.RowFaultAcquiring], counts[coverage.RowAcquireInfo] = 0, 0
		switch {
		case name == "crashing and cut-off clients":
			counts[coverage.RowFaultAcquiring], counts[coverage.RowAcquireInfo] = 50, 50
		case name == "replies lost" && look == 1:
			counts[coverage.RowFaultIdle] = 3 // the first look: only idle workers
		case name == "replies lost":
			counts[coverage.RowFaultAcquiring], counts[coverage.RowAcquireInfo] = 2, 1
			return models.Invalid
		}
		return models.Valid
	})
	last := s.Rounds[len(s.Rounds)-1]
	if s.Verdict != models.Invalid || len(s.Rounds) != len(menu)+1 || last.Probe != "replies lost" {
		t.Fatalf("%d rounds ending with %s (%s); want the first pass, then replies lost again, invalid", len(s.Rounds), last.Probe, s.Verdict)
	}
	if first := s.Rounds[1]; first.Probe != "replies lost" || first.AimLanded {
		t.Errorf("round 2: %s, aim landed %v; want replies lost's first look, missed", first.Probe, first.AimLanded)
	}
}

// TestAFlaggedRowPullsTheNextRound: ZooKeeper's own menu, its rounds faked (a unit
// test of the loop), on a recipe whose bug shows only when a client fault is in force
// while its holder releases (mutant-swallowed-release's). Releases cut off's first
// look puts no fault on a release, so the session's table flags that row "not
// exercised", and no other probe raises it. After the first pass the flagged row
// pulls the next round to releases cut off, the one probe that aims at it, and that
// round finds the bug.
func TestAFlaggedRowPullsTheNextRound(t *testing.T) {
	menu, s := fakeZooKeeperSession(t, func(name string, look int, counts map[string]int) models.Verdict {
		counts[coverage.RowFaultReleasing] = 0
		if name == "releases cut off" && look > 1 {
			counts[coverage.RowFaultReleasing] = 1
			return models.Invalid
		}
		return models.Valid
	})
	last := s.Rounds[len(s.Rounds)-1]
	if s.Verdict != models.Invalid || len(s.Rounds) != len(menu)+1 || last.Probe != "releases cut off" {
		t.Fatalf("%d rounds ending with %s (%s); want the first pass, then releases cut off again, invalid", len(s.Rounds), last.Probe, s.Verdict)
	}
	// What pulled it: the first pass's table (the session's sum) flags the row.
	pass := NewTally()
	for i, r := range s.Rounds[:len(menu)] {
		pass.Add(menu[i], r.Coverage)
	}
	if row, ok := pass.Coverage.Row(coverage.RowFaultReleasing); !ok || row.NotExercised == "" || !pass.pulls(menu[slices.IndexFunc(menu, func(p Probe) bool { return p.Name == "releases cut off" })]) {
		t.Errorf("after the first pass the mid-release row is %+v (found %v); want it flagged, pulling releases cut off", row, ok)
	}
}

// fakeZooKeeperSession runs a session's loop on ZooKeeper's menu (4 s sessions) with
// faked rounds: each round exercises every aim of the menu once, then round changes
// the counts for the probe's look-th round and gives its verdict (an invalid one, a
// recipe bug, ends the session).
func fakeZooKeeperSession(t *testing.T, round func(name string, look int, counts map[string]int) models.Verdict) ([]Probe, Session) {
	t.Helper()
	menu := Probes(4*time.Second, false)
	var every []string
	for _, p := range menu {
		every = append(every, p.Aims...)
	}
	looks := map[string]int{}
	run := func(_ context.Context, c harness.Config) (Round, error) {
		name := probeOf(t, menu, c)
		looks[name]++
		counts := map[string]int{}
		for _, a := range every {
			counts[a] = 1 // every round exercises a little of everything
		}
		v := round(name, looks[name], counts)
		r := Round{Verdict: v, Coverage: table(counts)}
		if v == models.Invalid {
			r.Cause = "recipe bug"
		}
		return r, nil
	}
	s, err := Config{Budget: time.Hour, Menu: menu}.loop(context.Background(), harness.Config{SessionTimeout: 4 * time.Second}, run)
	if err != nil {
		t.Fatal(err)
	}
	return menu, s
}

// probeOf is the probe of menu whose faults round config c runs.
func probeOf(t *testing.T, menu []Probe, c harness.Config) string {
	t.Helper()
	for _, p := range menu {
		if slices.Equal(p.Classes, c.Nemesis) && slices.Equal(p.ClientTargets, c.ClientTargets) && p.Interval == c.NemesisInterval &&
			len(p.Regimes) == len(c.Workload.Regimes) && (len(p.Regimes) == 0 || p.Regimes[0].Name == c.Workload.Regimes[0].Name) {
			return p.Name
		}
	}
	t.Fatalf("no probe of the menu runs %v", c.Nemesis)
	return ""
}
