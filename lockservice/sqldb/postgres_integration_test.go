package sqldb

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
)

// The database tests start real servers: run them under
// flock /tmp/zlc-ensemble.lock go test -run 'Postgres|MariaDB|Databases' ./lockservice

// requireFiles skips t (fails it under ZLC_REQUIRE_INTEGRATION) when a file is missing.
func requireFiles(t *testing.T, what string, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			msg := fmt.Sprintf("integration test needs %s (%s missing; make setup installs it)", what, p)
			if testenv.Strict() {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// dbTestDir is a fresh directory that the postgres user can enter (t.TempDir's
// directories are 0700).
func dbTestDir(t *testing.T) string { return lockservicetest.OpenDir(t) }

// dbNet is a fresh run network for a database test, destroyed at the test's end,
// which then checks that no namespace, no server process and no server directory
// under dir is left.
func dbNet(t *testing.T, dir string) *netns.Network {
	t.Helper()
	t.Cleanup(func() { checkNoDatabaseLeft(t, dir) }) // after the network's own
	net, _ := lockservicetest.Net(t)
	return net
}

// checkNoDatabaseLeft fails t if a database server runs from, or a server directory
// is in, dir.
func checkNoDatabaseLeft(t *testing.T, dir string) {
	t.Helper()
	if pids := databasesUnder(dir); len(pids) > 0 {
		t.Errorf("database server processes left behind: %v", pids)
	}
	for _, pat := range []string{pgDirPrefix + "*", mariadbDirPrefix + "*"} {
		if m, _ := filepath.Glob(filepath.Join(dir, pat)); len(m) > 0 {
			t.Errorf("server directories left behind: %v", m)
		}
	}
}

// databasesUnder lists the postgres and mariadbd processes whose working directory
// is under dir.
func databasesUnder(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !isDBServer(pid) {
			continue
		}
		if cwd, _ := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); strings.HasPrefix(cwd, dir) {
			out = append(out, pid)
		}
	}
	return out
}

func requirePostgres(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2)
	requireFiles(t, "Debian's postgresql-15", "/usr/lib/postgresql/15/bin/initdb", "/usr/lib/postgresql/15/bin/postgres")
}

