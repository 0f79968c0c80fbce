package zookeeper

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// PlainLoops runs n goroutines, each with its own session, looping zk.Lock / Unlock
// on path with hold times from hold, for d, from the harness (Dial). It records
// nothing: it is the yardstick a run's overhead is measured against.
func (e *Ensemble) PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error) {
	dialer := func(_, addr string, timeout time.Duration) (net.Conn, error) {
		return e.Dial(ctx, addr, timeout)
	}
	connect := e.Connect()
	b := lockservice.Baseline{Goroutines: n, Duration: d}
	conns := make([]*zk.Conn, n)
	for i := range conns {
		c, err := plainSession(strings.Split(connect, ","), sessionTimeout, dialer, nil)
		if err != nil {
			return b, fmt.Errorf("baseline session %d: %w", i, err)
		}
		defer c.Close()
		conns[i] = c
	}
	plainLoop(ctx, conns, path, time.Now().Add(d), hold).Fill(&b)
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
func plainLoop(ctx context.Context, conns []*zk.Conn, path string, deadline time.Time, hold func(int) time.Duration) lockservice.LoopCount {
	counts := make([]lockservice.LoopCount, len(conns))
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
					n.Errs++
					continue
				}
				n.Acquires = append(n.Acquires, time.Since(start))
				time.Sleep(hold(i))
				if err := l.Unlock(); err != nil {
					n.Errs++
					continue
				}
				n.Cycles++
			}
		}()
	}
	wg.Wait()
	return lockservice.SumCounts(counts)
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
func PlainLoop(ctx context.Context, cfg PlainLoopConfig) (lockservice.Baseline, error) {
	b := lockservice.Baseline{Goroutines: 1, Duration: cfg.Duration}
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
	plainLoop(ctx, []*zk.Conn{c}, cfg.Path, cfg.Start.Add(cfg.Duration), hold).Fill(&b)
	return b, ctx.Err()
}
