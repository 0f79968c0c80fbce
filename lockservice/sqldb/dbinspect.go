package sqldb

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// How the run sees a lock on Postgres. The recipes lock in one of two places: a row
// of table zlc_locks named by the lock path whose owner column is
// "<session>:<random>" (pg-table), or the advisory lock on key
// PostgresAdvisoryKey(lockPath) (pg-advisory). A session is a backend's pid written
// as SessionName, as the workers report it. The lock's entries, lowest first:
//
//   - "row": the row, read on the leader (Leader's choice), owned by the session
//     its owner column names;
//   - "advisory-<pid>": each backend that holds the advisory lock, then each that
//     waits for it by when it began to wait, on any server that answers (pids are
//     unique on the machine), owned by that backend. The advisory keys are the
//     path's and each a worker's place named (lockservice.Lock.Places).
//
// pg_advisory_lock(bigint) shows in pg_locks as locktype 'advisory' in the lock's
// database, the key's high 32 bits in classid, its low 32 bits in objid, and
// objsubid 1; pg_advisory_lock(int, int) the two keys in classid and objid, and
// objsubid 2.

// pgRowEntry names the lock table's row among a PostgreSQL lock's entries.
const pgRowEntry = "row"

// pgServerLock is what one server says about a lock.
type pgServerLock struct {
	recovery bool
	row      *dbLockEntry // nil: no row (or no table)
	advisory []dbLockEntry
	err      error
}

// pgUndefinedTable is SQLSTATE undefined_table: zlc_locks was never made.
const pgUndefinedTable = "42P01"

// readServerLock reads lockPath's row and advisory lock on server s, in the lock's
// database, over one connection.
func (p *Postgres) readServerLock(ctx context.Context, s *Server, lock lockservice.Lock) pgServerLock {
	lockPath := lock.Path
	var out pgServerLock
	out.err = p.queryAs(ctx, s, pgReader, lockservice.OpTimeout, func(ctx context.Context, c *pgx.Conn) error {
		if err := c.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&out.recovery); err != nil {
			return err
		}
		var owner string
		err := c.QueryRow(ctx, "SELECT owner FROM "+locknames.LockTable+" WHERE name = $1", lockPath).Scan(&owner)
		var pe *pgconn.PgError
		switch {
		case err == nil:
			out.row = &dbLockEntry{name: pgRowEntry, owner: lockservice.OwnerOf(owner)}
		case errors.Is(err, pgx.ErrNoRows), errors.As(err, &pe) && pe.Code == pgUndefinedTable:
		default:
			return fmt.Errorf("reading zlc_locks: %w", err)
		}
		for _, key := range advisoryKeys(lock) {
			es, err := advisoryEntries(ctx, c, key)
			if err != nil {
				return err
			}
			out.advisory = append(out.advisory, es...)
		}
		return nil
	})
	return out
}

// advisoryKey is an advisory lock as pg_locks shows it.
type advisoryKey struct {
	classid, objid int64
	objsubid       int
}

