package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// MariaDB is a running set of independent MariaDB servers (usually one), each in its
// own namespace of the run's network (server N at ServerAddr(N), port 3306), made
// fresh for the run by mariadb-install-db.
type MariaDB struct {
	dbServers
	cfg MariaDBConfig
	// existing is set for an existing MariaDB (ConnectMariaDB): its DSNs.
	existing *mariadbExisting
	mu       sync.Mutex
	database string // an existing MariaDB's run's database (PrepareRoot), "" for none
}

var _ lockservice.Service = (*MariaDB)(nil)

// StartMariaDB makes and starts cfg.Nodes servers and waits until every one serves
// (with the lock's database and user made). On error the MariaDB returned, if not
// nil, holds what was started so far: Close it.
func StartMariaDB(ctx context.Context, net *netns.Network, cfg MariaDBConfig) (*MariaDB, error) {
	cfg.defaults()
	if err := checkMariaDB(&cfg); err != nil {
		return nil, err
	}
	m := &MariaDB{dbServers: newDBServers(net, mariadbLayout, cfg.KeepAlive), cfg: cfg}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	for id := 1; id <= cfg.Nodes; id++ {
		if err := timed(&m.phases, fmt.Sprintf("server %d made", id), func() error { return m.addServer(ctx, id) }); err != nil {
			return m, err
		}
	}
	for _, s := range m.Servers {
		if err := s.host.Start(ctx); err != nil {
			return m, m.errorf(s, err)
		}
	}
	return m, timed(&m.phases, "started and serving", func() error { return m.WaitServing(ctx, cfg.StartTimeout) })
}

// checkMariaDB checks what StartMariaDB needs before it makes anything, and puts
// the programs' full paths in cfg.
func checkMariaDB(cfg *MariaDBConfig) error {
	switch {
	case cfg.Dir == "":
		return errors.New("mariadb: no directory for the servers' files")
	case cfg.Nodes < 1 || cfg.Nodes > 9:
		return fmt.Errorf("nodes: want 1 to 9 MariaDB servers, got %d", cfg.Nodes)
	}
	for _, b := range []*string{&cfg.Binary, &cfg.InstallDB} {
		p, err := exec.LookPath(*b)
		if err != nil {
			return fmt.Errorf("mariadb: %v: install Debian's mariadb-server (make setup)", err)
		}
		*b = p
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("mariadb: make the servers' directory: %w", err)
	}
	return nil
}

// addServer makes server id (dbServers.addServer), its configuration, init-file and
// data directory.
func (m *MariaDB) addServer(ctx context.Context, id int) error {
	s, err := m.dbServers.addServer(ctx, m.cfg.Dir, id, func(s *Server) []string {
		return []string{m.cfg.Binary, "--defaults-file=" + s.Conf}
	})
	if err != nil {
		return err
	}
	f := mariadbFiles{Conf: s.Conf, Init: filepath.Join(s.Dir, "init.sql"), Log: s.Log, Pid: filepath.Join(s.Dir, "mariadb.pid"), Data: s.Data}
	if err := os.WriteFile(f.Conf, mariadbConf(id, m.cfg.Nodes, lockservice.ServerAddr(id), f, m.cfg.KeepAlive), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(f.Init, mariadbInit(m.Net.CIDR(), m.Net.HubAddr()), 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, m.cfg.InstallDB, "--defaults-file="+f.Conf,
		"--auth-root-authentication-method=normal", "--skip-test-db")
	cmd.Dir = s.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return m.errorf(s, installError(err, out, f.Log))
	}
	return nil
}

// installError is a failed mariadb-install-db's error: what its output and the
// server's log (where the bootstrap writes its own errors) say went wrong.
func installError(err error, out []byte, log string) error {
	why := errorLines(string(out), 8)
	if data, rerr := os.ReadFile(log); rerr == nil {
		if inLog := errorLines(string(data), 4); strings.Contains(strings.ToLower(inLog), "error") {
			why = inLog + " (" + log + ")"
		}
	}
	return fmt.Errorf("mariadb-install-db: %w: %s", err, why)
}

// errorLines is what a program's output says went wrong: its lines that name an
// error, the last n of them, or its last n lines when none does (mariadb-install-db
// ends with eight lines of links after its error).
func errorLines(text string, n int) string {
	var errs []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(strings.ToLower(l), "error") {
			errs = append(errs, strings.TrimSpace(l))
		}
	}
	if len(errs) == 0 {
		return lastLines(text, n)
	}
	return lastLines(strings.Join(errs, "\n"), n)
}

