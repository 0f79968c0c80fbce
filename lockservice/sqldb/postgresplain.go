package sqldb

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// PlainLoops is the plain PostgreSQL client loop, the yardstick of a PostgreSQL run
// (--baseline, and its warm-up), whatever the recipe: n goroutines, each with its own
// pgx connection (dialled from the harness through Dial) to the primary (Leader, else
// server 1) as the lock's user on its database, loop SELECT pg_advisory_lock(key),
// hold(i), SELECT pg_advisory_unlock(key) (key = PostgresAdvisoryKey(path)) for d,
// and count cycles and failed requests. It records nothing.
//
// A waiter queues in the server; the deadline ends its wait (pgx closes the
// connection) and its loop. A failed request counts as an error, and the next
// request reconnects when the connection closed. Every connection must open before
// the clock starts, or PlainLoops fails naming the server.
func (p *Postgres) PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error) {
	b := lockservice.Baseline{Goroutines: n, Duration: d}
	if len(p.Servers) == 0 {
		return b, errors.New("postgres: no server for the baseline")
	}
	s := p.Servers[0]
	if id, ok := p.Leader(ctx); ok {
		s = p.Servers[id-1]
	}
	return dbPlainRun(ctx, b, s, hold, func() (dbPlainClient, error) {
		return &pgPlain{dial: p.Dial, addr: s.ClientAddr(), key: locknames.PostgresAdvisoryKey(path), io: dbPlainIO(sessionTimeout)}, nil
	})
}

// dbPlainRun runs a database's plain loop on server s: b.Goroutines clients made by
// open, each connected before the clock starts (or an error naming the server), loop
// for b.Duration; b is returned with what they achieved.
func dbPlainRun(ctx context.Context, b lockservice.Baseline, s *Server, hold func(int) time.Duration, open func() (dbPlainClient, error)) (lockservice.Baseline, error) {
	clients := make([]dbPlainClient, b.Goroutines)
	for i := range clients {
		c, err := open()
		if err != nil {
			return b, err
		}
		defer c.close()
		if err := c.connect(ctx); err != nil {
			return b, fmt.Errorf("baseline client %d: server %d (%s): %w", i, s.ID, s.ClientAddr(), err)
		}
		clients[i] = c
	}
	dbPlainLoops(ctx, clients, time.Now().Add(b.Duration), hold).Fill(&b)
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

// pgPlain is one goroutine of the plain PostgreSQL loop: a pgx connection of its own.
type pgPlain struct {
	dial func(context.Context, string, time.Duration) (net.Conn, error)
	addr string
	key  int64
	io   time.Duration
	conn *pgx.Conn
}

var _ dbPlainClient = (*pgPlain)(nil)

// connect opens the connection (again, when it closed) as the lock's user.
func (c *pgPlain) connect(ctx context.Context) error {
	if c.conn != nil && !c.conn.IsClosed() {
		return nil
	}
	c.close()
	host, port, err := net.SplitHostPort(c.addr)
	if err != nil {
		return err
	}
	cc, err := pgx.ParseConfig(fmt.Sprintf("host=%s port=%s user=%s dbname=%s sslmode=disable", host, port, DatabaseUser, DatabaseName))
	if err != nil {
		return err
	}
	cc.ConnectTimeout = 3 * c.io
	cc.DialFunc = func(ctx context.Context, _, addr string) (net.Conn, error) { return c.dial(ctx, addr, 3*c.io) }
	ctx, cancel := context.WithTimeout(ctx, 3*c.io)
	defer cancel()
	c.conn, err = pgx.ConnectConfig(ctx, cc)
	return err
}

// lock is pg_advisory_lock, waiting until deadline.
func (c *pgPlain) lock(ctx context.Context, deadline time.Time) (bool, error) {
	if err := c.connect(ctx); err != nil {
		return false, err
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_, err := c.conn.Exec(ctx, "SELECT pg_advisory_lock($1)", c.key)
	if err != nil && ctx.Err() != nil && !time.Now().Before(deadline) {
		return false, nil
	}
	return err == nil, err
}

// unlock is pg_advisory_unlock: false (the lock not held) is an error.
func (c *pgPlain) unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.io)
	defer cancel()
	var ok bool
	if err := c.conn.QueryRow(ctx, "SELECT pg_advisory_unlock($1)", c.key).Scan(&ok); err != nil {
		return err
	}
	if !ok {
		return errors.New("pg_advisory_unlock: the session did not hold the lock")
	}
	return nil
}

// close closes the connection, if any.
func (c *pgPlain) close() {
	if c.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.io)
	defer cancel()
	_ = c.conn.Close(ctx)
	c.conn = nil
}
