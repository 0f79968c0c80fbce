package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// How the run sees a lock on MariaDB: mariadb-getlock holds GET_LOCK's lock named
// MariaDBLockName(lockPath) on each server it uses (and a worker's place may name
// another GET_LOCK name: those are read too), and a session is a connection's
// CONNECTION_ID() written as SessionName. On each server that answers, the lock's
// entries are "s<server>-<id>" for the connection holding it (IS_USED_LOCK), then
// for each connection waiting in GET_LOCK for it, longest waiting first. A waiter
// is found by its statement in the processlist (state "User lock", its text
// calling GET_LOCK with the quoted name): a client that sends GET_LOCK as a
// server-side prepared statement, whose text shows "?", is not seen waiting; the
// holder is always seen. Connection ids repeat across servers, so the owner alone
// does not say which server: the entry's name does. Holders on every server come
// before the waiters.

// readMariaDBLock reads the lock's holder and waiters on server s.
func (m *MariaDB) readMariaDBLock(ctx context.Context, s *Server, name string) ([]dbLockEntry, error) {
	var out []dbLockEntry
	entry := func(id int64, waiting bool) dbLockEntry {
		return dbLockEntry{name: fmt.Sprintf("s%d-%d", s.ID, id), owner: lockservice.SessionName(uint64(id)), waiting: waiting}
	}
	err := m.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error {
		var holder sql.NullInt64
		if err := c.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", name).Scan(&holder); err != nil {
			return fmt.Errorf("IS_USED_LOCK: %w", err)
		}
		if holder.Valid {
			out = append(out, entry(holder.Int64, false))
		}
		rows, err := c.QueryContext(ctx, `SELECT ID FROM information_schema.PROCESSLIST
			WHERE STATE = 'User lock' AND ID <> CONNECTION_ID() AND LOCATE(CONCAT('GET_LOCK(', QUOTE(?)), INFO) > 0
			ORDER BY TIME_MS DESC, ID`, name)
		if err != nil {
			return fmt.Errorf("reading the processlist: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				return err
			}
			if !holder.Valid || id != holder.Int64 {
				out = append(out, entry(id, true))
			}
		}
		return rows.Err()
	})
	return out, err
}

// lockEntries are the lock's entries on every server that answers, read in
// parallel; no server answering is an error.
func (m *MariaDB) lockEntries(ctx context.Context, lock lockservice.Lock) ([]dbLockEntry, error) {
	names := []string{locknames.MariaDBLockName(lock.Path)}
	for _, p := range lock.Places {
		if p.GetLock != "" && !slices.Contains(names, p.GetLock) {
			names = append(names, p.GetLock)
		}
	}
	name := strings.Join(names, ", ")
	type read struct {
		es  []dbLockEntry
		err error
	}
	reads := eachServer(m.Servers, func(s *Server) read {
		var all []dbLockEntry
		for _, n := range names {
			es, err := m.readMariaDBLock(ctx, s, n)
			if err != nil {
				return read{nil, err}
			}
			all = append(all, es...)
		}
		return read{all, nil}
	})
	var out []dbLockEntry
	var failed []string
	for i, s := range m.Servers {
		if reads[i].err != nil {
			failed = append(failed, fmt.Sprintf("server %d: %v", s.ID, reads[i].err))
			continue
		}
		out = append(out, reads[i].es...)
	}
	if len(failed) == len(m.Servers) {
		return nil, fmt.Errorf("mariadb: reading lock %s: no server answers (%s)", name, strings.Join(failed, "; "))
	}
	return holdersFirst(out), nil
}

// mariadbLock is a LockReader of a MariaDB lock: each read is its own connections.
type mariadbLock struct{ m *MariaDB }

var _ lockservice.LockReader = mariadbLock{}

// OpenLock returns a reader of GET_LOCK's lock on every server (see
// dbinspectmariadb.go's comment: the holder, and the waiters the processlist
// shows). It holds no session of its own: each read opens fresh connections.
func (m *MariaDB) OpenLock(context.Context, time.Duration) (lockservice.LockReader, error) {
	return mariadbLock{m: m}, nil
}

// Entries are the lock's entries, "s<server>-<connection id>", holders first.
func (l mariadbLock) Entries(lock lockservice.Lock, _ bool) ([]string, error) {
	es, err := l.m.lockEntries(context.Background(), lock)
	return entryNames(es), err
}

// Owner is the session (connection id) owning entry name; false when it is gone.
func (l mariadbLock) Owner(lock lockservice.Lock, name string) (string, bool, error) {
	es, err := l.m.lockEntries(context.Background(), lock)
	return entryOwner(es, name, err)
}

// Close: the reader holds no connection.
func (mariadbLock) Close() {}

// Unread names the lock tables workers named: none is read on MariaDB.
func (mariadbLock) Unread(lock lockservice.Lock) []string { return lockservice.UnreadTables(lock) }

// LiveSessions are the sessions (SessionName of the connection id) of every client
// connection on every server that answers. Ids repeat across servers: a session
// is live when a connection with its id is on any server.
func (m *MariaDB) LiveSessions(ctx context.Context) map[string]bool {
	return liveSessions(m.allConns(ctx, m.connections))
}
