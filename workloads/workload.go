// Package workloads owns what the clients do: the worker protocol spoken between the
// harness and a worker process, and the workloads (which lock operations each worker
// performs, with which timeouts and hold times).
package workloads

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Config describes a lock workload: every worker loops acquire (with a timeout), hold
// a random time, release.
type Config struct {
	Kind Kind
	// Permits is the semaphore's size; 1 for the other kinds.
	Permits int
	// Key names the lock in the history.
	Key string
	// AcquireTimeout is how long a worker waits for the lock before giving up (fail).
	AcquireTimeout time.Duration
	// HoldMin and HoldMax bound the time a worker holds the lock.
	HoldMin, HoldMax time.Duration
	// ReadFraction is the share of rwlock acquires that ask for a read lock.
	ReadFraction float64
	// ThinkMax bounds the random pause of a worker between two lock cycles (0: none).
	ThinkMax time.Duration
	// MaxDepth is the deepest nesting of the reentrant workload.
	MaxDepth int
	// Fenced makes the counter workload's writes conditional on the lock node.
	Fenced bool
	// KeepAfterInfo keeps a worker whose acquire or release ended with an unknown
	// outcome (info): the same OS process and ZooKeeper session go on, under a new
	// history process id, as an application keeps its lock client after a failed
	// call. Otherwise such a worker is replaced by a fresh process.
	KeepAfterInfo bool `json:",omitempty"`
	// Regimes, with RegimeLength, make the workload vary itself: the run goes through
	// them in turn, RegimeLength each, and every cycle draws its acquire timeout, hold
	// and think time from the regime in force when it starts (AcquireTimeout, HoldMin,
	// HoldMax and ThinkMax are then unused); a worker slot not active in a regime sits
	// it out (SitsOut).
	Regimes      []Regime      `json:",omitempty"`
	RegimeLength time.Duration `json:",omitempty"`
	// Vary asks for the standard regimes (StandardRegimes) with Fixed's knobs in
	// place, for the run's own session timeout and faults: the harness fills Regimes
	// from it once those are known (a matrix's cell, a suite's run each has its own).
	Vary  bool  `json:",omitempty"`
	Fixed Fixed `json:",omitzero"`
	// WriteRetry is how long a worker retries a counter write whose outcome is
	// unknown (connection loss), as applications do with Curator's and Kazoo's
	// retrying operations; 0 never retries. A retried unfenced write may land after
	// the lock passed to another worker: the lost update fencing prevents.
	WriteRetry time.Duration
}

// RefusedPause is the least time from a lock cycle's start to the next's when none of
// its acquires was granted: a worker whose acquire is refused at once (a server
// that is down: connection refused) asks again after it, as an application backs
// off, rather than hundreds of times a second, which would fill the history with
// refusals and slow the checkers; an acquire that waited longer is asked again at
// once.
const RefusedPause = 20 * time.Millisecond

// DefaultConfig is a workload before a flag or a run file changes it: the one place
// its defaults live. Permits 0 stands for the kind's own default (DefaultPermits).
func DefaultConfig() Config {
	return Config{Kind: Mutex, Key: "l0", AcquireTimeout: 2 * time.Second, HoldMin: time.Millisecond, HoldMax: 50 * time.Millisecond,
		ReadFraction: 0.7, MaxDepth: 3}
}

// Defaults fills unset fields from DefaultConfig (a hold range of its own when
// HoldMax is unset; holds of at least a millisecond, or HoldMax if shorter).
func (c Config) Defaults() Config {
	d := DefaultConfig()
	if c.Kind == "" {
		c.Kind = d.Kind
	}
	if c.Permits == 0 {
		c.Permits = c.Kind.DefaultPermits()
	}
	if c.Key == "" {
		c.Key = d.Key
	}
	if c.AcquireTimeout == 0 {
		c.AcquireTimeout = d.AcquireTimeout
	}
	if c.HoldMax == 0 {
		c.HoldMin, c.HoldMax = d.HoldMin, d.HoldMax
	}
	if c.HoldMin == 0 {
		c.HoldMin = min(d.HoldMin, c.HoldMax)
	}
	if c.ReadFraction == 0 {
		c.ReadFraction = d.ReadFraction
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = d.MaxDepth
	}
	return c
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	if _, err := ParseKind(string(c.Kind)); err != nil {
		return err
	}
	if c.Permits < 1 {
		return fmt.Errorf("permits: want at least 1, got %d", c.Permits)
	}
	if c.Kind != Semaphore && c.Permits != 1 {
		return fmt.Errorf("permits: only the semaphore workload takes --permits (got %d for %s)", c.Permits, c.Kind)
	}
	if c.HoldMin < 0 || c.HoldMax < c.HoldMin {
		return fmt.Errorf("hold time: want 0 <= min <= max, got %s..%s", c.HoldMin, c.HoldMax)
	}
	if c.Fenced && c.Kind != Counter {
		return fmt.Errorf("fenced: only the counter workload has fenced writes (got %s)", c.Kind)
	}
	if c.AcquireTimeout <= 0 {
		return fmt.Errorf("acquire timeout: want > 0, got %s", c.AcquireTimeout)
	}
	if len(c.Regimes) > 0 && c.RegimeLength <= 0 {
		return fmt.Errorf("regime length: want > 0 with regimes, got %s", c.RegimeLength)
	}
	for _, r := range c.Regimes {
		if err := r.Validate(); err != nil {
			return err
		}
	}
	return nil
}

// Acquire is one planned lock cycle: the acquire request, how long to hold, and (for
// the reentrant workload) how many times to acquire in all before releasing as often.
type Acquire struct {
	Request Request
	Hold    time.Duration
	Depth   int
}

// Think draws the pause after a lock cycle that ended elapsed into the run, from the
// worker's own random source. It draws nothing when there is no think time, so
// schedules without think time are unchanged.
func (c Config) Think(rng *rand.Rand, elapsed time.Duration) time.Duration {
	if r, i := c.RegimeAt(elapsed); i >= 0 {
		return draw(rng, r.Thinks)
	}
	if c.ThinkMax <= 0 {
		return 0
	}
	return time.Duration(rng.Int64N(int64(c.ThinkMax)))
}

// Next plans a worker's next lock cycle, starting elapsed into the run, from its own
// random source.
func (c Config) Next(rng *rand.Rand, elapsed time.Duration) Acquire {
	timeout := c.AcquireTimeout
	regime, varies := c.RegimeAt(elapsed)
	if varies >= 0 {
		timeout = max(time.Millisecond, draw(rng, regime.Timeouts))
	}
	req := Request{Op: OpAcquire, TimeoutMS: timeout.Milliseconds()}
	if c.Kind == RWLock {
		req.Mode = "write"
		if rng.Float64() < c.ReadFraction {
			req.Mode = "read"
		}
	}
	hold := c.HoldMin
	if varies >= 0 {
		hold = draw(rng, regime.Holds)
	} else if span := c.HoldMax - c.HoldMin; span > 0 {
		hold += time.Duration(rng.Int64N(int64(span)))
	}
	depth := 1
	if c.Kind == Reentrant {
		depth = 1 + rng.IntN(c.MaxDepth)
	}
	return Acquire{Request: req, Hold: hold, Depth: depth}
}
