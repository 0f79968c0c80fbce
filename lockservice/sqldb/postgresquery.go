package sqldb

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"golang.org/x/sys/unix"
)

// pgRole is who the harness connects as, and to which database, for what it does:
// on the tool's own servers each is an account the tool made; on an existing
// PostgreSQL (ConnectPostgres) each is the user's role and database from --connect,
// the run's schema first in the search path where the lock's tables are read.
type pgRole int

const (
	// pgAdmin: the servers' state (recovery, backends, terminating one): the
	// superuser on database postgres.
	pgAdmin pgRole = iota
	// pgReader: the lock's database as a reader of every worker's rows: the
	// superuser on DatabaseName.
	pgReader
	// pgOwner: the lock's tables as the workers have them: DatabaseUser on
	// DatabaseName, whose tables the workers' are.
	pgOwner
)

// connConfig is how the harness connects to server s as role, dialled through the
// run's network and bounded by within.
func (p *Postgres) connConfig(s *Server, role pgRole, within time.Duration) (*pgx.ConnConfig, error) {
	var cc *pgx.ConnConfig
	var err error
	if p.existing != nil {
		cc, err = p.existing.config(s.ID-1, role != pgAdmin, p.runSchema())
	} else {
		user, db := "postgres", "postgres"
		switch role {
		case pgReader:
			db = DatabaseName
		case pgOwner:
			user, db = DatabaseUser, DatabaseName
		}
		cc, err = pgx.ParseConfig(fmt.Sprintf("host=%s port=%d user=%s dbname=%s sslmode=disable", s.Host.Addr(), s.Port, user, db))
	}
	if err != nil {
		return nil, err
	}
	addr := s.ClientAddr()
	cc.ConnectTimeout = within
	cc.LookupFunc = func(_ context.Context, host string) ([]string, error) { return []string{host}, nil }
	cc.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return p.Dial(ctx, addr, within)
	}
	return cc, nil
}

// query runs fn on a fresh connection from the harness to server s as pgAdmin,
// everything bounded by within (a paused server accepts the connection but never
// answers).
func (p *Postgres) query(ctx context.Context, s *Server, within time.Duration, fn func(context.Context, *pgx.Conn) error) error {
	return p.queryAs(ctx, s, pgAdmin, within, fn)
}

// queryAs is query as role.
func (p *Postgres) queryAs(ctx context.Context, s *Server, role pgRole, within time.Duration, fn func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cc, err := p.connConfig(s, role, within)
	if err != nil {
		return err
	}
	c, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return fn(ctx, c)
}

// queryRow runs one query on server s (bounded by opTimeout) and scans its row.
func (p *Postgres) queryRow(ctx context.Context, s *Server, sql string, args []any, dest ...any) error {
	return p.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, sql, args...).Scan(dest...)
	})
}

// Version is what the first server that answers says it runs (SHOW server_version,
// e.g. "15.18 (Debian 15.18-0+deb12u1)"), "" when none answers.
func (p *Postgres) Version(ctx context.Context) string {
	for _, s := range p.Servers {
		var v string
		if err := p.queryRow(ctx, s, "SHOW server_version", nil, &v); err == nil {
			return v
		}
	}
	return ""
}

// Leader is the primary: the server last promoted if it answers and is out of
// recovery, else the lowest-numbered server that answers out of recovery (after a
// promotion beside a live old primary both are; the promoted one leads).
func (p *Postgres) Leader(ctx context.Context) (int, bool) {
	for _, s := range p.leaderOrder() {
		var rec bool
		if err := p.queryRow(ctx, s, "SELECT pg_is_in_recovery()", nil, &rec); err == nil && !rec {
			return s.ID, true
		}
	}
	return 0, false
}

// ServerOf is the server a client is connected to, from pg_stat_activity: the one
// with a client backend whose pid is session (the worker reports its backend's pid,
// pg_backend_pid(), as its session: "0x<hex>", SessionName; a decimal pid is read
// too), else the first with a client connected from addr.
func (p *Postgres) ServerOf(ctx context.Context, addr netip.Addr, session string) (int, bool) {
	return p.serverOf(p.allConns(ctx, p.backends), addr, session, false)
}

