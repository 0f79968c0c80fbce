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
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// The private servers of conformance: one PostgreSQL or MariaDB server on
// 127.0.0.1, with the configuration a run's server 1 gets, bound to loopback on a
// free port (the command line's port wins over the file's) and trusting only
// 127.0.0.1. As root, PostgreSQL runs as its own account, as in a run; otherwise
// both run as the user who runs conformance.

func init() {
	lockservice.RegisterLocal(kind.Postgres, startLocalPostgres)
	lockservice.RegisterLocal(kind.MariaDB, startLocalMariaDB)
}

// loopback is the private servers' address and the only one they trust.
var loopback = netip.MustParseAddr("127.0.0.1")

// localDB is a private server of either database.
type localDB struct {
	title string
	addr  string // 127.0.0.1:port
	dir   string
	proc  *lockservice.LocalProcess
	stop  syscall.Signal
	// connect is init's connect; kill ends a connection by its id; deleteRow
	// deletes the rows of a table in the lock's database whose key (a column of
	// its primary key or of a unique index) is row, and says how many went.
	connect   string
	kill      func(ctx context.Context, id uint64) error
	deleteRow func(ctx context.Context, table, row string) (int64, error)
}

var _ lockservice.Local = (*localDB)(nil)

func (l *localDB) Connect() string { return l.connect }

// End terminates the connection that holds a session lock (an advisory lock, a
// GET_LOCK), as connection-kill does in a run; a lock table's row it deletes, as a
// lease that ran out and was taken over (the holder learns it at its next renewal,
// if it renews: no report is owed). The acquire must have said where the lock
// lives.
func (l *localDB) End(ctx context.Context, h lockservice.Holder) (lockservice.Ending, error) {
	switch {
	case h.Place.Form() == "":
		return lockservice.Ending{}, lockservice.CannotEnd(`the worker's acquire did not say where its lock lives ("lock" on its ok, docs/protocol.md), so it is not known whether ending a connection ends it`)
	case h.Place.Table != "":
		ctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
		defer cancel()
		n, err := l.deleteRow(ctx, h.Place.Table, h.Place.Row)
		switch {
		case err != nil:
			return lockservice.Ending{}, fmt.Errorf("%s: delete row %q of %s: %w", l.title, h.Place.Row, h.Place.Table, err)
		case n == 0:
			return lockservice.Ending{}, fmt.Errorf("%s: table %s has no row whose key is %q (a column of its primary key or a unique index), where the acquire said the lock lives", l.title, h.Place.Table, h.Place.Row)
		}
		return lockservice.Ending{Did: fmt.Sprintf("deleted row %q of %s, as a lease that ran out and was taken over", h.Place.Row, h.Place.Table)}, nil
	}
	session := h.Place.Session
	if session == "" {
		session = h.Session
	}
	id, ok := sessionNumber(session)
	if !ok {
		return lockservice.Ending{}, lockservice.CannotEnd(`the worker named no session that holds its lock ("session" in its acquire's "lock", or a {"event":"session"})`)
	}
	ctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
	defer cancel()
	if err := l.kill(ctx, id); err != nil {
		return lockservice.Ending{}, fmt.Errorf("%s: end connection %s: %w", l.title, session, err)
	}
	return lockservice.Ending{Did: "terminated connection " + session, MustReport: true}, nil
}

func (l *localDB) Close() error {
	l.proc.Stop(l.stop, 10*time.Second)
	return os.RemoveAll(l.dir)
}

// localAccount is the account a private server runs as: the database's own when
// this process is root (PostgreSQL refuses root), else nobody to switch to.
func localAccount(name string) (*osUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := lookupOSUser(name)
	if err != nil {
		return nil, fmt.Errorf("the account to run as: %w (Postgres refuses to run as root)", err)
	}
	return &u, nil
}

// localArgv is argv as u (nil: as this process's user), dying with this process.
func localArgv(u *osUser, dir string, argv ...string) []string {
	if u == nil {
		return argv
	}
	return append([]string{"env", "--chdir=" + dir, "setpriv", "--pdeathsig=KILL", "--reuid=" + u.Name,
		"--regid=" + strconv.Itoa(u.GID), "--init-groups", "--"}, argv...)
}

