package sqldb

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// pgWorker connects from host as a worker does: Connect's URL (both servers),
// asking for a read-write server.
func pgWorker(t *testing.T, host netns.Host, p *Postgres) *pgx.Conn {
	t.Helper()
	cc, err := pgx.ParseConfig(p.Connect() + "&target_session_attrs=read-write&connect_timeout=5")
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

// waitRow waits up to 5 s for the lock table's row name on server id (its owner
// owner), else fails t.
func waitRow(t *testing.T, p *Postgres, id int, name, owner string) {
	t.Helper()
	var got string
	var err error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		err = p.queryAs(context.Background(), p.Servers[id-1], pgReader, lockservice.OpTimeout, func(ctx context.Context, c *pgx.Conn) error {
			return c.QueryRow(ctx, "SELECT owner FROM zlc_locks WHERE name = $1", name).Scan(&got)
		})
		if err == nil && got == owner {
			return
		}
	}
	t.Fatalf("server %d: row %s owned by %q (%v), want %q", id, name, got, err, owner)
}

// TestPostgresFailover fails over twice: each time the old primary's sessions and
// advisory locks are gone, the committed rows of the lock table survive, Leader
// moves, workers reach the new primary through the same Connect, and the old
// primary streams from the new one.
func TestPostgresFailover(t *testing.T) {
	p, w := startTestPostgres(t, true)
	ctx := context.Background()
	connect := p.Connect()
	c := pgWorker(t, w, p)
	if _, err := c.Exec(ctx, locknames.PostgresSchema); err != nil {
		t.Fatal(err)
	}
	var rows []string
	for i, want := range []struct{ from, to int }{{1, 2}, {2, 1}} {
		row := fmt.Sprintf("/zlc/failover-%d", i)
		s := pgPid(t, c)
		if _, err := c.Exec(ctx, "INSERT INTO zlc_locks (name, owner) VALUES ($1, $2)", row, s+":x"); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, row)
		waitRow(t, p, want.to, row, s+":x") // committed, and on the standby
		if _, err := c.Exec(ctx, fmt.Sprintf("SELECT pg_advisory_lock(%d)", locknames.PostgresAdvisoryKey(row))); err != nil {
			t.Fatal(err)
		}
		lock, _ := p.OpenLock(ctx, time.Second)
		waitLock(t, lock, row, lockEntry{"row", s}, lockEntry{"advisory-" + pidOf(t, s), s})
		start := time.Now()
		from, to, err := p.Failover(ctx)
		if err != nil || from != want.from || to != want.to {
			t.Fatalf("Failover = %d, %d, %v; want %d to %d", from, to, err, want.from, want.to)
		}
		t.Logf("failover from s%d to s%d in %s: %s", from, to, time.Since(start).Round(time.Millisecond), strings.Join(p.LastFailover(), ", "))
		checkAfterFailover(t, p, c, to, s)
		c = pgWorker(t, w, p)
		var addr string
		if err := c.QueryRow(ctx, "SELECT host(inet_server_addr())").Scan(&addr); err != nil || addr != lockservice.ServerAddr(to).String() {
			t.Fatalf("a worker reaches %s (%v), want the new primary %s", addr, err, lockservice.ServerAddr(to))
		}
		waitLock(t, lock, row, lockEntry{"row", s})
		for _, r := range rows {
			if n, err := c.Exec(ctx, "SELECT 1 FROM zlc_locks WHERE name = $1", r); err != nil || n.RowsAffected() != 1 {
				t.Errorf("after failing over to s%d the committed row %s is gone (%v)", to, r, err)
			}
		}
		var free bool
		if err := c.QueryRow(ctx, "SELECT pg_try_advisory_lock($1), pg_advisory_unlock($1)", locknames.PostgresAdvisoryKey(row)).Scan(&free, new(bool)); err != nil || !free {
			t.Errorf("the advisory lock held on the old primary is still held: %v, %v", free, err)
		}
	}
	if p.Connect() != connect {
		t.Errorf("Connect changed: %q, was %q", p.Connect(), connect)
	}
	if err := p.PromoteStandby(ctx, 1); err == nil {
		t.Error("promoting the primary succeeded")
	}
}

// checkAfterFailover: Leader is to, the old primary's session s is gone (c dead),
// and the old primary serves as a standby streaming from to.
func checkAfterFailover(t *testing.T, p *Postgres, c *pgx.Conn, to int, s string) {
	t.Helper()
	ctx := context.Background()
	if id, ok := p.Leader(ctx); !ok || id != to {
		t.Errorf("Leader = %d, %v; want %d", id, ok, to)
	}
	if err := c.Ping(ctx); err == nil {
		t.Errorf("session %s on the crashed primary still answers", s)
	}
	if p.LiveSessions(ctx)[s] {
		t.Errorf("session %s on the crashed primary is live", s)
	}
	if err := p.WaitServing(ctx, 5*time.Second); err != nil {
		t.Error(err)
	}
	if !p.HasStandby() {
		t.Error("no standby after the failover")
	}
	var status string
	err := p.queryRow(ctx, p.Servers[to-1], "SELECT coalesce((SELECT state FROM pg_stat_replication LIMIT 1), '')", nil, &status)
	if err != nil || status != "streaming" {
		t.Errorf("the new primary's replication: %q, %v", status, err)
	}
}

// TestPostgresFailoverNeedsStandby: a primary alone cannot fail over.
func TestPostgresFailoverNeedsStandby(t *testing.T) {
	p, _ := startTestPostgres(t, false)
	if _, _, err := p.Failover(context.Background()); err == nil || !strings.Contains(err.Error(), "needs a standby") {
		t.Errorf("Failover without a standby: %v", err)
	}
	if p.HasStandby() {
		t.Error("HasStandby of a primary alone")
	}
	if id, ok := p.Leader(context.Background()); !ok || id != 1 {
		t.Errorf("Leader = %d, %v", id, ok)
	}
}
