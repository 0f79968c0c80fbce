package etcd

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// PlainLoops is the plain etcd client loop, the yardstick of an etcd run
// (--baseline, and its warm-up): n goroutines, each with its own client of every
// member (dialled from the harness's hub) and its own session (a lease of
// sessionTimeout, in whole seconds), loop concurrency.Mutex's Lock, hold(i), Unlock
// on path for d, and count cycles and failed calls. It records nothing.
func (e *Etcd) PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error) {
	b := lockservice.Baseline{Goroutines: n, Duration: d}
	ttl := max(int((sessionTimeout+time.Second-1)/time.Second), 1)
	sessions := make([]*concurrency.Session, n)
	for i := range sessions {
		c, err := clientv3.New(clientv3.Config{Endpoints: lockservice.ClientAddrs(e.Members), DialTimeout: 2 * time.Second, Logger: zap.NewNop(),
			DialOptions: []grpc.DialOption{e.dialer(2 * time.Second)}})
		if err != nil {
			return b, fmt.Errorf("baseline client %d: %w", i, err)
		}
		defer c.Close()
		gctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		lease, err := c.Grant(gctx, int64(ttl))
		cancel()
		if err != nil {
			return b, fmt.Errorf("baseline client %d: grant a lease: %w", i, err)
		}
		if sessions[i], err = concurrency.NewSession(c, concurrency.WithLease(lease.ID)); err != nil {
			return b, fmt.Errorf("baseline client %d: %w", i, err)
		}
		defer sessions[i].Close()
	}
	deadline := time.Now().Add(d)
	counts := make([]lockservice.LoopCount, n)
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i] = plainLoop(ctx, s, path, deadline, func() time.Duration { return hold(i) })
		}()
	}
	wg.Wait()
	lockservice.SumCounts(counts).Fill(&b)
	return b, nil
}

// plainLoop locks, holds and unlocks path on session s until deadline.
func plainLoop(ctx context.Context, s *concurrency.Session, path string, deadline time.Time, hold func() time.Duration) lockservice.LoopCount {
	var c lockservice.LoopCount
	m := concurrency.NewMutex(s, path)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		lctx, cancel := context.WithDeadline(ctx, deadline)
		start := time.Now()
		err := m.Lock(lctx)
		cancel()
		if err != nil {
			if time.Now().Before(deadline) {
				c.Errs++
			}
			continue
		}
		c.Acquires = append(c.Acquires, time.Since(start))
		time.Sleep(hold())
		uctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err = m.Unlock(uctx)
		cancel()
		if err != nil {
			c.Errs++
			continue
		}
		c.Cycles++
	}
	return c
}
