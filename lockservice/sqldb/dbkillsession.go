package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// KillSession is the server-side kill of a session, the analogue on Redis,
// Postgres and MariaDB of ZooKeeper's session expiry: the server ends the
// connection, and with it whatever the session held there. Each takes the session as
// the workers report it ("0x<hex>", SessionName) and the server it is on (from 1),
// and says how many connections it ended.

// KillSession ends the backend whose pid is session on server
// (pg_terminate_backend, waiting up to a second for it to exit): 1 when it ended,
// 0 when server has no such backend (or it did not exit within the second).
func (p *Postgres) KillSession(ctx context.Context, server int, session string) (int, error) {
	pid, ok := sessionNumber(session)
	if !ok {
		return 0, fmt.Errorf("postgres: kill session %q: not a session id (0x<hex>)", session)
	}
	s, err := p.server(server)
	if err != nil {
		return 0, err
	}
	var ended bool
	if err := p.queryRow(ctx, s, "SELECT pg_terminate_backend($1, 1000)", []any{int64(pid)}, &ended); err != nil {
		return 0, fmt.Errorf("postgres: kill session %s (backend %d) on server %d: %w", session, pid, server, err)
	}
	if ended {
		return 1, nil
	}
	return 0, nil
}

// mariadbUnknownThread is ER_NO_SUCH_THREAD: KILL of a connection id that is not
// (or no longer) there.
const mariadbUnknownThread = 1094

// KillSession ends connection session on server (KILL CONNECTION): 1 when it
// did, 0 when there was no such connection (MariaDB's error 1094, unknown thread).
func (m *MariaDB) KillSession(ctx context.Context, server int, session string) (int, error) {
	id, ok := sessionNumber(session)
	if !ok {
		return 0, fmt.Errorf("mariadb: kill session %q: not a session id (0x<hex>)", session)
	}
	s, err := m.server(server)
	if err != nil {
		return 0, err
	}
	err = m.killConnection(ctx, s, id)
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &me) && me.Number == mariadbUnknownThread:
		return 0, nil
	case err != nil:
		return 0, fmt.Errorf("mariadb: kill session %s (connection %d) on server %d: %w", session, id, server, err)
	}
	return 1, nil
}

// KillConnection ends connection id on server (KILL CONNECTION), as KillSession does,
// but an unknown connection is an error.
func (m *MariaDB) KillConnection(ctx context.Context, server int, id uint64) error {
	s, err := m.server(server)
	if err != nil {
		return err
	}
	if err := m.killConnection(ctx, s, id); err != nil {
		return fmt.Errorf("mariadb: kill connection %d on server %d: %w", id, server, err)
	}
	return nil
}

// killConnection is KILL CONNECTION id on server s.
func (m *MariaDB) killConnection(ctx context.Context, s *Server, id uint64) error {
	return m.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error {
		_, err := c.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		return err
	})
}
