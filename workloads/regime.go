package workloads

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// A varying workload goes through regimes during a run, one after another (as
// Jepsen's phases do): each says how its lock cycles are drawn, so that one run meets
// waiters that give up while queued, holds that outlive a session, a queue that is
// full and one that is nearly empty, without anyone choosing flags for a bug they
// already know.

// DefaultRegimeLength is how long each regime of a varying workload lasts, unless
// the run says otherwise.
const DefaultRegimeLength = 10 * time.Second

// Regime is one way of drawing lock cycles: how long an acquire may wait, how long
// the lock is held, how long a worker thinks between cycles, and how many of the
// workers take part.
type Regime struct {
	// Name says what the regime is for, in a word or two.
	Name string `json:"name"`
	// Timeouts, Holds and Thinks are weighted ranges that each cycle's acquire
	// timeout, hold and think time are drawn from (no Thinks: no think time).
	Timeouts []Span `json:"timeouts"`
	Holds    []Span `json:"holds"`
	Thinks   []Span `json:"thinks,omitempty"`
	// Active is the share of the worker slots that take part (at least one); the
	// others sit the regime out, holding nothing.
	Active float64 `json:"active"`
}

// Span is a range of durations, drawn uniformly, with its weight among its siblings.
type Span struct {
	Weight float64       `json:"weight"`
	Min    time.Duration `json:"min_ns"`
	Max    time.Duration `json:"max_ns"`
}

// draw picks a span by weight and a duration in it; zero when there is none.
func draw(rng *rand.Rand, spans []Span) time.Duration {
	total := 0.0
	for _, s := range spans {
		total += s.Weight
	}
	if total <= 0 {
		return 0
	}
	x := rng.Float64() * total
	for _, s := range spans {
		if x -= s.Weight; x < 0 || s == spans[len(spans)-1] {
			if s.Max <= s.Min {
				return s.Min
			}
			return s.Min + time.Duration(rng.Int64N(int64(s.Max-s.Min)))
		}
	}
	return 0
}

func longest(spans []Span) time.Duration {
	var m time.Duration
	for _, s := range spans {
		m = max(m, s.Max, s.Min)
	}
	return m
}

// StandardRegimes are the regimes of a workload that varies itself, for workers with
// this session timeout; with clientFaults, one regime has holds that outlive a
// session (a holder stopped or cut off must be able to overlap the next).
func StandardRegimes(sessionTimeout time.Duration, clientFaults bool) []Regime {
	ms := time.Millisecond
	short := []Span{{Weight: 1, Min: ms, Max: 50 * ms}}
	regimes := []Regime{
		{Name: "full queue", Timeouts: []Span{{Weight: 1, Min: time.Second, Max: 3 * time.Second}}, Holds: short, Active: 1},
		{Name: "impatient waiters", Timeouts: []Span{{Weight: 2, Min: 50 * ms, Max: 300 * ms}, {Weight: 1, Min: time.Second, Max: 3 * time.Second}},
			Holds: short, Thinks: []Span{{Weight: 1, Max: 50 * ms}}, Active: 1},
		{Name: "sparse", Timeouts: []Span{{Weight: 1, Min: 2 * time.Second, Max: 10 * time.Second}}, Holds: short,
			Thinks: []Span{{Weight: 1, Min: 50 * ms, Max: 300 * ms}}, Active: 0.4},
	}
	if clientFaults {
		regimes = append(regimes, Regime{Name: "long holds",
			Timeouts: []Span{{Weight: 1, Min: 5 * time.Second, Max: 20 * time.Second}},
			Holds:    []Span{{Weight: 2, Min: ms, Max: 50 * ms}, {Weight: 1, Min: sessionTimeout * 5 / 4, Max: sessionTimeout * 5 / 2}},
			Thinks:   []Span{{Weight: 1, Max: 200 * ms}}, Active: 0.6})
	}
	return regimes
}

// Validate reports a regime that cannot be drawn from.
func (r Regime) Validate() error {
	for _, set := range []struct {
		name  string
		spans []Span
		need  bool
	}{{"timeouts", r.Timeouts, true}, {"holds", r.Holds, true}, {"thinks", r.Thinks, false}} {
		if set.need && len(set.spans) == 0 {
			return fmt.Errorf("regime %q: %s: none", r.Name, set.name)
		}
		for _, s := range set.spans {
			if s.Weight <= 0 || s.Min < 0 || s.Max < s.Min {
				return fmt.Errorf("regime %q: %s: want weight > 0 and 0 <= min <= max, got %+v", r.Name, set.name, s)
			}
		}
	}
	if r.Active <= 0 || r.Active > 1 {
		return fmt.Errorf("regime %q: active: want a share in (0, 1], got %v", r.Name, r.Active)
	}
	if longest(r.Timeouts) < time.Millisecond {
		return fmt.Errorf("regime %q: timeouts: want at least 1ms", r.Name)
	}
	return nil
}

// varies reports whether the workload goes through regimes.
func (c Config) varies() bool { return len(c.Regimes) > 0 && c.RegimeLength > 0 }

// RegimeAt is the regime in force elapsed into the run (the zero Regime when the
// workload does not vary), and its index.
func (c Config) RegimeAt(elapsed time.Duration) (Regime, int) {
	if !c.varies() {
		return Regime{}, -1
	}
	i := int(max(0, elapsed) / c.RegimeLength % time.Duration(len(c.Regimes)))
	return c.Regimes[i], i
}

// SitsOut says how long worker slot (of workers) sits out the regime in force
// elapsed into the run: until the next regime when it does not take part in this
// one, else zero.
func (c Config) SitsOut(slot, workers int, elapsed time.Duration) time.Duration {
	r, _ := c.RegimeAt(elapsed)
	if !c.varies() || slot < int(math.Ceil(r.Active*float64(workers))) {
		return 0
	}
	return c.RegimeLength - max(0, elapsed)%c.RegimeLength
}

// LongestTimeout is the longest an acquire of the workload may wait.
func (c Config) LongestTimeout() time.Duration {
	m := c.AcquireTimeout
	for _, r := range c.Regimes {
		m = max(m, longest(r.Timeouts))
	}
	return m
}

// LongestHold is the longest the workload holds the lock in one cycle.
func (c Config) LongestHold() time.Duration {
	m := c.HoldMax
	for _, r := range c.Regimes {
		m = max(m, longest(r.Holds))
	}
	return m
}

// Fixed are the workload knobs a user set by hand; each set one (non-zero) replaces
// the varying draw of its dimension in every regime, so the fixed knobs stay as
// overrides of a varying workload.
type Fixed struct {
	AcquireTimeout time.Duration
	HoldMax        time.Duration
	ThinkMax       time.Duration
}

// Fix returns the regimes with the fixed knobs in place of their draws: an acquire
// timeout of exactly AcquireTimeout, holds up to HoldMax, think times up to ThinkMax.
func Fix(regimes []Regime, f Fixed) []Regime {
	out := make([]Regime, len(regimes))
	for i, r := range regimes {
		if f.AcquireTimeout > 0 {
			r.Timeouts = []Span{{Weight: 1, Min: f.AcquireTimeout, Max: f.AcquireTimeout}}
		}
		if f.HoldMax > 0 {
			r.Holds = []Span{{Weight: 1, Min: min(time.Millisecond, f.HoldMax), Max: f.HoldMax}}
		}
		if f.ThinkMax > 0 {
			r.Thinks = []Span{{Weight: 1, Max: f.ThinkMax}}
		}
		out[i] = r
	}
	return out
}
