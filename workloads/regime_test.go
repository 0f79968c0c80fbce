package workloads

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestRegimeAtCyclesThroughRegimes(t *testing.T) {
	c := Config{Regimes: StandardRegimes(4*time.Second, false), RegimeLength: 10 * time.Second}
	for _, tc := range []struct {
		elapsed time.Duration
		want    int
	}{{-time.Second, 0}, {0, 0}, {9 * time.Second, 0}, {10 * time.Second, 1}, {25 * time.Second, 2}, {30 * time.Second, 0}} {
		if r, i := c.RegimeAt(tc.elapsed); i != tc.want || r.Name != c.Regimes[tc.want].Name {
			t.Errorf("RegimeAt(%s) = %q %d, want %d", tc.elapsed, r.Name, i, tc.want)
		}
	}
	if _, i := (Config{}).RegimeAt(time.Hour); i != -1 {
		t.Errorf("a fixed workload has regime %d, want -1", i)
	}
}

func TestSitsOutLeavesActiveShare(t *testing.T) {
	c := Config{Regimes: []Regime{{Name: "half", Active: 0.5}}, RegimeLength: 10 * time.Second}
	for slot, want := range []time.Duration{0, 0, 0, 7 * time.Second, 7 * time.Second} {
		if got := c.SitsOut(slot, 5, 3*time.Second); got != want {
			t.Errorf("slot %d of 5 sits out %s, want %s", slot, got, want)
		}
	}
	if got := (Config{}).SitsOut(4, 5, 0); got != 0 {
		t.Errorf("a fixed workload sits slot 4 out for %s", got)
	}
}

func TestLongHoldsOnlyWithClientFaults(t *testing.T) {
	st := 4 * time.Second
	without := Config{HoldMax: 50 * time.Millisecond, Regimes: StandardRegimes(st, false), RegimeLength: time.Second}
	with := Config{HoldMax: 50 * time.Millisecond, Regimes: StandardRegimes(st, true), RegimeLength: time.Second}
	if got := without.LongestHold(); got >= st {
		t.Errorf("without client faults the longest hold is %s, want under the session timeout %s", got, st)
	}
	if got := with.LongestHold(); got <= st {
		t.Errorf("with client faults the longest hold is %s, want past the session timeout %s", got, st)
	}
}

func TestRegimeValidateNamesTheField(t *testing.T) {
	good := StandardRegimes(time.Second, true)[0]
	for _, tc := range []struct {
		edit func(*Regime)
		want string
	}{
		{func(r *Regime) { r.Timeouts = nil }, "timeouts: none"},
		{func(r *Regime) { r.Holds = []Span{{Weight: 1, Min: 2, Max: 1}} }, "holds:"},
		{func(r *Regime) { r.Thinks = []Span{{Weight: 0, Max: 1}} }, "thinks:"},
		{func(r *Regime) { r.Active = 0 }, "active:"},
		{func(r *Regime) { r.Timeouts = []Span{{Weight: 1, Max: time.Microsecond}} }, "at least 1ms"},
	} {
		r := good
		tc.edit(&r)
		err := r.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), good.Name) {
			t.Errorf("Validate() = %v, want an error naming %q and %q", err, good.Name, tc.want)
		}
	}
	for _, r := range StandardRegimes(time.Second, true) {
		if err := r.Validate(); err != nil {
			t.Errorf("standard regime: %v", err)
		}
	}
}

// Every drawn cycle stays inside its regime's spans and the workload's longest
// bounds, and the same seed draws the same cycles.
func TestVaryingDrawsStayInBounds(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		st := time.Duration(rapid.IntRange(1000, 10000).Draw(t, "st_ms")) * time.Millisecond
		c := Config{Kind: Mutex, Regimes: StandardRegimes(st, rapid.Bool().Draw(t, "client")), RegimeLength: 5 * time.Second}.Defaults()
		elapsed := time.Duration(rapid.Int64Range(0, int64(time.Minute)).Draw(t, "elapsed"))
		seed := rapid.Uint64().Draw(t, "seed")
		a, b := rand.New(rand.NewPCG(seed, 1)), rand.New(rand.NewPCG(seed, 1))
		x, y := c.Next(a, elapsed), c.Next(b, elapsed)
		if x != y {
			t.Fatalf("same seed, different plans: %+v vs %+v", x, y)
		}
		r, _ := c.RegimeAt(elapsed)
		timeout := time.Duration(x.Request.TimeoutMS) * time.Millisecond
		if timeout < time.Millisecond || timeout > longest(r.Timeouts) || timeout > c.LongestTimeout() {
			t.Fatalf("timeout %s outside regime %q", timeout, r.Name)
		}
		if x.Hold < 0 || x.Hold > longest(r.Holds) || x.Hold > c.LongestHold() {
			t.Fatalf("hold %s outside regime %q", x.Hold, r.Name)
		}
		if th := c.Think(a, elapsed); th < 0 || th > longest(r.Thinks) {
			t.Fatalf("think %s outside regime %q", th, r.Name)
		}
	})
}
