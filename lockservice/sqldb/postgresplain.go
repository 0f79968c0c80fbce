package sqldb

import (
	"context"
	"errors"
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
	return p.plainRun(ctx, n, d, hold, p.Leader, func(s *Server) (dbPlainClient, error) {
		io := dbPlainIO(sessionTimeout)
		cc, err := p.connConfig(s, pgOwner, 3*io)
		return &pgPlain{config: cc, key: locknames.PostgresAdvisoryKey(path), io: io}, err
	})
}

// pgPlain is one goroutine of the plain PostgreSQL loop: a pgx connection of its own.
type pgPlain struct {
	config *pgx.ConnConfig // as the lock's user (pgOwner), copied for each connection
	key    int64
	io     time.Duration
	conn   *pgx.Conn
}

var _ dbPlainClient = (*pgPlain)(nil)

// connect opens the connection (again, when it closed) as the lock's user.
func (c *pgPlain) connect(ctx context.Context) error {
	if c.conn != nil && !c.conn.IsClosed() {
		return nil
	}
	c.close()
	cc := c.config.Copy()
	ctx, cancel := context.WithTimeout(ctx, 3*c.io)
	defer cancel()
	var err error
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
