package recipes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// The database recipe tests start real servers (Debian's postgresql-15 and
// mariadb-server) in a fresh run network, with lockservice, and run the recipes from
// a worker namespace of it. Run them under the ensemble lock:
// flock /tmp/zlc-ensemble.lock go test ./recipes -run 'Pg|MariaDB|DB' -count=1

// requireDBFiles skips t (fails it under ZLC_REQUIRE_INTEGRATION) when a file is
// missing.
func requireDBFiles(t *testing.T, what string, paths ...string) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2)
	for _, p := range paths {
		if _, err := os.Stat(p); err != nil {
			msg := fmt.Sprintf("test needs %s (%s missing; make setup installs it)", what, p)
			if testenv.Strict() {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
}

// dbWorld is a database and a worker namespace on its run network
// (lockservicetest.Start), torn down when the test ends.
type dbWorld struct {
	worker netns.Host
	pg     *sqldb.Postgres
	maria  *sqldb.MariaDB
}

// startTestPostgres starts a Postgres primary for the test.
func startTestPostgres(t *testing.T) *dbWorld {
	t.Helper()
	requireDBFiles(t, "Debian's postgresql-15", "/usr/lib/postgresql/15/bin/initdb", "/usr/lib/postgresql/15/bin/postgres")
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.Postgres})
	return &dbWorld{worker: f.Worker(t), pg: f.Service.(*sqldb.Postgres)}
}

// startTestMariaDB starts one MariaDB server for the test.
func startTestMariaDB(t *testing.T) *dbWorld {
	t.Helper()
	requireDBFiles(t, "Debian's mariadb-server", "/usr/sbin/mariadbd", "/usr/bin/mariadb-install-db")
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.MariaDB, Nodes: 1})
	return &dbWorld{worker: f.Worker(t), maria: f.Service.(*sqldb.MariaDB)}
}

// servers is the database's connect string split as Serve splits init's connect.
func (w *dbWorld) servers() []string {
	c := ""
	if w.pg != nil {
		c = w.pg.Connect()
	} else {
		c = w.maria.Connect()
	}
	return strings.Split(c, ",")
}

// testDialer dials from the worker's namespace. Cut, it closes every connection it
// made and refuses new ones (the worker is cut off); armed, it closes the next
// connection that receives data instead of passing the data on (the request ran, its
// reply is lost).
type testDialer struct {
	host  netns.Host
	cut   atomic.Bool
	armed atomic.Bool
	mu    sync.Mutex
	conns []net.Conn
}

func (d *testDialer) dial(ctx context.Context, _, addr string) (net.Conn, error) {
	if d.cut.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("cut off (test)")}
	}
	c, err := d.host.Dial(ctx, addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
	return &testConn{Conn: c, d: d}, nil
}

// cutOff closes every connection and refuses new ones until heal.
func (d *testDialer) cutOff() {
	d.cut.Store(true)
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
	d.conns = nil
}

func (d *testDialer) heal() { d.cut.Store(false) }

type testConn struct {
	net.Conn
	d *testDialer
}

func (c *testConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.d.armed.CompareAndSwap(true, false) {
		c.Conn.Close()
		return 0, errors.New("reply dropped (test)")
	}
	return n, err
}

// testDBConfig is a recipe's config for a test.
func testDBConfig(t *testing.T, servers []string, kind workloads.Kind, ttl time.Duration, worker int) (Config, *recordedEvents) {
	ev := newRecordedEvents()
	return Config{Servers: servers, SessionTimeout: ttl, Path: "/zlc-test/" + strings.ReplaceAll(t.Name(), "/", "-"),
		Kind: kind, Permits: 1, Worker: worker, Log: newTestLog(t), Events: ev}, ev
}

