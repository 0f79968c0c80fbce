package recipes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// newTestRedisCounter builds redis-lock for the counter workload (fenced or not).
func newTestRedisCounter(t *testing.T, addr, key string, fenced bool, worker int) *redisLock {
	t.Helper()
	cfg := Config{Servers: []string{addr}, SessionTimeout: 5 * time.Second, Path: key, Kind: workloads.Counter, Permits: 1,
		Worker: worker, CounterPath: key + "/counter", Fenced: fenced, Log: newTestLog(t), Events: newRecordedEvents()}
	r, err := NewRedisLock(context.Background(), cfg)
	if err != nil {
		t.Fatalf("new recipe: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	return r.(*redisLock)
}

// TestRedisCounter: unfenced, the counter is a plain key (0 when missing); fenced, A's
// write after B read with a newer token is refused (ErrFenced), B's goes through, and
// an access with no hold is refused.
func TestRedisCounter(t *testing.T) {
	s := startRedis(t)
	ctx := context.Background()
	t.Run("unfenced", func(t *testing.T) {
		key := testRedisKey(t)
		r := newTestRedisCounter(t, s.addr, key, false, 1)
		mustAcquire(t, r, "r")
		if v, err := r.Read(ctx); err != nil || v != 0 {
			t.Fatalf("read: %d, %v; want 0", v, err)
		}
		if err := r.Write(ctx, 5); err != nil {
			t.Fatal(err)
		}
		if v, err := r.Read(ctx); err != nil || v != 5 || s.get(t, key+"/counter") != "5" {
			t.Fatalf("read: %d, %v; want 5", v, err)
		}
	})
	t.Run("fenced", func(t *testing.T) {
		key := testRedisKey(t)
		a := newTestRedisCounter(t, s.addr, key, true, 1)
		b := newTestRedisCounter(t, s.addr, key, true, 2)
		if _, err := a.Read(ctx); !errors.Is(err, ErrFenced) {
			t.Fatalf("read with no hold: %v, want fenced", err)
		}
		mustAcquire(t, a, "a")
		if _, err := a.Read(ctx); err != nil {
			t.Fatal(err)
		}
		a.ext.halt() // a is as good as paused: its key goes, b locks
		a.ext = nil
		s.do(t, "DEL", key)
		mustAcquire(t, b, "b")
		if _, err := b.Read(ctx); err != nil {
			t.Fatal(err)
		}
		err := a.Write(ctx, 1)
		expectOutcome(t, "a's write after b's read", err, workloads.ReplyFail, "")
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("a's write: %v, want fenced", err)
		}
		if err := b.Write(ctx, 1); err != nil {
			t.Fatalf("b's write: %v", err)
		}
		if got := s.get(t, key+"/counter"); got != "1" {
			t.Fatalf("the counter is %q, want 1", got)
		}
	})
}
