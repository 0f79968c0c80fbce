package sqldb

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

func TestPostgresConf(t *testing.T) {
	primary := string(postgresConf(1, lockservice.ServerAddr(1), netip.Addr{}, 0))
	standby := string(postgresConf(2, lockservice.ServerAddr(2), lockservice.ServerAddr(1), 0))
	for _, c := range []struct {
		conf string
		want []string
		not  []string
	}{
		{primary, []string{dbMarker + ": Postgres server 1, primary\n", "listen_addresses = '10.77.1.1'", "port = 5432",
			"unix_socket_directories = ''", "cluster_name = 'zlc-s1'", "dynamic_shared_memory_type = mmap"},
			[]string{"primary_conninfo", "fsync", "synchronous_commit"}},
		{standby, []string{"standby of 10.77.1.1", "listen_addresses = '10.77.1.2'",
			"primary_conninfo = 'host=10.77.1.1 port=5432 user=postgres application_name=s2'", "hot_standby = on"},
			[]string{"fsync"}},
	} {
		if !strings.HasPrefix(c.conf, dbMarker) {
			t.Errorf("no marker first:\n%s", c.conf)
		}
		for _, w := range c.want {
			if !strings.Contains(c.conf, w) {
				t.Errorf("lacks %q:\n%s", w, c.conf)
			}
		}
		for _, n := range c.not {
			if strings.Contains(c.conf, n) {
				t.Errorf("has %q:\n%s", n, c.conf)
			}
		}
	}
}

func TestPgHBATrustsOnlyTheRunNetwork(t *testing.T) {
	hba := string(pgHBA(netip.MustParsePrefix("10.77.0.0/16"), netip.MustParseAddr("10.77.0.1")))
	var rules []string
	for _, l := range strings.Split(strings.TrimSpace(hba), "\n") {
		if !strings.HasPrefix(l, "#") {
			rules = append(rules, strings.Join(strings.Fields(l), " "))
		}
	}
	want := []string{
		"host all postgres 10.77.0.1/32 trust",
		"host replication postgres 10.77.0.0/16 trust",
		"host zlc zlc 10.77.0.0/16 trust",
	}
	if strings.Join(rules, "\n") != strings.Join(want, "\n") {
		t.Errorf("pg_hba rules:\n%s\nwant:\n%s", strings.Join(rules, "\n"), strings.Join(want, "\n"))
	}
}

func TestMariaDBConfAndInit(t *testing.T) {
	f := mariadbFiles{Conf: "/r/zlcmariadb-s2/my.cnf", Init: "/r/zlcmariadb-s2/init.sql", Log: "/r/zlcmariadb-s2/server.log",
		Pid: "/r/zlcmariadb-s2/mariadb.pid", Data: "/r/zlcmariadb-s2/data"}
	conf := string(mariadbConf(2, 3, lockservice.ServerAddr(2), f, 0))
	for _, w := range []string{dbMarker + ": MariaDB server 2 of 3 independent\n[mariadbd]\n", "user = root", "datadir = /r/zlcmariadb-s2/data",
		"bind-address = 10.77.1.2", "port = 3306", "init-file = /r/zlcmariadb-s2/init.sql", "skip-name-resolve", "skip-log-bin",
		"tmpdir = /r/zlcmariadb-s2/data"} {
		if !strings.Contains(conf, w) {
			t.Errorf("my.cnf lacks %q:\n%s", w, conf)
		}
	}
	if !strings.HasPrefix(conf, dbMarker) || strings.Contains(conf, "innodb_flush_log_at_trx_commit") {
		t.Errorf("my.cnf:\n%s", conf)
	}
	init := string(mariadbInit(netip.MustParsePrefix("10.77.0.0/16"), netip.MustParseAddr("10.77.0.1")))
	for _, w := range []string{"CREATE DATABASE IF NOT EXISTS zlc;", "CREATE USER IF NOT EXISTS 'zlc'@'10.77.0.0/255.255.0.0';",
		"GRANT ALL ON zlc.* TO 'zlc'@'10.77.0.0/255.255.0.0';", "GRANT ALL PRIVILEGES ON *.* TO 'root'@'10.77.0.1' WITH GRANT OPTION;"} {
		if !strings.Contains(init, w+"\n") {
			t.Errorf("init-file lacks the line %q:\n%s", w, init)
		}
	}
	for _, c := range []struct{ p, want string }{{"10.77.0.0/16", "255.255.0.0"}, {"10.0.0.0/9", "255.128.0.0"}, {"1.2.3.4/32", "255.255.255.255"}} {
		if got := maskOf(netip.MustParsePrefix(c.p)); got != c.want {
			t.Errorf("maskOf(%s) = %s, want %s", c.p, got, c.want)
		}
	}
}

