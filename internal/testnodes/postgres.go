package testnodes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresPort is the test PostgreSQL's port: not 5432, so that a --connect run
// must take the port from its URL.
const postgresPort = 5440

// pgBin is Debian's PostgreSQL 15.
const pgBin = "/usr/lib/postgresql/15/bin"

// TestPostgres is a PostgreSQL the test started outside any tool's management.
type TestPostgres struct {
	// URL is how a client reaches it from the nodes' network: the role and its
	// database, no password (postgres://ROLE@ADDR:5440/DB?sslmode=disable).
	URL string
	// socket is the directory of its Unix socket, where the superuser logs in
	// without a password (Admin).
	socket string
	dir    string
	cmd    *exec.Cmd
}

// StartPostgres starts a PostgreSQL (Debian's, as its postgres account) on node 1's
// address, in its namespace, with a role that logs in from the network by password
// (scram-sha-256) and owns a database of the same name. The password goes into the
// server's catalogue only (this is a test's server), never into a file.
func (n *Nodes) StartPostgres(ctx context.Context, role, password string) (_ *TestPostgres, err error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("testnodes: the postgres account: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "zlc-testpg-")
	if err != nil {
		return nil, err
	}
	pg := &TestPostgres{socket: dir, dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, pg.Stop())
		}
	}()
	if err := errors.Join(os.Chmod(dir, 0o755), os.Chown(dir, uid, gid)); err != nil {
		return pg, err
	}
	asPostgres := func(argv ...string) []string {
		return append([]string{"setpriv", "--pdeathsig=KILL", "--reuid=postgres", "--regid=" + u.Gid, "--init-groups", "--"}, argv...)
	}
	data := filepath.Join(dir, "data")
	initdb := asPostgres(filepath.Join(pgBin, "initdb"), "-D", data, "-U", "postgres", "--auth-local=trust",
		"--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	c := exec.CommandContext(ctx, initdb[0], initdb[1:]...)
	c.Dir, c.Env = dir, append(os.Environ(), "HOME="+dir)
	if out, err := c.CombinedOutput(); err != nil {
		return pg, fmt.Errorf("testnodes: initdb: %w: %s", err, out)
	}
	hba, err := os.OpenFile(filepath.Join(data, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = hba.WriteString("host all all 0.0.0.0/0 scram-sha-256\n")
		err = errors.Join(err, hba.Close())
	}
	if err != nil {
		return pg, err
	}
	addr := n.Addrs[0].String()
	argv := append([]string{"ip", "netns", "exec", n.nets[0]}, asPostgres(filepath.Join(pgBin, "postgres"), "-D", data,
		"-c", "listen_addresses="+addr, "-p", strconv.Itoa(postgresPort), "-c", "unix_socket_directories="+dir, "-c", "fsync=off")...)
	logf, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		return pg, err
	}
	defer logf.Close()
	pg.cmd = exec.Command(argv[0], argv[1:]...)
	pg.cmd.Dir, pg.cmd.Stdout, pg.cmd.Stderr = dir, logf, logf
	pg.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := pg.cmd.Start(); err != nil {
		return pg, fmt.Errorf("testnodes: start postgres: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		err = pg.Admin(ctx, "postgres", func(ctx context.Context, c *pgx.Conn) error { return nil })
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "server.log"))
			return pg, fmt.Errorf("testnodes: postgres on %s does not answer: %w\n%s", addr, err, log)
		}
	}
	ident := pgx.Identifier{role}.Sanitize()
	err = pg.Admin(ctx, "postgres", func(ctx context.Context, c *pgx.Conn) error {
		for _, q := range []string{"CREATE ROLE " + ident + " LOGIN PASSWORD '" + password + "'", "CREATE DATABASE " + ident + " OWNER " + ident} {
			if _, err := c.Exec(ctx, q); err != nil {
				return fmt.Errorf("testnodes: %w", err)
			}
		}
		return nil
	})
	pg.URL = fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable", role, netip.AddrPortFrom(n.Addrs[0], postgresPort), role)
	return pg, err
}

// Admin runs fn as the superuser on database db, over the server's Unix socket.
func (pg *TestPostgres) Admin(ctx context.Context, db string, fn func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, fmt.Sprintf("host=%s port=%d user=postgres dbname=%s", pg.socket, postgresPort, db))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return fn(ctx, c)
}

// Stop shuts the server down (SIGQUIT, an immediate shutdown that removes its shared
// memory; SIGKILL of its process group after 10 s) and removes its directory.
func (pg *TestPostgres) Stop() error {
	err := stopServer(pg.cmd, syscall.SIGQUIT) // ip netns exec and setpriv exec the postmaster
	pg.cmd = nil
	return errors.Join(err, os.RemoveAll(pg.dir))
}

// stopServer sends cmd's process sig, waits until it exits, and after 10 s kills its
// process group; a nil or unstarted cmd is nothing to stop.
func stopServer(cmd *exec.Cmd, sig syscall.Signal) error {
	if cmd == nil || cmd.Process == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	_ = cmd.Process.Signal(sig)
	select {
	case <-done:
		return nil
	case <-time.After(10 * time.Second):
	}
	err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
