package sqldb

import (
	"context"
	"database/sql"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
)

func requireMariaDB(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2)
	requireFiles(t, "Debian's mariadb-server", "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db")
}

// mariadbClient opens one connection to dsn (one of Connect's) from namespace host,
// as a worker would.
func mariadbClient(t *testing.T, host netns.Host, dsn string) *sql.Conn {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Timeout, cfg.ReadTimeout = 5*time.Second, 5*time.Second
	cfg.DialFunc = func(ctx context.Context, _, addr string) (net.Conn, error) {
		return host.Dial(ctx, addr, 5*time.Second)
	}
	cfg.Logger = &mysql.NopLogger{}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	t.Cleanup(func() { db.Close() })
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestMariaDBServers(t *testing.T) {
	requireMariaDB(t)
	for _, nodes := range []int{1, 2} {
		t.Run(strconv.Itoa(nodes), func(t *testing.T) {
			dir := t.TempDir()
			net := dbNet(t, dir)
			ctx := context.Background()
			start := time.Now()
			m, err := StartMariaDB(ctx, net, MariaDBConfig{Nodes: nodes, Dir: dir})
			if m != nil {
				defer m.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d mariadb serving after %s (%v): %s (version %s)", nodes, time.Since(start), m.phases, m.Connect(), m.Version(ctx))
			checkMariaDBServes(t, m, nodes)
			checkMariaDBKill(t, m, net)
			closing := time.Now()
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			t.Logf("closed in %s", time.Since(closing))
			checkNoDatabaseLeft(t, dir)
		})
	}
}

// checkMariaDBServes checks Version, Leader and Connect.
func checkMariaDBServes(t *testing.T, m *MariaDB, nodes int) {
	t.Helper()
	ctx := context.Background()
	if v := m.Version(ctx); !strings.HasPrefix(v, "10.11.") || !strings.Contains(v, "MariaDB") {
		t.Errorf("Version = %q", v)
	}
	id, ok := m.Leader(ctx)
	if nodes == 1 && (!ok || id != 1) || nodes > 1 && ok {
		t.Errorf("Leader of %d = %d, %v", nodes, id, ok)
	}
	var want []string
	for i := 1; i <= nodes; i++ {
		want = append(want, "zlc@tcp("+lockservice.ServerAddr(i).String()+":3306)/zlc")
	}
	if m.Connect() != strings.Join(want, ",") {
		t.Errorf("Connect = %q", m.Connect())
	}
}

// checkMariaDBKill connects a worker to the last server, writes as the lock's user,
// finds its connection with ServerOf and kills it: the client's next query fails.
func checkMariaDBKill(t *testing.T, m *MariaDB, net *netns.Network) {
	t.Helper()
	ctx := context.Background()
	w, err := net.AddHost(ctx, "w1", lockservicetest.WorkerAddr)
	if err != nil {
		t.Fatal(err)
	}
	dsns := strings.Split(m.Connect(), ",")
	last := m.Servers[len(m.Servers)-1]
	c := mariadbClient(t, w, dsns[len(dsns)-1])
	if _, err := c.ExecContext(ctx, "CREATE TABLE zlc_test (name VARCHAR(64) PRIMARY KEY, owner VARCHAR(64))"); err != nil {
		t.Fatal(err)
	}
	var id uint64
	var got int
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID(), GET_LOCK('zlc-test', 1)").Scan(&id, &got); err != nil || got != 1 {
		t.Fatalf("GET_LOCK: %d, %v", got, err)
	}
	if s, ok := m.ServerOf(ctx, lockservicetest.WorkerAddr, strconv.FormatUint(id, 10)); !ok || s != last.ID {
		t.Errorf("ServerOf(session %d) = %d, %v; want %d", id, s, ok, last.ID)
	}
	if s, ok := m.ServerOf(ctx, lockservicetest.WorkerAddr, ""); !ok || s != last.ID {
		t.Errorf("ServerOf(address only) = %d, %v; want %d", s, ok, last.ID)
	}
	if s, ok := m.ServerOf(ctx, lockservice.ServerAddr(200), ""); ok {
		t.Errorf("ServerOf(an address with no client) = %d", s)
	}
	if err := m.KillConnection(ctx, last.ID, id); err != nil {
		t.Fatal(err)
	}
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&got); err == nil {
		t.Error("the killed connection still answers")
	} else {
		t.Logf("the killed connection's client sees: %v", err)
	}
	if err := m.KillConnection(ctx, last.ID, id); err == nil {
		t.Error("killing a gone connection succeeded")
	}
}

// TestMariaDBBadConfig: a directory that cannot be made and a missing server are
// clear errors before anything is made; a port taken in the server's namespace is a
// clear error, and Close leaves nothing.
func TestMariaDBBadConfig(t *testing.T) {
	requireMariaDB(t)
	testenv.RequireIntegration(t, testenv.Python3) // the listener that takes the port
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := StartMariaDB(ctx, nil, MariaDBConfig{Dir: filepath.Join(file, "servers")}); err == nil ||
		!strings.Contains(err.Error(), "make the servers' directory") {
		t.Errorf("a directory that cannot be made: %v", err)
	}
	if _, err := StartMariaDB(ctx, nil, MariaDBConfig{Dir: t.TempDir(), Binary: "zlc-no-such-mariadbd"}); err == nil ||
		!strings.Contains(err.Error(), "install Debian's mariadb-server") {
		t.Errorf("no server: %v", err)
	}
	dir := t.TempDir()
	net := dbNet(t, dir)
	svc, err := lockservice.Start(ctx, net, lockservice.Config{Kind: kind.MariaDB, Dir: dir, Nodes: 1}, "")
	if svc != nil {
		defer svc.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	m := svc.(*MariaDB)
	s := m.Servers[0]
	if err := s.Host.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	takePort(t, s.host.NS().Command, s.Host.Addr().String(), 3306)
	if err := s.Host.Start(ctx); err != nil {
		t.Fatal(err)
	}
	err = m.WaitServing(ctx, 10*time.Second)
	if err == nil || !strings.Contains(err.Error(), "server 1 exited") || !strings.Contains(err.Error(), "already in use") {
		t.Errorf("a port in use: %v", err)
	} else {
		t.Logf("a port in use: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Error(err)
	}
	checkNoDatabaseLeft(t, dir)
}

// TestCleanupFindsLeftMariaDB: a server whose directory was deleted under it (its
// run is gone; Close never called) is found and killed though its namespace lives.
func TestCleanupFindsLeftMariaDB(t *testing.T) {
	requireMariaDB(t)
	ctx := context.Background()
	dir := t.TempDir()
	net := dbNet(t, dir)
	m, err := StartMariaDB(ctx, net, MariaDBConfig{Dir: dir})
	if m != nil {
		defer m.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	s := m.Servers[0]
	pid := s.Host.Pid()
	if err := os.RemoveAll(s.Dir); err != nil {
		t.Fatal(err)
	}
	left, err := CleanupDatabases()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, l := range left {
		found = found || l.Dir == s.Dir && l.Kind == kind.MariaDB && len(l.Pids) == 1 && l.Pids[0] == pid
	}
	if !found {
		t.Fatalf("CleanupDatabases = %+v; want %s (pid %d)", left, s.Dir, pid)
	}
	if lockservice.Running(pid) {
		t.Errorf("mariadbd %d still runs", pid)
	}
	if _, err := os.Stat(dbRecord(s.ns)); err == nil {
		t.Errorf("record file %s left", dbRecord(s.ns))
	}
}
