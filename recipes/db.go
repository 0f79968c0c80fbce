package recipes

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// The database recipes share this file's plumbing: the connection string rebuilt
// from init's connect, one dedicated pgx connection that reconnects on demand and
// reports each backend pid as the session (pgSession), and the classification of
// pgx errors (pgDefinite).
//
// What pgx does when a request's context ends mid-flight: its default context
// watcher (pgconn.DeadlineContextWatcherHandler) sets a past deadline on the socket,
// the read fails, and pgconn closes the connection (asyncClose: a CancelRequest on a
// new connection, then Terminate). The server ends the session once it sees that,
// and a session's advisory locks go with it. A context that ended before the request
// was sent fails it with nothing sent (pgconn.SafeToRetry) and the connection lives.
// So every request here has a deadline, and a request that failed with the
// connection closed is treated as the end of the session: the recipe reports lost
// for whatever the session held, and reconnects (a new session) for the next one.

// dbIOTimeout bounds one request: a quarter of the session timeout, between 50ms and
// 2s, so that an answer that comes at all comes while a lease it renews is valid.
func dbIOTimeout(t time.Duration) time.Duration {
	return min(max(t/4, 50*time.Millisecond), 2*time.Second)
}

// dialFunc dials a database server; tests dial from a network namespace.
type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// pgConnString rebuilds the libpq URL that init's connect carried (Serve splits
// connect at commas, which also separate a URL's hosts); a bare host:port list
// becomes a URL for the lock's user and database. A URL without
// target_session_attrs gets read-write, so that after a failover new sessions go to
// the promoted server, not to a standby.
func pgConnString(servers []string) string {
	s := strings.Join(servers, ",")
	if !strings.Contains(s, "://") {
		s = "postgres://zlc@" + s + "/zlc?sslmode=disable"
	}
	if !strings.Contains(s, "target_session_attrs=") {
		sep := "?"
		if strings.Contains(s, "?") {
			sep = "&"
		}
		s += sep + "target_session_attrs=read-write"
	}
	return s
}

// pgSession is one dedicated pgx connection (a pgx.Conn, not a pool: a session),
// opened on first use and again after it closed. Each new connection's backend pid
// is reported as the session. Its methods are called with mu held: the request
// goroutine and a heartbeat or renewer share the connection.
type pgSession struct {
	connString string
	dial       dialFunc
	io         time.Duration
	events     Events
	log        *log.Logger

	mu   sync.Mutex
	conn *pgx.Conn
	pid  uint32
	port int // the connection's local port, which pg_stat_activity shows
}

// ready returns the open connection, connecting first if there is none (or it
// closed). A connect failure is definite: nothing was sent.
func (s *pgSession) ready(ctx context.Context) (*pgx.Conn, error) {
	if s.conn != nil && !s.conn.IsClosed() {
		return s.conn, nil
	}
	s.drop()
	cc, err := pgx.ParseConfig(s.connString)
	if err != nil {
		return nil, Fail(fmt.Errorf("connect string: %w", err))
	}
	cc.ConnectTimeout = 3 * s.io
	if s.dial != nil {
		cc.DialFunc = pgconn.DialFunc(s.dial)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*s.io)
	defer cancel()
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("%w: connecting: %w", errPollAgain, err)
	}
	s.conn, s.pid = c, c.PgConn().PID()
	if a, ok := c.PgConn().Conn().LocalAddr().(*net.TCPAddr); ok {
		s.port = a.Port
	}
	s.events.Session(int64(s.pid), nil)
	return c, nil
}

// closed reports whether the session is gone (its connection closed).
func (s *pgSession) closed() bool { return s.conn == nil || s.conn.IsClosed() }

// drop closes the connection (if any); the next ready opens a new session.
func (s *pgSession) drop() {
	if s.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.io)
		_ = s.conn.Close(ctx)
		cancel()
		s.conn = nil
	}
}

// endOld makes sure the session of a connection that closed mid-request is gone
// before its effects are read back: from a new connection it terminates the old
// backend if it still runs (pg_terminate_backend, which a role may do to its own
// backends, waiting up to a second for it to exit). A statement the old backend was
// still running then either committed or never will.
func (s *pgSession) endOld(ctx context.Context, pid uint32, port int) error {
	c, err := s.ready(ctx)
	if err != nil {
		return err
	}
	if pid == 0 || pid == s.pid {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.io+time.Second)
	defer cancel()
	_, err = c.Exec(ctx, "SELECT pg_terminate_backend(pid, 1000) FROM pg_stat_activity WHERE pid = $1 AND client_port = $2",
		int64(pid), port)
	return err
}

// pgDefinite reports whether a pgx error certainly left the database unchanged: an
// ERROR reply (the statement, and its implicit transaction, rolled back), a request
// never sent, or a failed connect. A FATAL reply (the session was terminated) or a
// broken connection after sending is not.
func pgDefinite(err error) bool {
	var pe *pgconn.PgError
	switch {
	case errors.Is(err, errPollAgain):
		return true
	case errors.As(err, &pe):
		return pe.Severity == "ERROR"
	}
	return pgconn.SafeToRetry(err)
}

// pgSessionEnded reports whether err is the server ending the session itself: a
// FATAL or PANIC reply, after which the backend exits and every lock of its session
// is freed.
func pgSessionEnded(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Severity == "FATAL" || pe.Severity == "PANIC")
}

// pgCode returns the SQLSTATE of a server error reply, "" for other errors.
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// checkDBConfig refuses what a database recipe named name cannot do: kinds it does
// not list, several permits, a missing lock name or session timeout, no server.
func checkDBConfig(name string, cfg Config, kinds ...workloads.Kind) error {
	ok := false
	for _, k := range kinds {
		ok = ok || cfg.Kind == k
	}
	switch {
	case !ok:
		return Fail(fmt.Errorf("recipe %s does not support kind %s (it speaks %v)", name, cfg.Kind, kinds))
	case cfg.Permits > 1:
		return Fail(fmt.Errorf("recipe %s: a mutex has one permit, got permits %d", name, cfg.Permits))
	case cfg.SessionTimeout <= 0 || cfg.Path == "":
		return Fail(fmt.Errorf("recipe %s: Config needs SessionTimeout and Path (the lock's name)", name))
	case len(cfg.Servers) == 0:
		return Fail(fmt.Errorf("recipe %s: no database server in connect", name))
	}
	return nil
}

// dbSchema creates the lock table and the counter table if they are missing: the
// harness's copy (locknames.PostgresSchema, which MakeCounter runs too).
const dbSchema = locknames.PostgresSchema