// pgClient connects to addr (host:port) from namespace host as the lock's user, as
// a worker would.
func pgClient(t *testing.T, host netns.Host, addr string) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&connect_timeout=5", DatabaseUser, addr, DatabaseName))
	if err != nil {
		t.Fatal(err)
	}
	cc.DialFunc = func(ctx context.Context, _, a string) (net.Conn, error) { return host.Dial(ctx, a, 5*time.Second) }
	c, err := pgx.ConnectConfig(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func TestPostgresPrimaryAndStandby(t *testing.T) {
	requirePostgres(t)
	dir := dbTestDir(t)
	net := dbNet(t, dir)
	ctx := context.Background()
	start := time.Now()
	p, err := StartPostgres(ctx, net, PostgresConfig{Standby: true, Dir: dir})
	if p != nil {
		defer p.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres primary and standby serving after %s (%v): %s (version %s)", time.Since(start), p.phases, p.Connect(), p.Version(ctx))
	if v := p.Version(ctx); !strings.HasPrefix(v, "15.") {
		t.Errorf("Version = %q", v)
	}
	if id, ok := p.Leader(ctx); !ok || id != 1 {
		t.Errorf("Leader = %d, %v; want 1", id, ok)
	}
	if want := "postgres://zlc@10.77.1.1:5432,10.77.1.2:5432/zlc?sslmode=disable"; p.Connect() != want {
		t.Errorf("Connect = %q, want %q", p.Connect(), want)
	}
	w, err := net.AddHost(ctx, "w1", lockservicetest.WorkerAddr)
	if err != nil {
		t.Fatal(err)
	}
	checkPgReplicates(t, p, w)
	checkPgServerOfAndTerminate(t, p, w)
	checkPgPromote(t, p)
	checkPgPause(t, p)
	closing := time.Now()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("closed in %s", time.Since(closing))
	checkNoDatabaseLeft(t, dir)
	if _, err := os.Stat(dbRecord(p.Servers[0].ns)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record file left: %v", err)
	}
}

// checkPgReplicates writes a row on the primary as the lock's user and waits for it
// on the standby.
func checkPgReplicates(t *testing.T, p *Postgres, w netns.Host) {
	t.Helper()
	ctx := context.Background()
	c := pgClient(t, w, p.Servers[0].ClientAddr())
	if _, err := c.Exec(ctx, "CREATE TABLE zlc_test (name text PRIMARY KEY, owner text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "INSERT INTO zlc_test VALUES ('lock', 'w1')"); err != nil {
		t.Fatal(err)
	}
	sc := pgClient(t, w, p.Servers[1].ClientAddr())
	var owner string
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err = sc.QueryRow(ctx, "SELECT owner FROM zlc_test WHERE name = 'lock'").Scan(&owner); err == nil {
			break
		}
	}
	if owner != "w1" {
		t.Fatalf("the standby never showed the primary's row: %q, %v", owner, err)
	}
}

// checkPgServerOfAndTerminate finds a worker's session on the standby by its backend
// pid and by its address, then terminates it and sees the client's connection die.
func checkPgServerOfAndTerminate(t *testing.T, p *Postgres, w netns.Host) {
	t.Helper()
	ctx := context.Background()
	c := pgClient(t, w, p.Servers[1].ClientAddr())
	var pid int
	if err := c.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if id, ok := p.ServerOf(ctx, lockservicetest.WorkerAddr, strconv.Itoa(pid)); !ok || id != 2 {
		t.Errorf("ServerOf(session %d) = %d, %v; want 2", pid, id, ok)
	}
	if id, ok := p.ServerOf(ctx, lockservice.ServerAddr(200), ""); ok {
		t.Errorf("ServerOf(an address with no client) = %d", id)
	}
	id, err := p.Terminate(ctx, pid)
	if err != nil || id != 2 {
		t.Fatalf("Terminate(%d) = %d, %v; want server 2", pid, id, err)
	}
	if err := c.Ping(ctx); err == nil {
		t.Error("the terminated session still answers")
	} else {
		t.Logf("the terminated session's client sees: %v", err)
	}
	if _, err := p.Terminate(ctx, pid); err == nil {
		t.Error("terminating a gone backend succeeded")
	}
}

// checkPgPromote promotes the standby: it leaves recovery, takes writes and leads.
func checkPgPromote(t *testing.T, p *Postgres) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	if err := p.Promote(ctx, 2); err != nil {
		t.Fatal(err)
	}
	t.Logf("standby promoted in %s", time.Since(start))
	var rec bool
	if err := p.queryRow(ctx, p.Servers[1], "SELECT pg_is_in_recovery()", nil, &rec); err != nil || rec {
		t.Errorf("promoted server in recovery %v, %v", rec, err)
	}
	if id, ok := p.Leader(ctx); !ok || id != 2 {
		t.Errorf("Leader after promotion = %d, %v; want 2", id, ok)
	}
	if err := p.WaitServing(ctx, 5*time.Second); err != nil {
		t.Error(err)
	}
	if err := p.Promote(ctx, 3); err == nil {
		t.Error("promoting a server that does not exist succeeded")
	}
}

