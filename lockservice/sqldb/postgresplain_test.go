package sqldb

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// The plain database loops start real servers: run them under
// flock /tmp/zlc-ensemble.lock go test -run PlainLoops ./lockservice

// TestPostgresPlainLoops: the plain PostgreSQL loop makes progress without errors,
// measures its acquires, leaves no advisory lock behind, and fails naming the server
// once it is gone.
func TestPostgresPlainLoops(t *testing.T) {
	requirePostgres(t)
	dir := dbTestDir(t)
	net := dbNet(t, dir)
	ctx := context.Background()
	p, err := StartPostgres(ctx, net, PostgresConfig{Dir: dir})
	if p != nil {
		defer p.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	hold := func(int) time.Duration { return time.Millisecond }
	b, err := p.PlainLoops(ctx, "zlc-plain", 3, time.Second, 4*time.Second, hold)
	t.Logf("%+v (%.0f cycles/s)", b, b.CyclesPerSecond())
	checkPlainBaseline(t, b, err, 3)
	var left int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		err = p.queryRow(ctx, p.Servers[0], "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'", nil, &left)
		if err == nil && left == 0 {
			break
		}
	}
	if err != nil || left != 0 {
		t.Errorf("advisory locks after the loop: %d, %v", left, err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = p.PlainLoops(ctx, "zlc-plain", 2, time.Second, 4*time.Second, hold)
	if err == nil || !strings.Contains(err.Error(), "baseline client 0: server 1 ("+p.Servers[0].ClientAddr()+")") {
		t.Errorf("server gone: %v, want an error naming server 1", err)
	}
}

// checkPlainBaseline fails t unless a plain loop of n goroutines ran for a second
// without error, completed cycles and measured its acquires.
func checkPlainBaseline(t *testing.T, b lockservice.Baseline, err error, n int) {
	t.Helper()
	switch {
	case err != nil:
		t.Fatal(err)
	case b.Goroutines != n || b.Duration != time.Second || b.Cycles == 0 || b.Errors != 0:
		t.Errorf("got %+v, want %d goroutines, 1 s, cycles and no errors", b, n)
	case b.AcquireP50 <= 0 || b.AcquireP99 < b.AcquireP50:
		t.Errorf("acquire percentiles p50 %s, p99 %s", b.AcquireP50, b.AcquireP99)
	}
}