// advisoryKeys are the lock's advisory keys: the path's (one bigint,
// locknames.PostgresAdvisoryKey), then each a place names, once each.
func advisoryKeys(lock lockservice.Lock) []advisoryKey {
	bigint := func(k int64) advisoryKey { return advisoryKey{int64(uint64(k) >> 32), int64(uint32(k)), 1} }
	out := []advisoryKey{bigint(locknames.PostgresAdvisoryKey(lock.Path))}
	for _, p := range lock.Places {
		var k advisoryKey
		switch len(p.Advisory) {
		case 1:
			k = bigint(p.Advisory[0])
		case 2:
			k = advisoryKey{int64(uint32(int32(p.Advisory[0]))), int64(uint32(int32(p.Advisory[1]))), 2}
		default:
			continue
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// advisoryEntries are the backends that hold the advisory lock on key, then those
// waiting for it in the order they began to wait (a backend once, its granted row
// first).
func advisoryEntries(ctx context.Context, c *pgx.Conn, key advisoryKey) ([]dbLockEntry, error) {
	rows, err := c.Query(ctx, `SELECT pid, NOT granted FROM (
			SELECT DISTINCT ON (l.pid) l.pid, l.granted, l.waitstart FROM pg_locks l
			WHERE l.locktype = 'advisory' AND l.pid IS NOT NULL
				AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
				AND l.classid::bigint = $1 AND l.objid::bigint = $2 AND l.objsubid = $3
			ORDER BY l.pid, l.granted DESC) t
		ORDER BY granted DESC, waitstart NULLS LAST, pid`, key.classid, key.objid, key.objsubid)
	if err != nil {
		return nil, fmt.Errorf("reading pg_locks: %w", err)
	}
	var out []dbLockEntry
	var pid int64
	var waiting bool
	_, err = pgx.ForEachRow(rows, []any{&pid, &waiting}, func() error {
		out = append(out, dbLockEntry{name: "advisory-" + strconv.FormatInt(pid, 10), owner: lockservice.SessionName(uint64(pid)), waiting: waiting})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading pg_locks: %w", err)
	}
	return out, nil
}

// lockEntries are lockPath's entries (see above), read from every server in
// parallel. A server that does not answer is left out; none answering as the
// primary is an error.
func (p *Postgres) lockEntries(ctx context.Context, lock lockservice.Lock) ([]dbLockEntry, error) {
	lockPath := lock.Path
	reads := eachServer(p.Servers, func(s *Server) pgServerLock { return p.readServerLock(ctx, s, lock) })
	var out, advisory []dbLockEntry
	leader := false
	var errs []string
	for _, s := range p.leaderOrder() {
		r := reads[s.ID-1]
		if r.err != nil {
			errs = append(errs, fmt.Sprintf("server %d: %v", s.ID, r.err))
			continue
		}
		if !leader && !r.recovery {
			leader = true
			if r.row != nil {
				out = append(out, *r.row)
			}
		}
	}
	for _, r := range reads {
		if r.err == nil {
			advisory = append(advisory, r.advisory...)
		}
	}
	if !leader {
		return nil, fmt.Errorf("postgres: reading lock %s: no server answers as the primary (%s)", lockPath, strings.Join(errs, "; "))
	}
	return append(out, holdersFirst(advisory)...), nil
}

// leaderOrder is the order in which Leader looks for the primary: the server last
// promoted, then every server by number.
func (p *Postgres) leaderOrder() []*Server {
	p.mu.Lock()
	defer p.mu.Unlock()
	order := append([]*Server(nil), p.Servers...)
	if p.promoted > 0 && p.promoted <= len(order) {
		order = append([]*Server{order[p.promoted-1]}, order...)
	}
	return order
}

// PostgresLock is a LockReader of a Postgres lock: each read is its own connections.
// PostgresLock reads a lock's entries on PostgreSQL (OpenLock).
type PostgresLock struct{ p *Postgres }

var _ lockservice.LockReader = PostgresLock{}

// OpenLock returns a reader of the lock's entries (see dbinspect.go's comment:
// the lock table's row, then the advisory lock's holders and waiters). It holds no
// session of its own: each read opens fresh connections, bounded like every query
// of the harness.
func (p *Postgres) OpenLock(context.Context, time.Duration) (lockservice.LockReader, error) {
	return PostgresLock{p: p}, nil
}

// Entries are the lock's entries, lowest first: "row", then "advisory-<pid>".
func (l PostgresLock) Entries(lock lockservice.Lock, _ bool) ([]string, error) {
	es, err := l.p.lockEntries(context.Background(), lock)
	return entryNames(es), err
}

// Owner is the session owning entry name; false when the entry is gone.
func (l PostgresLock) Owner(lock lockservice.Lock, name string) (string, bool, error) {
	es, err := l.p.lockEntries(context.Background(), lock)
	return entryOwner(es, name, err)
}

// OutlivesSession reports whether entry stays when its owner's session ends: the
// lock table's row does ("row"); an advisory lock goes with its session.
func (PostgresLock) OutlivesSession(entry string) bool { return entry == pgRowEntry }

// Close: the reader holds no connection.
func (PostgresLock) Close() {}

// Unread names the lock tables of the workers' own: only the recipes' is read.
func (PostgresLock) Unread(lock lockservice.Lock) []string {
	return lockservice.UnreadTables(lock, locknames.LockTable)
}

// LiveSessions are the sessions (SessionName of the backend pid) of every client
// backend on every server that answers.
func (p *Postgres) LiveSessions(ctx context.Context) map[string]bool {
	return liveSessions(p.allConns(ctx, p.backends))
}
