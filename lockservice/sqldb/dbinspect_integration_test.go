package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// The inspection tests take locks as the recipes do, on connections whose session
// they know, and check that the lock reader names exactly those sessions. Run them
// under flock /tmp/zlc-ensemble.lock (they start real servers).

// startTestPostgres starts a Postgres (with a standby if asked) and a worker host.
func startTestPostgres(t *testing.T, standby bool) (*Postgres, netns.Host) {
	t.Helper()
	requirePostgres(t)
	dir := lockservicetest.OpenDir(t)
	t.Cleanup(func() { checkNoDatabaseLeft(t, dir) }) // after the fixture's own
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.Postgres, Dir: dir, Settings: PostgresConfig{Standby: standby}})
	return f.Service.(*Postgres), f.Worker(t)
}

// pgPid is the backend pid of c as a session name.
func pgPid(t *testing.T, c *pgx.Conn) string {
	t.Helper()
	var pid int64
	if err := c.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid); err != nil {
		t.Fatal(err)
	}
	return lockservice.SessionName(uint64(pid))
}

// lockEntry is an entry and its owner, as a lock reader reports them.
type lockEntry struct{ name, owner string }

// readLock reads every entry of lockPath and its owner.
func readLock(t *testing.T, lock lockservice.LockReader, lockPath string) []lockEntry {
	t.Helper()
	names, err := lock.Entries(lockservice.PathLock(lockPath), true)
	if err != nil {
		t.Fatalf("Entries(%s): %v", lockPath, err)
	}
	var out []lockEntry
	for _, n := range names {
		owner, ok, err := lock.Owner(lockservice.PathLock(lockPath), n)
		if err != nil || !ok {
			t.Fatalf("Owner(%s, %s) = %q, %v, %v", lockPath, n, owner, ok, err)
		}
		out = append(out, lockEntry{n, owner})
	}
	return out
}

// waitLock waits up to 5 s until lockPath's entries are want, else fails t.
func waitLock(t *testing.T, lock lockservice.LockReader, lockPath string, want ...lockEntry) {
	t.Helper()
	var got []lockEntry
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if got = readLock(t, lock, lockPath); slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("lock %s: entries %v, want %v", lockPath, got, want)
}

// advisoryTestPath is a lock path whose advisory key has its high bit set and a
// low half above 2^31 (both halves beyond a signed 32-bit oid).
func advisoryTestPath(t *testing.T) string {
	for i := 0; i < 10000; i++ {
		p := fmt.Sprintf("/zlc/inspect-%d", i)
		if k := locknames.PostgresAdvisoryKey(p); k < 0 && uint32(k) >= 1<<31 {
			return p
		}
	}
	t.Fatal("no lock path with such a key")
	return ""
}

func TestInspectPostgresLock(t *testing.T) {
	p, w := startTestPostgres(t, false)
	ctx := context.Background()
	addr := p.Servers[0].ClientAddr()
	c1, c2, other := pgClient(t, w, addr), pgClient(t, w, addr), pgClient(t, w, addr)
	s1, s2 := pgPid(t, c1), pgPid(t, c2)
	lock, err := p.OpenLock(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	path := advisoryTestPath(t)
	key := locknames.PostgresAdvisoryKey(path)
	waitLock(t, lock, path) // no table, no advisory lock
	// Another key's advisory lock, and a two-key one, are no entries (not the
	// schema's own, 2054 and 1, which PostgresSchema would then wait for).
	if _, err := other.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d), pg_advisory_lock(2054, 2)", locknames.PostgresAdvisoryKey(path+"x"))); err != nil {
		t.Fatal(err)
	}
	if _, err := c1.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d)", key)); err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path, lockEntry{"advisory-" + pidOf(t, s1), s1})
	waiting := make(chan error, 1)
	go func() {
		_, err := c2.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d)", key))
		waiting <- err
	}()
	waitLock(t, lock, path, lockEntry{"advisory-" + pidOf(t, s1), s1}, lockEntry{"advisory-" + pidOf(t, s2), s2})
	lockservicetest.CheckLive(t, p.LiveSessions(ctx), s1, s2)
	if _, err := c1.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_unlock(%d)", key)); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path, lockEntry{"advisory-" + pidOf(t, s2), s2})
	if _, err := c2.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_unlock(%d)", key)); err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path)
	checkPgRowEntry(t, p, lock, c1, s1, path)
	c2.Close(ctx)
	lockservicetest.WaitLive(t, p.LiveSessions, s2, false)
}

// pidOf is the decimal pid of a Postgres session name.
func pidOf(t *testing.T, session string) string {
	n, ok := lockservice.ParseSession(session)
	if !ok {
		t.Fatalf("bad session %q", session)
	}
	return fmt.Sprint(n)
}

