package redis

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestRedisPlainLoops: the plain Redis loop makes progress without errors on one
// instance and on RedLock's three, leaves no key behind, measures its acquires, and
// fails naming the instance once the instances are gone.
func TestRedisPlainLoops(t *testing.T) {
	cases := []struct {
		topology RedisTopology
		nodes    int
	}{{RedisSingle, 1}, {RedisRedlock, 3}}
	for _, c := range cases {
		t.Run(string(c.topology), func(t *testing.T) {
			dir := t.TempDir()
			net := redisNet(t, dir)
			ctx := context.Background()
			r, err := StartRedis(ctx, net, RedisConfig{RedisSettings: RedisSettings{Topology: c.topology}, Nodes: c.nodes, Dir: dir})
			if r != nil {
				defer r.Close()
			}
			if err != nil {
				t.Fatal(err)
			}
			hold := func(int) time.Duration { return time.Millisecond }
			b, err := r.PlainLoops(ctx, "zlc-plain", 3, time.Second, 4*time.Second, hold)
			t.Logf("%+v (%.0f cycles/s)", b, b.CyclesPerSecond())
			switch {
			case err != nil:
				t.Fatal(err)
			case b.Goroutines != 3 || b.Duration != time.Second || b.Cycles == 0 || b.Errors != 0:
				t.Errorf("got %+v, want 3 goroutines, 1 s, cycles and no errors", b)
			case b.AcquireP50 <= 0 || b.AcquireP99 < b.AcquireP50:
				t.Errorf("acquire percentiles p50 %s, p99 %s", b.AcquireP50, b.AcquireP99)
			}
			for _, in := range r.Instances {
				if n, err := r.Command(ctx, in.ID, "EXISTS", "zlc-plain"); err != nil || n != int64(0) {
					t.Errorf("instance %d: the key after the loop: EXISTS %v, %v", in.ID, n, err)
				}
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
			_, err = r.PlainLoops(ctx, "zlc-plain", 2, time.Second, 4*time.Second, hold)
			if err == nil || !strings.Contains(err.Error(), "baseline client 0: instance "+r.Instances[0].ClientAddr()) {
				t.Errorf("instances gone: %v, want an error naming instance 1", err)
			}
		})
	}
}
