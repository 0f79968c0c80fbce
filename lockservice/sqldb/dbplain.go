package sqldb

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// The PostgreSQL and MariaDB plain loops (postgresplain.go, mariadbplain.go) differ
// only in their clients (dbPlainClient: each driver's connection and lock calls).

// plainRun runs a database's plain loop on the server leader names (else server 1):
// n clients made by open, each connected before the clock starts (or an error naming
// the server), loop for dur; the Baseline says what they achieved.
func (d *dbServers) plainRun(ctx context.Context, n int, dur time.Duration, hold func(int) time.Duration,
	leader func(context.Context) (int, bool), open func(*Server) (dbPlainClient, error)) (lockservice.Baseline, error) {
	b := lockservice.Baseline{Goroutines: n, Duration: dur}
	if len(d.Servers) == 0 {
		return b, fmt.Errorf("%s: no server for the baseline", d.layout.kind)
	}
	s := d.Servers[0]
	if id, ok := leader(ctx); ok {
		s = d.Servers[id-1]
	}
	clients := make([]dbPlainClient, n)
	for i := range clients {
		c, err := open(s)
		if err != nil {
			return b, err
		}
		defer c.close()
		if err := c.connect(ctx); err != nil {
			return b, fmt.Errorf("baseline client %d: server %d (%s): %w", i, s.ID, s.ClientAddr(), err)
		}
		clients[i] = c
	}
	dbPlainLoops(ctx, clients, time.Now().Add(dur), hold).Fill(&b)
	return b, nil
}

// dbPlainIO bounds a plain database loop's requests other than the lock's wait (and,
// three times over, its connect), as the database recipes bound theirs: a quarter of
// the session timeout, 50 ms..2 s.
func dbPlainIO(sessionTimeout time.Duration) time.Duration {
	return min(max(sessionTimeout/4, 50*time.Millisecond), 2*time.Second)
}

// dbPlainClient is one goroutine of a database's plain loop: its dedicated
// connection and the lock it takes.
type dbPlainClient interface {
	// connect opens the client's connection.
	connect(ctx context.Context) error
	// lock waits for the lock until deadline: false when the deadline came first.
	lock(ctx context.Context, deadline time.Time) (bool, error)
	// unlock releases the lock: an error when the server says it was not held.
	unlock(ctx context.Context) error
	// close closes the connection.
	close()
}

// dbPlainLoops loops lock / hold / unlock on every client in its own goroutine until
// deadline (the PostgreSQL and MariaDB plain loops) and returns what they achieved
// together.
func dbPlainLoops(ctx context.Context, clients []dbPlainClient, deadline time.Time, hold func(int) time.Duration) lockservice.LoopCount {
	counts := make([]lockservice.LoopCount, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			counts[i] = dbPlainLoop(ctx, c, deadline, func() time.Duration { return hold(i) })
		}()
	}
	wg.Wait()
	return lockservice.SumCounts(counts)
}

// dbPlainLoop runs lock, hold, unlock on one client until deadline and counts what it
// achieved; it pauses 1-10 ms at random after a failed request.
func dbPlainLoop(ctx context.Context, c dbPlainClient, deadline time.Time, hold func() time.Duration) lockservice.LoopCount {
	var n lockservice.LoopCount
	pause := func() { time.Sleep(time.Millisecond + rand.N(9*time.Millisecond)) }
	for time.Now().Before(deadline) && ctx.Err() == nil {
		start := time.Now()
		got, err := c.lock(ctx, deadline)
		switch {
		case err != nil:
			n.Errs++
			pause()
			continue
		case !got:
			return n // the deadline came while waiting
		}
		n.Acquires = append(n.Acquires, time.Since(start))
		time.Sleep(hold())
		if err := c.unlock(ctx); err != nil {
			n.Errs++
			pause()
			continue
		}
		n.Cycles++
	}
	return n
}
