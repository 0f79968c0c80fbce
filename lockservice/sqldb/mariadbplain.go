package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// PlainLoops is the plain MariaDB client loop, the yardstick of a MariaDB run
// (--baseline, and its warm-up): n goroutines, each with its own connection (a
// database/sql *sql.Conn of go-sql-driver/mysql, from a pool of its own, dialled from
// the harness through Dial) to server 1 as the lock's user on its database, loop
// SELECT GET_LOCK(name, timeout), hold(i), SELECT RELEASE_LOCK(name) (name =
// MariaDBLockName(path)) for d, and count cycles and failed requests. It records
// nothing.
//
// GET_LOCK's timeout is the time left until the deadline, so a waiter queued in the
// server gives up at the deadline (GET_LOCK answers 0) and its loop ends. A failed
// request counts as an error, and after one that was not the server's error reply the
// next request opens a new connection. Parameters are interpolated in the client
// (one round trip a statement). Every connection must open before the clock starts,
// or PlainLoops fails naming the server.
func (m *MariaDB) PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error) {
	return m.plainRun(ctx, n, d, hold, m.Leader, func(s *Server) (dbPlainClient, error) {
		cfg := mysql.NewConfig()
		cfg.User, cfg.DBName = DatabaseUser, DatabaseName
		if m.existing != nil {
			cfg = m.existing.config(s.ID-1, m.runDatabase())
		}
		cfg.Net, cfg.Addr = "tcp", s.ClientAddr()
		return newMariaDBPlain(m.Dial, cfg, locknames.MariaDBLockName(path), dbPlainIO(sessionTimeout))
	})
}

// mariadbPlain is one goroutine of the plain MariaDB loop: one connection of a
// database/sql pool of its own.
type mariadbPlain struct {
	db   *sql.DB
	name string
	io   time.Duration
	conn *sql.Conn
}

var _ dbPlainClient = (*mariadbPlain)(nil)

// newMariaDBPlain makes the client's pool of the server cfg names (as the lock's
// user on its database, dialling through dial); it connects on first use.
func newMariaDBPlain(dial func(context.Context, string, time.Duration) (net.Conn, error), cfg *mysql.Config, name string, io time.Duration) (*mariadbPlain, error) {
	cfg.Timeout = 3 * io
	cfg.InterpolateParams = true
	cfg.Logger = &mysql.NopLogger{} // a failed request is counted
	cfg.DialFunc = func(ctx context.Context, _, addr string) (net.Conn, error) { return dial(ctx, addr, 3*io) }
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return &mariadbPlain{db: sql.OpenDB(connector), name: name, io: io}, nil
}

// connect opens the connection, unless it is open.
func (c *mariadbPlain) connect(ctx context.Context) error {
	if c.conn != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 3*c.io)
	defer cancel()
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return err
	}
	if err := conn.PingContext(ctx); err != nil {
		_ = conn.Close()
		return err
	}
	c.conn = conn
	return nil
}

// fail drops the connection after an error other than the server's error reply,
// and returns err.
func (c *mariadbPlain) fail(err error) error {
	var me *mysql.MySQLError
	if err != nil && !errors.As(err, &me) && c.conn != nil {
		_ = c.conn.Close() // the driver marked it closed: the pool discards it
		c.conn = nil
	}
	return err
}

// lock is GET_LOCK with the time left until deadline as its timeout.
func (c *mariadbPlain) lock(ctx context.Context, deadline time.Time) (bool, error) {
	if err := c.connect(ctx); err != nil {
		return false, err
	}
	left := time.Until(deadline)
	if left <= 0 {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, left+c.io)
	defer cancel()
	var got sql.NullInt64
	err := c.fail(c.conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", c.name, left.Seconds()).Scan(&got))
	switch {
	case err != nil:
		return false, err
	case !got.Valid:
		return false, errors.New("GET_LOCK returned NULL (an error in the server)")
	}
	return got.Int64 == 1, nil
}

// unlock is RELEASE_LOCK: anything but 1 (not held by this session, or no such lock)
// is an error.
func (c *mariadbPlain) unlock(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.io)
	defer cancel()
	var got sql.NullInt64
	if err := c.fail(c.conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", c.name).Scan(&got)); err != nil {
		return err
	}
	if !got.Valid || got.Int64 != 1 {
		return fmt.Errorf("RELEASE_LOCK answered %v: the session did not hold the lock", got)
	}
	return nil
}

// close closes the connection and the pool.
func (c *mariadbPlain) close() {
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
	_ = c.db.Close()
}