// startLocalPostgres makes a fresh cluster in cfg.Dir, starts it on a free port and
// makes the lock's role and database.
func startLocalPostgres(ctx context.Context, cfg lockservice.LocalConfig) (lockservice.Local, error) {
	st := lockservice.LocalSettings(kind.Postgres, cfg).(Settings)
	var pc PostgresConfig
	pc.defaults()
	u, err := localAccount(pc.User)
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	port, err := lockservice.FreeLocalPort()
	if err != nil {
		return nil, err
	}
	l := &localDB{title: "PostgreSQL", addr: net.JoinHostPort(loopback.String(), strconv.Itoa(port)), dir: cfg.Dir, stop: syscall.SIGQUIT}
	l.connect = fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", DatabaseUser, l.addr, DatabaseName)
	data := filepath.Join(cfg.Dir, "data")
	if err := preparePostgres(ctx, u, pc.BinDir, cfg.Dir, data, st.KeepAlive); err != nil {
		os.RemoveAll(cfg.Dir)
		return nil, err
	}
	argv := localArgv(u, cfg.Dir, filepath.Join(pc.BinDir, "postgres"), "-D", data, "-p", strconv.Itoa(port))
	if l.proc, err = lockservice.StartLocalProcess("private PostgreSQL on "+l.addr, argv, filepath.Join(cfg.Dir, "server.log")); err != nil {
		os.RemoveAll(cfg.Dir)
		return nil, err
	}
	adminOn := func(ctx context.Context, db string, fn func(*pgx.Conn) error) error {
		ctx, cancel := context.WithTimeout(ctx, lockservice.OpTimeout)
		defer cancel()
		c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", loopback, port, db))
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		return fn(c)
	}
	admin := func(ctx context.Context, fn func(*pgx.Conn) error) error { return adminOn(ctx, "postgres", fn) }
	l.deleteRow = func(ctx context.Context, table, row string) (n int64, err error) {
		err = adminOn(ctx, DatabaseName, func(c *pgx.Conn) error {
			n, err = pgDeleteRow(ctx, c, table, row)
			return err
		})
		return n, err
	}
	l.kill = func(ctx context.Context, pid uint64) error {
		return admin(ctx, func(c *pgx.Conn) error {
			var ended bool
			if err := c.QueryRow(ctx, "SELECT pg_terminate_backend($1, 1000)", int64(pid)).Scan(&ended); err != nil {
				return err
			}
			if !ended {
				return fmt.Errorf("no backend %d", pid)
			}
			return nil
		})
	}
	err = l.proc.WaitServing(ctx, 30*time.Second, func(ctx context.Context) error {
		return admin(ctx, func(*pgx.Conn) error { return nil })
	})
	if err == nil {
		err = admin(ctx, func(c *pgx.Conn) error {
			for _, q := range []string{"CREATE ROLE " + DatabaseUser + " LOGIN", "CREATE DATABASE " + DatabaseName + " OWNER " + DatabaseUser} {
				if _, err := c.Exec(ctx, q); err != nil {
					return fmt.Errorf("postgres: %s: %w", q, err)
				}
			}
			return nil
		})
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// preparePostgres runs initdb into data and writes the server's configuration,
// everything owned by u when set.
func preparePostgres(ctx context.Context, u *osUser, binDir, dir, data string, keepAlive time.Duration) error {
	if u != nil {
		if err := os.Chmod(dir, 0o755); err != nil {
			return err
		}
		if err := checkReachable(dir, *u); err != nil {
			return fmt.Errorf("postgres: %w", err)
		}
		if err := os.Chown(dir, u.UID, u.GID); err != nil {
			return err
		}
	}
	argv := localArgv(u, dir, filepath.Join(binDir, "initdb"), "-D", data, "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "HOME="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("postgres: initdb: %w: %s (install Debian's postgresql: make setup)", err, lastLines(string(out), 8))
	}
	files := map[string][]byte{
		"postgresql.conf": postgresConf(1, loopback, netip.Addr{}, keepAlive),
		"pg_hba.conf":     pgHBA(netip.PrefixFrom(loopback, 32), loopback),
	}
	for name, body := range files {
		path := filepath.Join(data, name)
		if err := os.WriteFile(path, body, 0o600); err != nil {
			return err
		}
		if u != nil {
			if err := os.Lchown(path, u.UID, u.GID); err != nil {
				return err
			}
		}
	}
	return nil
}

// startLocalMariaDB makes a data directory in cfg.Dir and starts the server on a
// free port; its init-file makes the lock's database and user.
func startLocalMariaDB(ctx context.Context, cfg lockservice.LocalConfig) (lockservice.Local, error) {
	st := lockservice.LocalSettings(kind.MariaDB, cfg).(Settings)
	mc := MariaDBConfig{Dir: cfg.Dir}
	mc.defaults()
	if err := checkMariaDB(&mc); err != nil {
		return nil, err
	}
	port, err := lockservice.FreeLocalPort()
	if err != nil {
		return nil, err
	}
	l := &localDB{title: "MariaDB", addr: net.JoinHostPort(loopback.String(), strconv.Itoa(port)), dir: cfg.Dir, stop: syscall.SIGTERM}
	l.connect = fmt.Sprintf("%s@tcp(%s)/%s", DatabaseUser, l.addr, DatabaseName)
	f := mariadbFiles{Conf: filepath.Join(cfg.Dir, "my.cnf"), Init: filepath.Join(cfg.Dir, "init.sql"), Log: filepath.Join(cfg.Dir, "server.log"),
		Pid: filepath.Join(cfg.Dir, "mariadb.pid"), Data: filepath.Join(cfg.Dir, "data")}
	if err := prepareMariaDB(ctx, mc, f, st.KeepAlive); err != nil {
		os.RemoveAll(cfg.Dir)
		return nil, err
	}
	argv := []string{mc.Binary, "--defaults-file=" + f.Conf, "--port=" + strconv.Itoa(port)}
	if l.proc, err = lockservice.StartLocalProcess("private MariaDB on "+l.addr, argv, filepath.Join(cfg.Dir, "stdout.log")); err != nil {
		os.RemoveAll(cfg.Dir)
		return nil, err
	}
	admin := func(ctx context.Context, fn func(*sql.Conn) error) error {
		cfg := mysql.NewConfig()
		cfg.User, cfg.Net, cfg.Addr = "root", "tcp", l.addr
		return mariadbAdmin(ctx, cfg, lockservice.OpTimeout, func(_ context.Context, c *sql.Conn) error { return fn(c) })
	}
	l.kill = func(ctx context.Context, id uint64) error {
		return admin(ctx, func(c *sql.Conn) error {
			_, err := c.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
			return err
		})
	}
	l.deleteRow = func(ctx context.Context, table, row string) (n int64, err error) {
		err = admin(ctx, func(c *sql.Conn) error {
			n, err = mariadbDeleteRow(ctx, c, table, row)
			return err
		})
		return n, err
	}
	if err := l.proc.WaitServing(ctx, 60*time.Second, func(ctx context.Context) error {
		return admin(ctx, func(c *sql.Conn) error { return c.PingContext(ctx) })
	}); err != nil {
		l.Close()
		return nil, errors.Join(err, fmt.Errorf("server log %s:\n    %v", f.Log, lockservice.TailLines(f.Log, 8)))
	}
	return l, nil
}

// prepareMariaDB writes the server's my.cnf and init-file and makes its data
// directory.
func prepareMariaDB(ctx context.Context, mc MariaDBConfig, f mariadbFiles, keepAlive time.Duration) error {
	if err := os.WriteFile(f.Conf, mariadbConf(1, 1, loopback, f, keepAlive), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(f.Init, mariadbInit(netip.PrefixFrom(loopback, 32), loopback), 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, mc.InstallDB, "--defaults-file="+f.Conf, "--auth-root-authentication-method=normal", "--skip-test-db")
	cmd.Dir = mc.Dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return installError(err, out, f.Log)
	}
	return nil
}

// pgDeleteRow deletes the rows of table (a name as the worker's SQL would write it,
// resolved by PostgreSQL: regclass) whose key is row, trying each column of its
// primary key and unique indexes in turn until one matches (compared as text).
func pgDeleteRow(ctx context.Context, c *pgx.Conn, table, row string) (int64, error) {
	var name string
	if err := c.QueryRow(ctx, "SELECT $1::regclass::text", table).Scan(&name); err != nil {
		return 0, err
	}
	rows, err := c.Query(ctx, `SELECT DISTINCT a.attname FROM pg_index i
		JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
		WHERE i.indrelid = $1::regclass AND (i.indisprimary OR i.indisunique)`, table)
	if err != nil {
		return 0, err
	}
	cols, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, err
	}
	for _, col := range cols {
		tag, err := c.Exec(ctx, fmt.Sprintf("DELETE FROM %s WHERE %s::text = $1", name, pgx.Identifier{col}.Sanitize()), row)
		if err != nil {
			return 0, err
		}
		if tag.RowsAffected() > 0 {
			return tag.RowsAffected(), nil
		}
	}
	return 0, nil
}

// mariadbDeleteRow is pgDeleteRow on MariaDB: table in the lock's database (or
// "db.table"), its key columns from information_schema.STATISTICS.
func mariadbDeleteRow(ctx context.Context, c *sql.Conn, table, row string) (int64, error) {
	db, name, ok := strings.Cut(table, ".")
	if !ok {
		db, name = DatabaseName, table
	}
	rows, err := c.QueryContext(ctx, `SELECT DISTINCT COLUMN_NAME FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND NON_UNIQUE = 0`, db, name)
	if err != nil {
		return 0, err
	}
	var cols []string
	for rows.Next() {
		var col string
		if err := rows.Scan(&col); err != nil {
			rows.Close()
			return 0, err
		}
		cols = append(cols, col)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, err
	}
	if len(cols) == 0 {
		return 0, fmt.Errorf("no table %s.%s with a primary key or a unique index", db, name)
	}
	quote := func(id string) string { return "`" + strings.ReplaceAll(id, "`", "``") + "`" }
	for _, col := range cols {
		res, err := c.ExecContext(ctx, fmt.Sprintf("DELETE FROM %s.%s WHERE %s = ?", quote(db), quote(name), quote(col)), row)
		if err != nil {
			return 0, err
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return n, nil
		}
	}
	return 0, nil
}
