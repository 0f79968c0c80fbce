package explore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/models"
)

// TestLanesRunAtOnceAndTheFindingEndsThem: with three lanes (fake rounds: this is a
// unit test of the loop), the first pass's first three probes start together, each on
// its own lane's base; the second probe's round is invalid by a recipe bug, which
// cancels the rounds the other lanes are running (they end as interrupted, and are
// kept) and starts no other; the session's Detected is that round's end.
func TestLanesRunAtOnceAndTheFindingEndsThem(t *testing.T) {
	menu := named(probe("a", "x"), probe("b", "y"), probe("c", "z"), probe("d", "w"))
	var mu sync.Mutex
	started := map[string]int64{} // probe -> lane's base seed
	all := make(chan struct{})
	run := func(ctx context.Context, c harness.Config) (Round, error) {
		mu.Lock()
		started[nameOf(menu, c)] = c.Seed
		if len(started) == 3 {
			close(all)
		}
		mu.Unlock()
		select {
		case <-all:
		case <-time.After(10 * time.Second):
			return Round{Verdict: models.Unknown}, nil // not at once: the checks below fail
		}
		if nameOf(menu, c) == "b" {
			time.Sleep(50 * time.Millisecond)
			return Round{Verdict: models.Invalid, Cause: "recipe bug"}, nil
		}
		<-ctx.Done() // the others run until the finding cancels them
		return Round{Verdict: models.Valid}, nil
	}
	bases := []harness.Config{{SessionTimeout: 2 * time.Second, Seed: 100}, {SessionTimeout: 2 * time.Second, Seed: 100}, {SessionTimeout: 2 * time.Second, Seed: 100}}
	s, err := Config{Budget: time.Hour, Menu: menu}.loopLanes(context.Background(), bases, run)
	if err != nil {
		t.Fatal(err)
	}
	if _, d := started["d"]; len(started) != 3 || d {
		t.Fatalf("probes started %v; want a, b and c at once, and no other", started)
	}
	if len(s.Rounds) != 3 || s.Verdict != models.Invalid || s.Lanes != 3 {
		t.Fatalf("%d rounds, verdict %s, %d lanes; want 3 rounds kept, invalid, 3 lanes: %+v", len(s.Rounds), s.Verdict, s.Lanes, s.Rounds)
	}
	lanes := map[int]bool{}
	for _, r := range s.Rounds {
		lanes[r.Lane] = true
		if r.Probe == "b" && (s.Detected != r.EndedAt || r.EndedAt <= 0) {
			t.Errorf("detected at %s; want the finding's end, %s", s.Detected, r.EndedAt)
		}
		if r.EndedAt > s.Elapsed {
			t.Errorf("round %s ended at %s, after the session (%s)", r.Probe, r.EndedAt, s.Elapsed)
		}
	}
	if len(lanes) != 3 {
		t.Errorf("rounds ran on lanes %v; want 1, 2 and 3", lanes)
	}
	if s.Rounds[0].Probe != "b" {
		t.Errorf("first round to end %s; want b, the finding", s.Rounds[0].Probe)
	}
}

// TestLanesNeverShareAProbe: two lanes over a two-probe menu run rounds until the
// budget ends, and no probe ever runs on both at once.
func TestLanesNeverShareAProbe(t *testing.T) {
	menu := named(probe("a", "x"), probe("b", "y"))
	var mu sync.Mutex
	running := map[string]bool{}
	both := 0
	run := func(_ context.Context, c harness.Config) (Round, error) {
		mu.Lock()
		if running[nameOf(menu, c)] {
			both++
		}
		running[nameOf(menu, c)] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running[nameOf(menu, c)] = false
		mu.Unlock()
		return Round{Verdict: models.Valid, Coverage: table(map[string]int{"x": 1})}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	bases := []harness.Config{{SessionTimeout: 2 * time.Second}, {SessionTimeout: 2 * time.Second}}
	s, err := Config{Budget: time.Hour, Menu: menu}.loopLanes(ctx, bases, run)
	if err != nil {
		t.Fatal(err)
	}
	if both != 0 || len(s.Rounds) < 4 {
		t.Errorf("%d rounds, %d of them while the same probe ran on the other lane; want several, none", len(s.Rounds), both)
	}
	if s.Tally.Runs["a"]+s.Tally.Runs["b"] != len(s.Rounds) {
		t.Errorf("tally counts %v for %d rounds", s.Tally.Runs, len(s.Rounds))
	}
}

// TestLanesOnAnEnsembleNotStarted: an existing ensemble or nodes over SSH are one
// ensemble: one lane by default, and more refused; elsewhere the menu's, never more
// than it has probes.
func TestLanesOnAnEnsembleNotStarted(t *testing.T) {
	menu := []Probe{probe("a"), probe("b")}
	cases := []struct {
		lanes int
		base  harness.Config
		want  int
		fails bool
	}{
		{0, harness.Config{Service: "redis"}, 2, false}, // the menu's 3, capped at the menu's 2 probes
		{0, harness.Config{Service: "zookeeper"}, 1, false},
		{5, harness.Config{Service: "zookeeper"}, 2, false},
		{0, harness.Config{Service: "redis", Connect: "10.0.0.1:6379"}, 1, false},
		{2, harness.Config{Service: "redis", Connect: "10.0.0.1:6379"}, 0, true},
		{2, harness.Config{Service: "zookeeper", SSH: &lockservice.SSHConfig{}}, 0, true},
		{-1, harness.Config{Service: "redis"}, 0, true},
	}
	for _, c := range cases {
		got, err := Config{Lanes: c.lanes, Menu: menu}.lanes(c.base)
		if (err != nil) != c.fails || got != c.want {
			t.Errorf("%d lanes on %s (connect %q): %d, %v; want %d, error %v", c.lanes, c.base.Service, c.base.Connect, got, err, c.want, c.fails)
		}
	}
}

// named gives each probe an interval of its own (its place in ms), by which nameOf
// tells a round's probe from its configuration.
func named(ps ...Probe) []Probe {
	for i := range ps {
		ps[i].Interval = time.Duration(i+1) * time.Millisecond
	}
	return ps
}

// nameOf is the probe of menu (named) whose round c is.
func nameOf(menu []Probe, c harness.Config) string {
	return menu[c.NemesisInterval/time.Millisecond-1].Name
}

// TestFinding: the session's finding is the first round to end invalid by more than
// an honest cause, wherever it stands in the list; honest and valid rounds are none.
func TestFinding(t *testing.T) {
	s := Session{Rounds: []Round{
		{Probe: "honest", Verdict: models.Invalid, Honest: true, EndedAt: time.Second},
		{Probe: "later", Verdict: models.Invalid, EndedAt: 9 * time.Second},
		{Probe: "first", Verdict: models.Invalid, EndedAt: 5 * time.Second},
		{Probe: "valid", Verdict: models.Valid, EndedAt: 2 * time.Second},
	}}
	if r, ok := s.Finding(); !ok || r.Probe != "first" {
		t.Errorf("finding %q (%v); want first", r.Probe, ok)
	}
	s.Rounds = s.Rounds[:1]
	if r, ok := s.Finding(); ok {
		t.Errorf("an honest round is the finding %q", r.Probe)
	}
}