// TestPostgresBadConfig: a Dir the postgres user cannot enter, and one that cannot
// be made, are clear errors before anything is made; a port taken in a server's
// namespace is a clear error naming the log's line, and Close leaves nothing.
func TestPostgresBadConfig(t *testing.T) {
	requirePostgres(t)
	testenv.RequireIntegration(t, testenv.Python3) // the listener that takes the port
	ctx := context.Background()
	closed := t.TempDir() // 0700, root's
	if _, err := StartPostgres(ctx, nil, PostgresConfig{Dir: filepath.Join(closed, "servers")}); err == nil ||
		!strings.Contains(err.Error(), "user postgres cannot enter") {
		t.Errorf("a directory postgres cannot enter: %v", err)
	}
	file := filepath.Join(closed, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := StartPostgres(ctx, nil, PostgresConfig{Dir: filepath.Join(file, "servers")}); err == nil ||
		!strings.Contains(err.Error(), "make the servers' directory") {
		t.Errorf("a directory that cannot be made: %v", err)
	}
	if _, err := StartPostgres(ctx, nil, PostgresConfig{Dir: closed, BinDir: "/nonexistent"}); err == nil ||
		!strings.Contains(err.Error(), "install Debian's postgresql") {
		t.Errorf("no binaries: %v", err)
	}
	dir := dbTestDir(t)
	net := dbNet(t, dir)
	start := time.Now()
	p, err := StartPostgres(ctx, net, PostgresConfig{Dir: dir})
	if p != nil {
		defer p.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("postgres primary alone serving after %s (%v)", time.Since(start), p.phases)
	s := p.Servers[0]
	if err := s.Host.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	takePort(t, s.host.NS().Command, s.Host.Addr().String(), 5432)
	if err := s.Host.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err = p.WaitServing(ctx, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "server 1 exited") || !strings.Contains(err.Error(), "could not bind") {
		t.Errorf("a port in use: %v", err)
	} else {
		t.Logf("a port in use: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Error(err)
	}
	checkNoDatabaseLeft(t, dir)
}

// TestCleanupFindsLeftDatabases: a server whose namespace was deleted while it ran
// (Close never called) is found, killed and its directory removed; a live run's
// server is left alone.
func TestCleanupFindsLeftDatabases(t *testing.T) {
	requirePostgres(t)
	ctx := context.Background()
	dir := dbTestDir(t)
	net := dbNet(t, dir)
	svc, err := lockservice.Start(ctx, net, lockservice.Config{Kind: kind.Postgres, Dir: dir}, "")
	if svc != nil {
		defer svc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	p := svc.(*Postgres)
	if left, err := FindLeftDatabases(); err != nil || containsDir(left, p.Servers[0].Dir) {
		t.Fatalf("a live run's server is listed: %+v, %v", left, err)
	}
	s := p.Servers[0]
	pid := s.Host.Pid()
	if out, err := exec.Command("ip", "netns", "del", s.ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	left, err := CleanupDatabases()
	if err != nil {
		t.Fatal(err)
	}
	if !containsDir(left, s.Dir) {
		t.Fatalf("CleanupDatabases = %+v; want %s (pid %d)", left, s.Dir, pid)
	}
	t.Logf("cleaned up: %+v", left)
	if lockservice.Running(pid) {
		t.Errorf("the postmaster %d still runs", pid)
	}
	checkNoDatabaseLeft(t, dir)
	if _, err := os.Stat(dbRecord(s.ns)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("record file left: %v", err)
	}
}

func containsDir(left []LeftDatabase, dir string) bool {
	for _, l := range left {
		if l.Dir == dir {
			return true
		}
	}
	return false
}

// checkPgPause pauses server 2: every process in its namespace (the postmaster and
// its backends, each its own process group) stops. It stays paused for Close.
func checkPgPause(t *testing.T, p *Postgres) {
	t.Helper()
	s := p.Servers[1]
	if err := s.Host.Signal(context.Background(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	pids := netns.Pids(s.ns)
	if len(pids) < 3 {
		t.Fatalf("server 2 has %d processes: %v", len(pids), pids)
	}
	for _, pid := range pids {
		var state byte
		for deadline := time.Now().Add(time.Second); state != 'T' && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
				state = stat[i+2]
			}
		}
		if state != 'T' {
			t.Errorf("process %d of the paused server is in state %q", pid, state)
		}
	}
	if _, ok := p.Leader(context.Background()); !ok {
		t.Error("no leader while the promoted standby is paused (the old primary still leads)")
	}
}