func TestCheckReachable(t *testing.T) {
	top := t.TempDir()
	open := filepath.Join(top, "open", "servers")
	if err := os.MkdirAll(open, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{top, filepath.Dir(top)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	stranger := osUser{Name: "zlc-stranger", UID: 54321, GID: 54321}
	if err := checkReachable(open, stranger); err != nil {
		t.Errorf("an open path: %v", err)
	}
	if err := os.Chmod(filepath.Dir(open), 0o700); err != nil {
		t.Fatal(err)
	}
	err := checkReachable(open, stranger)
	if err == nil || !strings.Contains(err.Error(), filepath.Dir(open)+" (mode 0700") {
		t.Errorf("a closed directory on the way: %v", err)
	}
	owner := osUser{Name: "owner", UID: os.Getuid(), GID: os.Getgid()}
	if err := checkReachable(open, owner); err != nil {
		t.Errorf("its owner: %v", err)
	}
}

// TestDatabaseLockNames: the recipes' lock names, as the harness computes them.
func TestDatabaseLockNames(t *testing.T) {
	if got := locknames.PostgresAdvisoryKey(""); uint64(got) != 0xcbf29ce484222325 { // FNV-1a's offset basis
		t.Errorf("locknames.PostgresAdvisoryKey(\"\") = %#x", uint64(got))
	}
	if got := locknames.PostgresAdvisoryKey("/zlc/lock"); got == locknames.PostgresAdvisoryKey("/zlc/lock2") {
		t.Errorf("two names, one key %d", got)
	}
	short := strings.Repeat("x", 64)
	if got := locknames.MariaDBLockName(short); got != short {
		t.Errorf("locknames.MariaDBLockName(64 chars) = %q", got)
	}
	long := strings.Repeat("x", 65)
	if got := locknames.MariaDBLockName(long); len(got) != 20 || !strings.HasPrefix(got, "zlc-") || got == locknames.MariaDBLockName(long+"y") {
		t.Errorf("locknames.MariaDBLockName(65 chars) = %q", got)
	}
}

// TestRunDirForAClosedStore: a run directory the postgres account can enter is the
// servers'; one it cannot gives them a directory of their own (zlcpg-run-*, mode
// 0755), which goes with their last server's directory.
func TestRunDirForAClosedStore(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.PostgreSQL)
	open, err := os.MkdirTemp("", "zlc-test-open-") // under /tmp, which everyone enters
	if err == nil {
		err = os.Chmod(open, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(open) })
	if dir, made, err := runDirFor(open, "postgres"); err != nil || made || dir != open {
		t.Errorf("an open directory: %s, %v, %v; want it as it is", dir, made, err)
	}
	closed := filepath.Join(t.TempDir(), "servers") // t.TempDir is root's, 0700
	dir, made, err := runDirFor(closed, "postgres")
	if err != nil || !made || !strings.HasPrefix(filepath.Base(dir), pgRunDirPrefix) {
		t.Fatalf("a closed directory: %s, %v, %v; want one of the tool's", dir, made, err)
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("the servers' own directory: %v, %v", st, err)
	}
	server := filepath.Join(dir, pgDirPrefix+"1")
	if err := os.Mkdir(server, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := removeDBDir("zlctest-none", server); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the servers' own directory outlived its last server: %v", err)
		os.RemoveAll(dir)
	}
}

// TestNodesNameTheClientPort: the nemesis aims reply-loss, client-server-partition
// and client-vanish at the servers' client port, which a database's nodes must name
// (not ZooKeeper's 2181, which no worker's connection uses here).
func TestNodesNameTheClientPort(t *testing.T) {
	p := &Postgres{dbServers: dbServers{Servers: []*Server{pgLayout.server("/x", 1, ""), pgLayout.server("/x", 2, "")}}}
	m := &MariaDB{dbServers: dbServers{Servers: []*Server{mariadbLayout.server("/x", 1, "")}}}
	for name, c := range map[string]struct {
		nodes []nemesis.Server
		port  int
	}{"postgres": {p.Nodes(), 5432}, "mariadb": {m.Nodes(), 3306}} {
		for _, n := range c.nodes {
			if n.Port() != c.port {
				t.Errorf("%s server %d: client port %d, want %d", name, n.ID, n.Port(), c.port)
			}
		}
	}
}

// TestAdvisoryKeys: the path's advisory key comes first, as pg_locks shows a
// bigint key (high and low 32 bits, objsubid 1); a place's bigint and two-int keys
// follow once each, the two ints as unsigned oids with objsubid 2.
func TestAdvisoryKeys(t *testing.T) {
	path := "/zlc/r/l0"
	own := locknames.PostgresAdvisoryKey(path)
	lock := lockservice.Lock{Path: path, Places: []workloads.LockPlace{
		{Advisory: []int64{-1}}, {Advisory: []int64{-2, 5}}, {Advisory: []int64{own}}, {GetLock: "x"}, {Advisory: []int64{-1}},
	}}
	want := []advisoryKey{
		{int64(uint64(own) >> 32), int64(uint32(own)), 1},
		{0xffffffff, 0xffffffff, 1},
		{0xfffffffe, 5, 2},
	}
	if got := advisoryKeys(lock); !slices.Equal(got, want) {
		t.Errorf("advisoryKeys = %+v, want %+v", got, want)
	}
}

// TestServerOf: a session's number names its server by the client's address where
// the servers see the workers' own addresses; with every client masqueraded to one
// address (no addr), a MariaDB id, which repeats across independent servers, names
// one only when exactly one server has it; a PostgreSQL pid is unique and needs no
// address.
func TestServerOf(t *testing.T) {
	w1, w2 := netip.MustParseAddr("10.77.2.1"), netip.MustParseAddr("10.77.2.2")
	d := dbServers{Servers: []*Server{{Member: lockservice.Member{ID: 1}}, {Member: lockservice.Member{ID: 2}}}}
	all := [][]dbConn{{{id: 8, addr: w1}, {id: 9, addr: w2}}, {{id: 9, addr: w1}, {id: 10, addr: w2}}}
	for _, c := range []struct {
		addr       netip.Addr
		session    string
		idFromAddr bool
		want       int
		wantOK     bool
	}{
		{w1, "0x9", true, 2, true},           // the id from that address
		{w2, "0x9", true, 1, true},           // the same id, another worker
		{w2, "0x7", true, 1, true},           // no such id: the first server with a client from addr
		{netip.Addr{}, "0x8", true, 1, true}, // masqueraded: one server has 8
		{netip.Addr{}, "0x9", true, 0, false},
		{netip.Addr{}, "0x7", true, 0, false},
		{netip.Addr{}, "0x9", false, 1, true}, // PostgreSQL: the first with the pid
	} {
		got, ok := d.serverOf(all, c.addr, c.session, c.idFromAddr)
		if got != c.want || ok != c.wantOK {
			t.Errorf("serverOf(%s, %s, %v) = %d, %v; want %d, %v", c.addr, c.session, c.idFromAddr, got, ok, c.want, c.wantOK)
		}
	}
}

// TestErrorLines: a program's error lines are what its failure says, not the links it
// prints after them; with none, its last lines.
func TestErrorLines(t *testing.T) {
	out := "Installing MariaDB/MySQL system tables in '/d' ...\nERROR: 1051  Unknown table 'mysql.tmp_user_sys'\n\nThe latest information about mysql_install_db is available at\nhttps://mariadb.com/\n"
	if got := errorLines(out, 8); got != "ERROR: 1051  Unknown table 'mysql.tmp_user_sys'" {
		t.Errorf("errorLines: %q", got)
	}
	if got := errorLines("a\nb\nc", 2); got != "b\nc" {
		t.Errorf("no error line: %q, want the last two", got)
	}
}

// TestInstallErrorReadsTheLog: mariadb-install-db says only "failed" and where to
// look; the error names what the server's log says.
func TestInstallErrorReadsTheLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "server.log")
	if err := os.WriteFile(log, []byte("2026-11-30 1 [Warning] Could not remove temporary table\nERROR: 1051  Unknown table 'mysql.tmp_user_sys'\n2026-11-30 0 [ERROR] Aborting\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := installError(errors.New("exit status 1"), []byte("Installation of system tables failed!\nhttps://mariadb.com/\n"), log)
	if !strings.Contains(err.Error(), "Unknown table 'mysql.tmp_user_sys'") || !strings.Contains(err.Error(), log) {
		t.Errorf("error %q does not say what the log says", err)
	}
}