// checkPgRowEntry locks path the pg-table way, with a row of zlc_locks on c (whose
// session is s), and checks the entry "row" and its owner; then deletes it.
func checkPgRowEntry(t *testing.T, p *Postgres, lock lockservice.LockReader, c *pgx.Conn, s, path string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Exec(ctx, locknames.PostgresSchema); err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path) // the table, and no row
	if _, err := c.Exec(ctx, "INSERT INTO zlc_locks (name, owner) VALUES ($1, $2), ($1 || 'x', '0x1:other')", path, s+":c0ffee"); err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path, lockEntry{"row", s})
	if owner, ok, err := lock.Owner(lockservice.PathLock(path), "advisory-1"); ok || err != nil {
		t.Errorf("Owner of an entry that is not there: %q, %v, %v", owner, ok, err)
	}
	if _, err := c.Exec(ctx, "DELETE FROM zlc_locks WHERE name = $1", path); err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path)
	if _, ok, err := lock.Owner(lockservice.PathLock(path), "row"); ok || err != nil {
		t.Errorf("Owner of the deleted row: %v, %v", ok, err)
	}
}

// startTestMariaDB starts nodes MariaDB servers and a worker host.
func startTestMariaDB(t *testing.T, nodes int) (*MariaDB, netns.Host) {
	t.Helper()
	requireMariaDB(t)
	dir := lockservicetest.OpenDir(t)
	t.Cleanup(func() { checkNoDatabaseLeft(t, dir) }) // after the fixture's own
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.MariaDB, Dir: dir, Nodes: nodes, Settings: MariaDBConfig{Nodes: nodes}})
	return f.Service.(*MariaDB), f.Worker(t)
}

// mariadbSession is c's CONNECTION_ID() as a session name.
func mariadbSession(t *testing.T, c *sql.Conn) string {
	t.Helper()
	var id uint64
	if err := c.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return lockservice.SessionName(id)
}

// getLock calls GET_LOCK on c as mariadb-getlock sends it (the name interpolated
// in the client); it fails t unless the lock is granted.
func getLock(t *testing.T, c *sql.Conn, name string, timeout int) error {
	var got sql.NullInt64
	err := c.QueryRowContext(context.Background(), fmt.Sprintf("SELECT GET_LOCK('%s', %d)", name, timeout)).Scan(&got)
	if err == nil && (!got.Valid || got.Int64 != 1) {
		err = fmt.Errorf("GET_LOCK(%s) = %v", name, got)
	}
	return err
}

// mariadbEntry is the entry of session on server.
func mariadbEntry(t *testing.T, server int, session string) lockEntry {
	n, ok := lockservice.ParseSession(session)
	if !ok {
		t.Fatalf("bad session %q", session)
	}
	return lockEntry{fmt.Sprintf("s%d-%d", server, n), session}
}

func TestInspectMariaDBLock(t *testing.T) {
	m, w := startTestMariaDB(t, 2)
	ctx := context.Background()
	dsns := strings.Split(m.Connect(), ",")
	c1, c2, c3 := mariadbClient(t, w, dsns[0]), mariadbClient(t, w, dsns[0]), mariadbClient(t, w, dsns[1])
	s1, s2, s3 := mariadbSession(t, c1), mariadbSession(t, c2), mariadbSession(t, c3)
	lock, err := m.OpenLock(ctx, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	path := "/zlc/inspect/" + strings.Repeat("long", 16) // hashed by locknames.MariaDBLockName
	name := locknames.MariaDBLockName(path)
	waitLock(t, lock, path)
	if err := getLock(t, c1, name, 1); err != nil {
		t.Fatal(err)
	}
	if err := getLock(t, c3, name+"x", 1); err != nil { // another lock
		t.Fatal(err)
	}
	waitLock(t, lock, path, mariadbEntry(t, 1, s1))
	waiting := make(chan error, 1)
	go func() { waiting <- getLock(t, c2, name, 30) }()
	waitLock(t, lock, path, mariadbEntry(t, 1, s1), mariadbEntry(t, 1, s2))
	if err := getLock(t, c3, name, 1); err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path, mariadbEntry(t, 1, s1), mariadbEntry(t, 2, s3), mariadbEntry(t, 1, s2))
	lockservicetest.CheckLive(t, m.LiveSessions(ctx), s1, s2, s3)
	if _, err := c1.ExecContext(ctx, "DO RELEASE_LOCK(?)", name); err != nil {
		t.Fatal(err)
	}
	if err := <-waiting; err != nil {
		t.Fatal(err)
	}
	waitLock(t, lock, path, mariadbEntry(t, 1, s2), mariadbEntry(t, 2, s3))
	for _, c := range []*sql.Conn{c2, c3} {
		if _, err := c.ExecContext(ctx, "DO RELEASE_ALL_LOCKS()"); err != nil {
			t.Fatal(err)
		}
	}
	waitLock(t, lock, path)
}