// newTestPgTable builds a pg-table variant that dials through d.
func newTestPgTable(t *testing.T, w *dbWorld, m pgTableMutant, ttl time.Duration, worker int, d *testDialer, counter string) (*pgTable, *recordedEvents) {
	t.Helper()
	cfg, ev := testDBConfig(t, w.servers(), workloads.Mutex, ttl, worker)
	if counter != "" {
		cfg.Kind, cfg.CounterPath, cfg.Fenced = workloads.Counter, counter, true
	}
	if d == nil {
		d = &testDialer{host: w.worker}
	}
	r, err := newPgTable(context.Background(), cfg, m, d.dial)
	if err != nil {
		t.Fatalf("new %s: %v", pgTableVariants[m].name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r, ev
}

// pgAdmin runs a statement as the lock's user from the worker's namespace.
func pgAdmin(t *testing.T, w *dbWorld, q string, args ...any) pgx.Rows {
	t.Helper()
	cc, err := pgx.ParseConfig(pgConnString(w.servers()))
	if err != nil {
		t.Fatal(err)
	}
	d := &testDialer{host: w.worker}
	cc.DialFunc = d.dial
	c, err := pgx.ConnectConfig(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	rows, err := c.Query(context.Background(), q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return rows
}

// pgRowOwner returns the owner and token of the test's lock row ("" when none).
func pgRowOwner(t *testing.T, w *dbWorld, name string) (string, int64) {
	t.Helper()
	rows := pgAdmin(t, w, "SELECT owner, token FROM zlc_locks WHERE name = $1", name)
	defer rows.Close()
	var owner string
	var token int64
	if rows.Next() {
		if err := rows.Scan(&owner, &token); err != nil {
			t.Fatal(err)
		}
	}
	return owner, token
}

func TestPgTable(t *testing.T) {
	w := startTestPostgres(t)
	t.Run("mutex", func(t *testing.T) {
		a, evA := newTestPgTable(t, w, pgTableCorrect, 2*time.Second, 1, nil, "")
		b, _ := newTestPgTable(t, w, pgTableCorrect, 2*time.Second, 2, nil, "")
		ga := mustAcquire(t, a, "a")
		owner, token := pgRowOwner(t, w, a.cfg.Path)
		if want := FormatSessionID(lastSessionID(t, evA)) + ":"; !strings.HasPrefix(owner, want) || string(ga.Token) != fmt.Sprint(token) {
			t.Fatalf("row owner %q token %d, grant token %s; want the owner to start %q", owner, token, ga.Token, want)
		}
		expectTimeout(t, b, "b while a holds")
		mustRelease(t, a, "a")
		if err := a.Release(context.Background()); err == nil {
			t.Fatal("a second release succeeded")
		}
		gb := mustAcquire(t, b, "b")
		if tokenOf(t, gb) <= tokenOf(t, ga) {
			t.Fatalf("tokens %s then %s: want increasing", ga.Token, gb.Token)
		}
	})
	t.Run("fenced-counter", func(t *testing.T) {
		a, _ := newTestPgTable(t, w, pgTableCorrect, 2*time.Second, 1, nil, "/zlc-test/counter-table")
		mustAcquire(t, a, "a")
		if err := a.Write(context.Background(), 7); err != nil {
			t.Fatal(err)
		}
		if v, err := a.Read(context.Background()); err != nil || v != 7 {
			t.Fatalf("read %d, %v", v, err)
		}
		pgAdmin(t, w, "DELETE FROM zlc_locks WHERE name = $1", a.cfg.Path).Close() // an operator clears the lock
		if err := a.Write(context.Background(), 8); !errors.Is(err, ErrFenced) {
			t.Fatalf("write after the row went: %v, want fenced", err)
		}
	})
}

// lastSessionID returns the last session id reported.
func lastSessionID(t *testing.T, ev *recordedEvents) int64 {
	t.Helper()
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.sessions) == 0 {
		t.Fatal("no session event")
	}
	return ev.sessions[len(ev.sessions)-1]
}

// tokenOf parses a grant's token.
func tokenOf(t *testing.T, g Grant) int64 {
	t.Helper()
	var v int64
	if _, err := fmt.Sscan(string(g.Token), &v); err != nil {
		t.Fatalf("token %q: %v", g.Token, err)
	}
	return v
}

func TestPgTableExpiry(t *testing.T) {
	w := startTestPostgres(t)
	t.Run("renews", func(t *testing.T) {
		a, evA := newTestPgTable(t, w, pgTableExpiry, 600*time.Millisecond, 1, nil, "")
		b, _ := newTestPgTable(t, w, pgTableExpiry, 600*time.Millisecond, 2, nil, "")
		mustAcquire(t, a, "a")
		expectNoLost(t, evA, 1500*time.Millisecond)
		expectTimeout(t, b, "b while a renews")
		mustRelease(t, a, "a")
		mustAcquire(t, b, "b")
	})
	t.Run("cut-off-holder", func(t *testing.T) {
		d := &testDialer{host: w.worker}
		a, evA := newTestPgTable(t, w, pgTableExpiry, 600*time.Millisecond, 1, d, "/zlc-test/counter-expiry")
		b, _ := newTestPgTable(t, w, pgTableExpiry, 600*time.Millisecond, 2, nil, "/zlc-test/counter-expiry")
		ga := mustAcquire(t, a, "a")
		d.cutOff()
		waitLost(t, evA, 2*time.Second)
		gb := mustAcquire(t, b, "b takes the expired row over")
		if tokenOf(t, gb) <= tokenOf(t, ga) {
			t.Fatalf("tokens %s then %s: want increasing", ga.Token, gb.Token)
		}
		if err := b.Write(context.Background(), 1); err != nil {
			t.Fatal(err)
		}
		d.heal()
		if err := a.Write(context.Background(), 2); !errors.Is(err, ErrFenced) {
			t.Fatalf("a's write after b's: %v, want fenced (a's hold is over)", err)
		}
		a.token, a.owner = tokenOf(t, ga), "stale" // as a holder that missed its loss would
		if err := a.Write(context.Background(), 2); !errors.Is(err, ErrFenced) {
			t.Fatalf("a's stale write with token %d after b's %d: %v, want fenced", tokenOf(t, ga), tokenOf(t, gb), err)
		}
		a.owner = ""
	})
}

// TestPgTableUnknownInsert: the INSERT's reply is lost (the connection closes after
// the server committed it). pg-table reads the owner back and holds the lock.
func TestPgTableUnknownInsert(t *testing.T) {
	w := startTestPostgres(t)
	d := &testDialer{host: w.worker}
	a, evA := newTestPgTable(t, w, pgTableCorrect, 2*time.Second, 1, d, "")
	first := lastSessionID(t, evA)
	mustAcquire(t, a, "a, preparing its statements") // so that the reply dropped is the INSERT's, not a prepare's
	mustRelease(t, a, "a")
	d.armed.Store(true)
	g := mustAcquire(t, a, "a, its reply lost")
	if lastSessionID(t, evA) == first {
		t.Fatal("no new session after the connection closed")
	}
	owner, token := pgRowOwner(t, w, a.cfg.Path)
	if owner != a.owner || tokenOf(t, g) != token {
		t.Fatalf("row %q token %d, a holds %q token %s", owner, token, a.owner, g.Token)
	}
	mustRelease(t, a, "a")
}

// TestDBConfigRefusals: a database recipe refuses what its mechanism cannot do before
// it connects anywhere.
func TestDBConfigRefusals(t *testing.T) {
	base := Config{Servers: []string{"127.0.0.1:1"}, SessionTimeout: time.Second, Path: "/zlc-test/l", Permits: 1}
	for _, c := range []struct {
		name string
		new  Constructor
		kind workloads.Kind
	}{
		{"pg-table", NewPgTable, workloads.Reentrant},
		{"pg-table-expiry", NewPgTableExpiry, workloads.Semaphore},
		{"pg-advisory", NewPgAdvisory, workloads.Counter},
		{"mariadb-getlock", NewMariaDBGetLock, workloads.RWLock},
	} {
		cfg := base
		cfg.Kind = c.kind
		_, err := c.new(context.Background(), cfg)
		if typ, msg := Classify(err); typ != workloads.ReplyFail || !strings.Contains(msg, "does not support kind") {
			t.Errorf("%s with kind %s: %s %q, want fail naming the kind", c.name, c.kind, typ, msg)
		}
	}
	if got := pgConnString([]string{"postgres://zlc@10.77.1.1:5432", "10.77.1.2:5432/zlc?sslmode=disable"}); got !=
		"postgres://zlc@10.77.1.1:5432,10.77.1.2:5432/zlc?sslmode=disable&target_session_attrs=read-write" {
		t.Errorf("pgConnString = %q", got)
	}
	if got := pgConnString([]string{"10.77.1.1:5432"}); got != "postgres://zlc@10.77.1.1:5432/zlc?sslmode=disable&target_session_attrs=read-write" {
		t.Errorf("pgConnString(host:port) = %q", got)
	}
	if got := locknames.MariaDBLockName(strings.Repeat("x", 65)); len(got) != 20 || !strings.HasPrefix(got, "zlc-") {
		t.Errorf("locknames.MariaDBLockName(65 chars) = %q", got)
	}
}
