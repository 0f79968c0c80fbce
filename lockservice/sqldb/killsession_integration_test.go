package sqldb

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// The KillSession tests end a session that holds a lock, from the server's side,
// and check the lock is free afterwards (Redis: the client is gone; its key lives
// on until it expires, as on a real Redis).

func TestKillSessionPostgres(t *testing.T) {
	p, w := startTestPostgres(t, false)
	ctx := context.Background()
	addr := p.Servers[0].ClientAddr()
	c, other := pgClient(t, w, addr), pgClient(t, w, addr)
	s := pgPid(t, c)
	const path = "/zlc/kill"
	key := locknames.PostgresAdvisoryKey(path)
	if _, err := c.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d)", key)); err != nil {
		t.Fatal(err)
	}
	lock, _ := p.OpenLock(ctx, time.Second)
	waitLock(t, lock, path, lockEntry{"advisory-" + pidOf(t, s), s})
	if n, err := p.KillSession(ctx, 1, s); err != nil || n != 1 {
		t.Fatalf("KillSession(%s) = %d, %v; want 1", s, n, err)
	}
	waitLock(t, lock, path)
	if err := c.Ping(ctx); err == nil {
		t.Error("the killed session still answers")
	}
	var got bool
	if err := other.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", key).Scan(&got); err != nil || !got {
		t.Errorf("the lock is not free after the kill: %v, %v", got, err)
	}
	lockservicetest.WaitLive(t, p.LiveSessions, s, false)
	if n, err := p.KillSession(ctx, 1, s); err != nil || n != 0 {
		t.Errorf("KillSession of a gone session = %d, %v; want 0", n, err)
	}
	if _, err := p.KillSession(ctx, 2, s); err == nil {
		t.Error("KillSession on a server that does not exist succeeded")
	}
	if _, err := p.KillSession(ctx, 1, "w1"); err == nil {
		t.Error("KillSession of a session that is no id succeeded")
	}
}

func TestKillSessionMariaDB(t *testing.T) {
	m, w := startTestMariaDB(t, 1)
	ctx := context.Background()
	dsn := strings.Split(m.Connect(), ",")[0]
	c, other := mariadbClient(t, w, dsn), mariadbClient(t, w, dsn)
	s := mariadbSession(t, c)
	const path = "/zlc/kill"
	if err := getLock(t, c, locknames.MariaDBLockName(path), 1); err != nil {
		t.Fatal(err)
	}
	lock, _ := m.OpenLock(ctx, time.Second)
	waitLock(t, lock, path, mariadbEntry(t, 1, s))
	if n, err := m.KillSession(ctx, 1, s); err != nil || n != 1 {
		t.Fatalf("KillSession(%s) = %d, %v; want 1", s, n, err)
	}
	waitLock(t, lock, path)
	if err := c.PingContext(ctx); err == nil {
		t.Error("the killed connection still answers")
	}
	if err := getLock(t, other, locknames.MariaDBLockName(path), 1); err != nil {
		t.Errorf("the lock is not free after the kill: %v", err)
	}
	lockservicetest.WaitLive(t, m.LiveSessions, s, false)
	if n, err := m.KillSession(ctx, 1, s); err != nil || n != 0 {
		t.Errorf("KillSession of a gone connection = %d, %v; want 0", n, err)
	}
	if _, err := m.KillSession(ctx, 2, s); err == nil {
		t.Error("KillSession on a server that does not exist succeeded")
	}
}