// backends reads server s's client backends that have a TCP client, by pid.
func (p *Postgres) backends(ctx context.Context, s *Server) ([]dbConn, error) {
	var out []dbConn
	err := p.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT pid, host(client_addr) FROM pg_stat_activity
			WHERE backend_type = 'client backend' AND client_addr IS NOT NULL AND pid <> pg_backend_pid()`)
		if err != nil {
			return err
		}
		var pid int
		var host string
		_, err = pgx.ForEachRow(rows, []any{&pid, &host}, func() error {
			if a, err := netip.ParseAddr(host); err == nil {
				out = append(out, dbConn{id: uint64(pid), addr: a.Unmap()})
			}
			return nil
		})
		return err
	})
	return out, err
}

// Promote promotes server id (a standby) to a primary, pg_promote(), waiting up to
// 30 s for it to leave recovery. From then on Leader prefers it.
func (p *Postgres) Promote(ctx context.Context, id int) error {
	s, err := p.server(id)
	if err != nil {
		return err
	}
	var ok bool
	err = p.query(ctx, s, 35*time.Second, func(ctx context.Context, c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT pg_promote(true, 30)").Scan(&ok)
	})
	switch {
	case err != nil:
		return fmt.Errorf("postgres: promote server %d: %w", id, err)
	case !ok:
		return fmt.Errorf("postgres: promote server %d: still in recovery after 30 s", id)
	}
	p.mu.Lock()
	p.promoted = id
	p.mu.Unlock()
	return nil
}

// Terminate ends the backend with process id pid (pg_terminate_backend, waiting up
// to a second for it to exit) on whichever server runs it, and returns that
// server's id: the server-side kill of a session. The backend's client sees its
// connection closed (FATAL 57P01).
func (p *Postgres) Terminate(ctx context.Context, pid int) (int, error) {
	var errs []string
	for _, s := range p.Servers {
		var ok bool
		err := p.queryRow(ctx, s, "SELECT pg_terminate_backend($1, 1000)", []any{pid}, &ok)
		switch {
		case err != nil:
			errs = append(errs, fmt.Sprintf("server %d: %v", s.ID, err))
		case ok:
			return s.ID, nil
		}
	}
	if len(errs) > 0 {
		return 0, fmt.Errorf("postgres: terminate backend %d: no server ended it (%s)", pid, strings.Join(errs, "; "))
	}
	return 0, fmt.Errorf("postgres: terminate backend %d: no server has it", pid)
}

// removeLeftSegment removes the System V shared memory segment a killed postmaster
// left behind (named on postmaster.pid's seventh line: key and id), when nothing is
// attached to it any more. A postmaster that shut down removed both.
func removeLeftSegment(data string) error {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 7 {
		return nil
	}
	f := strings.Fields(lines[6])
	if len(f) != 2 {
		return nil
	}
	key, err1 := strconv.ParseInt(f[0], 10, 64)
	id, err2 := strconv.Atoi(f[1])
	var ds unix.SysvShmDesc
	if err1 != nil || err2 != nil || id < 0 {
		return nil
	}
	if _, err := unix.SysvShmCtl(id, unix.IPC_STAT, &ds); err != nil || int64(ds.Perm.Key) != key || ds.Nattch != 0 {
		return nil
	}
	_, err = unix.SysvShmCtl(id, unix.IPC_RMID, nil)
	return err
}

// WaitServing waits until every server serves: it answers, and the standby (until it
// is promoted) is in recovery and streaming from the primary. A server that exited,
// or the timeout, is an error naming each server that does not serve, why, and the
// tail of its log.
func (p *Postgres) WaitServing(ctx context.Context, timeout time.Duration) error {
	return p.waitServers(ctx, timeout, p.Servers...)
}

// waitServers is WaitServing for some of the servers.
func (p *Postgres) waitServers(ctx context.Context, timeout time.Duration, servers ...*Server) error {
	return p.dbServers.waitServers(ctx, timeout, p.serving, servers...)
}

// serving is nil when server s answers and, as an unpromoted standby of the tool's,
// streams.
func (p *Postgres) serving(ctx context.Context, s *Server) error {
	p.mu.Lock()
	primary := p.primary
	standby := s.ID != primary && p.promoted != s.ID && p.existing == nil
	p.mu.Unlock()
	var rec bool
	var status string
	err := p.queryRow(ctx, s, "SELECT pg_is_in_recovery(), coalesce((SELECT status FROM pg_stat_wal_receiver), '')", nil, &rec, &status)
	switch {
	case err != nil:
		return err
	case standby && (!rec || status != "streaming"):
		return fmt.Errorf("standby of %s: in recovery %v, WAL receiver %q", lockservice.ServerAddr(primary), rec, status)
	}
	return nil
}
