package testnodes

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mariadbPort is the test MariaDB's port: not 3306, so that a --connect run must take
// the port from its DSN.
const mariadbPort = 3316

// TestMariaDB is a MariaDB the test started outside any tool's management.
type TestMariaDB struct {
	// DSN is how a client reaches it from the nodes' network: the user and a
	// database of its own, no password (USER@tcp(ADDR:3316)/USER).
	DSN    string
	socket string
	dir    string
	cmd    *exec.Cmd
}

// StartMariaDB starts a MariaDB (Debian's, as root) on node 1's address, in its
// namespace, with a user that logs in from anywhere by password, owns a database of
// its name, and may make and drop the databases zlc_... (as a team grants a test
// tool). The password goes into the server's catalogue only (this is a test's
// server), never into a file.
func (n *Nodes) StartMariaDB(ctx context.Context, user, password string) (_ *TestMariaDB, err error) {
	dir, err := os.MkdirTemp("", "zlc-testmariadb-")
	if err != nil {
		return nil, err
	}
	db := &TestMariaDB{socket: filepath.Join(dir, "sock"), dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, db.Stop())
		}
	}()
	data := filepath.Join(dir, "data")
	c := exec.CommandContext(ctx, "mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db")
	if out, err := c.CombinedOutput(); err != nil {
		return db, fmt.Errorf("testnodes: mariadb-install-db: %w: %s", err, out)
	}
	addr := n.Addrs[0].String()
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return db, err
	}
	defer logf.Close()
	db.cmd = exec.Command("ip", "netns", "exec", n.nets[0], "mariadbd", "--no-defaults", "--datadir="+data, "--user=root",
		"--bind-address="+addr, "--port="+strconv.Itoa(mariadbPort), "--socket="+db.socket, "--pid-file="+filepath.Join(dir, "pid"),
		"--skip-name-resolve", "--innodb-log-file-size=8M")
	db.cmd.Stdout, db.cmd.Stderr = logf, logf
	db.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := db.cmd.Start(); err != nil {
		return db, fmt.Errorf("testnodes: start mariadbd: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err = db.Admin(ctx, func(ctx context.Context, c *sql.Conn) error { return c.PingContext(ctx) })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return db, fmt.Errorf("testnodes: mariadbd on %s does not answer: %w\n%s", addr, err, log)
		}
	}
	err = db.Admin(ctx, func(ctx context.Context, c *sql.Conn) error {
		for _, q := range []string{
			fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, password),
			fmt.Sprintf("CREATE DATABASE `%s`", user),
			fmt.Sprintf("GRANT ALL ON `%s`.* TO '%s'@'%%'", user, user),
			fmt.Sprintf("GRANT ALL ON `zlc\\_%%`.* TO '%s'@'%%'", user),
		} {
			if _, err := c.ExecContext(ctx, q); err != nil {
				return fmt.Errorf("testnodes: %w", err)
			}
		}
		return nil
	})
	db.DSN = fmt.Sprintf("%s@tcp(%s)/%s", user, netip.AddrPortFrom(n.Addrs[0], mariadbPort), user)
	return db, err
}

// Admin runs fn as root over the server's Unix socket.
func (db *TestMariaDB) Admin(ctx context.Context, fn func(context.Context, *sql.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", db.socket
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	pool := sql.OpenDB(conn)
	defer pool.Close()
	c, err := pool.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return fn(ctx, c)
}

// Stop shuts the server down (SIGTERM; SIGKILL of its process group after 10 s) and
// removes its directory.
func (db *TestMariaDB) Stop() error {
	err := stopServer(db.cmd, syscall.SIGTERM) // ip netns exec execs mariadbd
	db.cmd = nil
	return errors.Join(err, os.RemoveAll(db.dir))
}
