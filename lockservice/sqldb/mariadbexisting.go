package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
)

// An existing MariaDB (run --service mariadb --connect DSN[,DSN...]) is one the tool
// does not manage: the independent servers the go-sql-driver DSNs name
// (USER@tcp(HOST:PORT)/DATABASE, the form the workers get), reached through the run
// network's uplink. The harness and the workers log in as the DSNs' user; the
// password comes from MariaDBPasswordVar (MYSQL_PWD), never from a DSN, which goes to
// every worker and into the run's records. A run writes only in a database of its own
// on each server (schemaFor its chroot), which must not exist before the run, is the
// workers' database, and is dropped at the run's end; its GET_LOCK names come from
// lock paths under its chroot. The user needs CREATE and DROP on that database (GRANT
// ALL ON `zlc\_%`.* covers every run's) and nothing more: it sees and kills its own
// connections (connection-kill) without PROCESS or SUPER.

// DefaultMariaDBPort is the port of a --connect DSN's address that names none.
const DefaultMariaDBPort = 3306

// MariaDBPasswordVar is the environment variable a MariaDB password is taken from,
// the mysql and mariadb clients' own.
const MariaDBPasswordVar = "MYSQL_PWD"

// mariadbExisting is an existing MariaDB's --connect DSNs, one a server, each with
// no password.
type mariadbExisting struct {
	dsns  []*mysql.Config
	hosts []string // each server's host:port, as written
}

// parseMariaDBConnect reads --connect's DSNs. Its errors never repeat a DSN, which
// may hold a password.
func parseMariaDBConnect(s string) (*mariadbExisting, error) {
	const want = "want USER@tcp(HOST:PORT)/DATABASE, one a server, comma-separated"
	e := &mariadbExisting{}
	for i, part := range strings.Split(s, ",") {
		c, err := mysql.ParseDSN(strings.TrimSpace(part))
		switch {
		case err != nil:
			return nil, fmt.Errorf("connect: DSN %d is not a go-sql-driver DSN: %s", i+1, want)
		case c.Passwd != "":
			return nil, fmt.Errorf("connect: DSN %d holds a password: give it in %s instead; the DSNs go to every worker and into the run's records", i+1, MariaDBPasswordVar)
		case c.User == "":
			return nil, fmt.Errorf("connect: DSN %d names no user: %s", i+1, want)
		case c.Net != "tcp":
			return nil, fmt.Errorf("connect: DSN %d: network %q: %s", i+1, c.Net, want)
		}
		hosts, err := lockservice.ParseHostPorts(c.Addr, DefaultMariaDBPort)
		if err != nil {
			return nil, err
		}
		e.dsns, e.hosts = append(e.dsns, c), append(e.hosts, hosts[0])
	}
	return e, nil
}

// config is how the harness connects to server i (from 0), on database db ("": the
// DSN's), with the password from the environment.
func (e *mariadbExisting) config(i int, db string) *mysql.Config {
	c := e.dsns[i].Clone()
	c.Passwd = os.Getenv(MariaDBPasswordVar)
	if db != "" {
		c.DBName = db
	}
	return c
}

// workers is the workers' connect string: each server's DSN at the address the
// harness resolved, on database db (the run's), with no password.
func (e *mariadbExisting) workers(servers []*Server, db string) string {
	out := make([]string, len(servers))
	for i, s := range servers {
		c := e.dsns[i].Clone()
		c.Addr = s.ClientAddr()
		if db != "" {
			c.DBName = db
		}
		out[i] = c.FormatDSN()
	}
	return strings.Join(out, ",")
}

// ConnectMariaDB reaches the existing MariaDB servers connect's DSNs name and waits
// until each answers.
func ConnectMariaDB(ctx context.Context, net *netns.Network, connect string, timeout time.Duration) (*MariaDB, error) {
	e, err := parseMariaDBConnect(connect)
	if err != nil {
		return nil, err
	}
	members, err := lockservice.ReachExisting(ctx, net, e.hosts)
	if err != nil {
		return nil, err
	}
	m := &MariaDB{dbServers: newDBServers(net, mariadbLayout, 0), existing: e, cfg: MariaDBConfig{Nodes: len(members)}}
	for _, mb := range members {
		m.Servers = append(m.Servers, &Server{Member: mb})
	}
	if err := m.WaitServing(ctx, timeout); err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	return m, nil
}

// Managed is false for an existing MariaDB: the tool starts, stops and signals none
// of its servers.
func (m *MariaDB) Managed() bool { return m.existing == nil }

// Close stops the tool's servers and removes their directories; an existing
// MariaDB's are not the tool's.
func (m *MariaDB) Close() error {
	if m.existing != nil {
		return nil
	}
	return m.dbServers.Close()
}

// VanishedClientKept says what bounds how long a server keeps the session of a
// client that vanished, and its locks (nemesis.SessionKeeper).
func (m *MariaDB) VanishedClientKept() string {
	if m.existing != nil {
		return "the existing MariaDB's own TCP keepalive (not zlockcheck's to set): its hosts' net.ipv4.tcp_keepalive_time, tcp_keepalive_intvl, tcp_keepalive_probes and tcp_retries2"
	}
	return m.dbServers.VanishedClientKept()
}

// runDatabase is the database of the run in progress on an existing MariaDB ("":
// none, or the tool's own servers).
func (m *MariaDB) runDatabase() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.database
}

// PrepareRoot makes the run's database (schemaFor(root)) on every server, refusing
// one that exists (the run must own everything it will drop), and returns how to
// drop it on every server at the run's end, retried within `within`.
func (m *MariaDB) PrepareRoot(ctx context.Context, _ time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error) {
	db := schemaFor(root)
	ident := "`" + db + "`" // schemaFor's names are letters, digits and _
	made := 0
	undo = func(ctx context.Context, within time.Duration) error {
		deadline := time.Now().Add(within)
		for _, s := range m.Servers[:made] {
			for {
				err := m.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error {
					_, err := c.ExecContext(ctx, "DROP DATABASE IF EXISTS "+ident)
					return err
				})
				if err == nil {
					break
				}
				if time.Now().After(deadline) || ctx.Err() != nil {
					return fmt.Errorf("mariadb server %d: drop the run's database %s: %w", s.ID, db, err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		m.mu.Lock()
		m.database = ""
		m.mu.Unlock()
		return nil
	}
	for _, s := range m.Servers {
		err := m.query(ctx, s, lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error {
			var n int
			if err := c.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", db).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return fmt.Errorf("chroot %s: database %s already exists: give a fresh chroot (--chroot); the run drops its database at its end", root, db)
			}
			if _, err := c.ExecContext(ctx, "CREATE DATABASE "+ident); err != nil {
				return fmt.Errorf("CREATE DATABASE %s (the user needs CREATE and DROP on it: GRANT ALL ON `zlc\\_%%`.*): %w", db, err)
			}
			return nil
		})
		if err != nil {
			return undo, fmt.Errorf("mariadb server %d: %w", s.ID, err)
		}
		made++
	}
	m.mu.Lock()
	m.database = db
	m.mu.Unlock()
	return undo, nil
}