// lastLines is the last n lines of text.
func lastLines(text string, n int) string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Connect is the workers' connection string: one go-sql-driver/mysql DSN a server,
// comma-separated, server 1 first, as user DatabaseUser (no password) on database
// DatabaseName: zlc@tcp(10.77.1.1:3306)/zlc,zlc@tcp(10.77.1.2:3306)/zlc.
func (m *MariaDB) Connect() string {
	if m.existing != nil {
		return m.existing.workers(m.Servers, m.runDatabase())
	}
	dsns := lockservice.ClientAddrs(m.Servers)
	for i, a := range dsns {
		dsns[i] = fmt.Sprintf("%s@tcp(%s)/%s", DatabaseUser, a, DatabaseName)
	}
	return strings.Join(dsns, ",")
}

// Leader is server 1 when it is the only one; independent servers have none.
func (m *MariaDB) Leader(context.Context) (int, bool) {
	if len(m.Servers) == 1 {
		return 1, true
	}
	return 0, false
}

// query runs fn on a fresh connection from the harness to server s as its
// administrator (on an existing MariaDB: as the --connect DSN's user), everything
// bounded by within.
func (m *MariaDB) query(ctx context.Context, s *Server, within time.Duration, fn func(context.Context, *sql.Conn) error) error {
	cfg := mysql.NewConfig()
	cfg.User = "root"
	if m.existing != nil {
		cfg = m.existing.config(s.ID-1, "")
	}
	cfg.Net, cfg.Addr = "tcp", s.ClientAddr()
	cfg.DialFunc = func(ctx context.Context, _, addr string) (net.Conn, error) { return m.Dial(ctx, addr, within) }
	return mariadbAdmin(ctx, cfg, within, fn)
}

// mariadbAdmin runs fn on a fresh connection cfg says how to open (its dial nil:
// the host's own network), everything bounded by within.
func mariadbAdmin(ctx context.Context, cfg *mysql.Config, within time.Duration, fn func(context.Context, *sql.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	cfg.Timeout, cfg.ReadTimeout, cfg.WriteTimeout = within, within, within
	cfg.Logger = &mysql.NopLogger{} // a failed poll is the caller's to report
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// Version is what the first server that answers says it runs (SELECT VERSION(),
// e.g. "10.11.19-MariaDB-0+deb12u1"), "" when none answers.
func (m *MariaDB) Version(ctx context.Context) string {
	for _, s := range m.Servers {
		var v string
		err := m.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error {
			return c.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v)
		})
		if err == nil {
			return v
		}
	}
	return ""
}

// ServerOf is the server a client is connected to, from information_schema's
// processlist: the first with a connection whose id is session (the worker reports
// CONNECTION_ID() as its session, "0x<hex>"; a decimal id is read too) from addr
// (ids repeat across independent servers; any address if addr is invalid), else
// the first with a connection from addr. On SSH nodes and an existing MariaDB every
// worker comes masqueraded from one address: the id alone, and only when exactly
// one server has it.
func (m *MariaDB) ServerOf(ctx context.Context, addr netip.Addr, session string) (int, bool) {
	if m.remote != nil || m.existing != nil {
		addr = netip.Addr{}
	}
	return m.serverOf(m.allConns(ctx, m.connections), addr, session, true)
}

// connections reads server s's client connections but the harness's own.
func (m *MariaDB) connections(ctx context.Context, s *Server) ([]dbConn, error) {
	var out []dbConn
	err := m.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error {
		rows, err := c.QueryContext(ctx, "SELECT ID, HOST FROM information_schema.PROCESSLIST WHERE ID <> CONNECTION_ID()")
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id uint64
			var host string
			if err := rows.Scan(&id, &host); err != nil {
				return err
			}
			if ap, err := netip.ParseAddrPort(host); err == nil {
				out = append(out, dbConn{id: id, addr: ap.Addr().Unmap()})
			}
		}
		return rows.Err()
	})
	return out, err
}

// WaitServing waits until every server answers its administrator (the init-file
// has run by then). A server that exited, or the timeout, is an error naming each
// server that does not serve, why, and the tail of its log.
func (m *MariaDB) WaitServing(ctx context.Context, timeout time.Duration) error {
	return m.waitServers(ctx, timeout, func(ctx context.Context, s *Server) error {
		return m.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error { return c.PingContext(ctx) })
	}, m.Servers...)
}
