package harness

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// Baseline is what a plain go-zookeeper lock loop achieved on the run's ensemble: the
// yardstick for the harness's own overhead (worker processes, pipes, recorder).
type Baseline struct {
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration_ns"`
	Cycles     int64         `json:"cycles"`
	Errors     int64         `json:"errors"`
}

// CyclesPerSecond is the baseline's lock cycles (acquire+release) per second.
func (b Baseline) CyclesPerSecond() float64 { return float64(b.Cycles) / b.Duration.Seconds() }

// runBaseline runs n goroutines, each with its own session, looping zk.Lock /
// Unlock with the same hold times as the workload, for d, against the ensemble, from
// the hub namespace. It records nothing.
func runBaseline(ctx context.Context, network *netns.Network, connect, path string, n int, d time.Duration, sessionTimeout time.Duration, hold func(int) time.Duration) (Baseline, error) {
	dialer := func(_, addr string, timeout time.Duration) (net.Conn, error) {
		return network.Dial(ctx, addr, timeout)
	}
	b := Baseline{Goroutines: n, Duration: d}
	var cycles, errs atomic.Int64
	conns := make([]*zk.Conn, n)
	for i := range conns {
		c, events, err := zk.Connect(strings.Split(connect, ","), sessionTimeout, zk.WithDialer(dialer), zk.WithLogInfo(false))
		if err != nil {
			return b, err
		}
		defer c.Close()
		if err := waitSession(events, 2*sessionTimeout); err != nil {
			return b, fmt.Errorf("baseline session %d: %w", i, err)
		}
		conns[i] = c
	}
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
			for time.Now().Before(deadline) && ctx.Err() == nil {
				if err := l.Lock(); err != nil {
					errs.Add(1)
					continue
				}
				time.Sleep(hold(i))
				if err := l.Unlock(); err != nil {
					errs.Add(1)
					continue
				}
				cycles.Add(1)
			}
		}()
	}
	wg.Wait()
	b.Cycles, b.Errors = cycles.Load(), errs.Load()
	return b, nil
}

func waitSession(events <-chan zk.Event, limit time.Duration) error {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return nil
			}
		case <-timer.C:
			return fmt.Errorf("no session within %s", limit)
		}
	}
}
