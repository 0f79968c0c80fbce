package sqldb

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// TestMariaDBPlainLoops: the plain MariaDB loop makes progress without errors,
// measures its acquires, leaves no GET_LOCK lock behind, and fails naming the server
// once it is gone.
func TestMariaDBPlainLoops(t *testing.T) {
	requireMariaDB(t)
	dir := t.TempDir()
	net := dbNet(t, dir)
	ctx := context.Background()
	m, err := StartMariaDB(ctx, net, MariaDBConfig{Dir: dir})
	if m != nil {
		defer m.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	hold := func(int) time.Duration { return time.Millisecond }
	b, err := m.PlainLoops(ctx, "zlc-plain", 3, time.Second, 4*time.Second, hold)
	t.Logf("%+v (%.0f cycles/s)", b, b.CyclesPerSecond())
	checkPlainBaseline(t, b, err, 3)
	var holder sql.NullInt64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		err = m.query(ctx, m.Servers[0], lockservice.OpTimeout, func(ctx context.Context, c *sql.Conn) error {
			return c.QueryRowContext(ctx, "SELECT IS_USED_LOCK(?)", locknames.MariaDBLockName("zlc-plain")).Scan(&holder)
		})
		if err == nil && !holder.Valid {
			break
		}
	}
	if err != nil || holder.Valid {
		t.Errorf("the lock after the loop: held by connection %v, %v", holder, err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = m.PlainLoops(ctx, "zlc-plain", 2, time.Second, 4*time.Second, hold)
	if err == nil || !strings.Contains(err.Error(), "baseline client 0: server 1 ("+m.Servers[0].ClientAddr()+")") {
		t.Errorf("server gone: %v, want an error naming server 1", err)
	}
}
