package lockservice

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// Baseline is what a plain client lock loop achieved on the servers (go-zookeeper's
// on an Ensemble, go-redis's on Redis: Redis.PlainLoops): the yardstick for the
// harness's own overhead (worker processes, pipes, recorder).
type Baseline struct {
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration_ns"`
	Cycles     int64         `json:"cycles"`
	Errors     int64         `json:"errors"`
	// Processes says the loop ran one OS process per session, each in a worker slot's
	// namespace as the workers do (Config.BaselineArgv), not as goroutines of the
	// harness's process.
	Processes bool `json:"processes,omitempty"`
	// AcquireP50 and AcquireP99 are the median and 99th percentile of the time from
	// asking for the lock to holding it (waiting for other holders included), over
	// every granted acquire; zero when none was granted or they were not measured
	// (a per-process baseline adds up counts only).
	AcquireP50 time.Duration `json:"acquire_p50_ns,omitempty"`
	AcquireP99 time.Duration `json:"acquire_p99_ns,omitempty"`
}

// CyclesPerSecond is the baseline's lock cycles (acquire+release) per second.
func (b Baseline) CyclesPerSecond() float64 { return float64(b.Cycles) / b.Duration.Seconds() }

// PlainLoops runs n goroutines, each with its own session, looping zk.Lock / Unlock
// on path with hold times from hold, for d, from the harness (Dial). It records
// nothing: it is the yardstick a run's overhead is measured against.
func (e *Ensemble) PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (Baseline, error) {
	dialer := func(_, addr string, timeout time.Duration) (net.Conn, error) {
		return e.Dial(ctx, addr, timeout)
	}
	connect := e.Connect()
	b := Baseline{Goroutines: n, Duration: d}
	conns := make([]*zk.Conn, n)
	for i := range conns {
		c, err := plainSession(strings.Split(connect, ","), sessionTimeout, dialer, nil)
		if err != nil {
			return b, fmt.Errorf("baseline session %d: %w", i, err)
		}
		defer c.Close()
		conns[i] = c
	}
	plainLoop(ctx, conns, path, time.Now().Add(d), hold).fill(&b)
	return b, nil
}

// plainSession opens a go-zookeeper session (through dialer, unless nil) and waits
// until it is established; logger, unless nil, replaces go-zookeeper's.
func plainSession(servers []string, sessionTimeout time.Duration, dialer zk.Dialer, logger zk.Logger) (*zk.Conn, error) {
	if dialer == nil {
		dialer = net.DialTimeout
	}
	if logger == nil {
		logger = zk.DefaultLogger
	}
	c, events, err := zk.Connect(servers, sessionTimeout, zk.WithLogInfo(false), zk.WithDialer(dialer), zk.WithLogger(logger))
	if err != nil {
		return nil, err
	}
	if err := WaitSession(events, 2*sessionTimeout); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// plainLoop loops zk.Lock / hold / Unlock on every session in its own goroutine until
// deadline and returns what they achieved together.
func plainLoop(ctx context.Context, conns []*zk.Conn, path string, deadline time.Time, hold func(int) time.Duration) loopCount {
	counts := make([]loopCount, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
			n := &counts[i]
			for time.Now().Before(deadline) && ctx.Err() == nil {
				start := time.Now()
				if err := l.Lock(); err != nil {
					n.errs++
					continue
				}
				n.acquires = append(n.acquires, time.Since(start))
				time.Sleep(hold(i))
				if err := l.Unlock(); err != nil {
					n.errs++
					continue
				}
				n.cycles++
			}
		}()
	}
	wg.Wait()
	return sumCounts(counts)
}

// loopCount is what a plain loop (one goroutine, or all of them) achieved: cycles
// completed, calls that failed, and the latency of each granted acquire.
type loopCount struct {
	cycles, errs int64
	acquires     []time.Duration
}

// sumCounts adds up the goroutines' counts.
func sumCounts(counts []loopCount) loopCount {
	var all loopCount
	for _, c := range counts {
		all.cycles += c.cycles
		all.errs += c.errs
		all.acquires = append(all.acquires, c.acquires...)
	}
	return all
}

// fill sets a Baseline's cycles, errors and acquire percentiles.
func (c loopCount) fill(b *Baseline) {
	b.Cycles, b.Errors = c.cycles, c.errs
	sorted := slices.Clone(c.acquires)
	slices.Sort(sorted)
	b.AcquireP50, b.AcquireP99 = percentile(sorted, 50), percentile(sorted, 99)
}

// percentile is the p-th percentile (nearest rank) of sorted durations, 0 of none.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// PlainLoopConfig is one process of a per-process baseline: the `zlockcheck
// plain-loop` command the harness starts in a worker slot's namespace.
type PlainLoopConfig struct {
	// Servers are the ensemble's client addresses; Path is the lock node.
	Servers []string
	Path    string
	// SessionTimeout is the session's timeout.
	SessionTimeout time.Duration
	// Start is when the loop begins (every process gets the same, so all sessions are
	// up before anybody's clock runs); Duration is how long it runs.
	Start    time.Time
	Duration time.Duration
	// HoldMin and HoldMax bound each hold, drawn uniformly with Seed.
	HoldMin, HoldMax time.Duration
	Seed             uint64
}

// PlainLoop runs one session's plain lock loop (PlainLoopConfig) and returns what it
// achieved.
func PlainLoop(ctx context.Context, cfg PlainLoopConfig) (Baseline, error) {
	b := Baseline{Goroutines: 1, Duration: cfg.Duration}
	switch {
	case len(cfg.Servers) == 0 || cfg.Path == "":
		return b, errors.New("plain loop: needs the servers and the lock path")
	case cfg.SessionTimeout <= 0 || cfg.Duration <= 0:
		return b, errors.New("plain loop: needs a positive session timeout and duration")
	case cfg.HoldMin < 0 || cfg.HoldMax < cfg.HoldMin:
		return b, fmt.Errorf("plain loop: hold range %s..%s: want 0 <= min <= max", cfg.HoldMin, cfg.HoldMax)
	}
	c, err := plainSession(cfg.Servers, cfg.SessionTimeout, nil, nil)
	if err != nil {
		return b, fmt.Errorf("plain loop: %w", err)
	}
	defer c.Close()
	wait := time.NewTimer(time.Until(cfg.Start))
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-ctx.Done():
		return b, ctx.Err()
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, 0))
	hold := func(int) time.Duration {
		if span := cfg.HoldMax - cfg.HoldMin; span > 0 {
			return cfg.HoldMin + time.Duration(rng.Int64N(int64(span)))
		}
		return cfg.HoldMin
	}
	plainLoop(ctx, []*zk.Conn{c}, cfg.Path, cfg.Start.Add(cfg.Duration), hold).fill(&b)
	return b, ctx.Err()
}
