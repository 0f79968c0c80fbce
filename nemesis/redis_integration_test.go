package nemesis_test

import (
	"context"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// redisRun is a nemesis.Cluster over real instances, without workers: Holder
// grants the lock itself (SET on the primary) the second time it is asked, as a
// worker would right after a failover's split.
type redisRun struct {
	r     *redis.Redis
	looks int
}

var _ nemesis.ServiceHolder = (*redisRun)(nil)

func (c *redisRun) Servers() []nemesis.Server                            { return c.r.Nodes() }
func (c *redisRun) Leader(ctx context.Context) (int, bool)               { return c.r.Leader(ctx) }
func (c *redisRun) Clients() []nemesis.Client                            { return nil }
func (c *redisRun) Idle() (nemesis.Client, bool)                         { return nemesis.Client{}, false }
func (c *redisRun) Waiter() (nemesis.Client, bool)                       { return nemesis.Client{}, false }
func (c *redisRun) ServerOf(context.Context, nemesis.Client) (int, bool) { return 0, false }

func (c *redisRun) Dial(ctx context.Context, addr string, timeout time.Duration) (net.Conn, error) {
	return c.r.Dial(ctx, addr, timeout)
}

func (c *redisRun) Holder() (nemesis.Client, bool) {
	if c.looks++; c.looks == 2 {
		if _, err := c.r.Command(context.Background(), 1, "SET", "lock", "holder", "PX", "60000"); err != nil {
			return nemesis.Client{}, false
		}
		return nemesis.Client{Process: 4}, true
	}
	return nemesis.Client{}, false
}

// Service hands out the instances themselves: their abilities are the nemesis's
// RedisAdmin and SessionKiller.
func (c *redisRun) Service() any { return c.r }

// startRedis starts instances in a fresh network, all torn down at the test's end.
func startRedis(t *testing.T, s redis.RedisSettings, nodes int) *redisRun {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.RedisServer)
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.Redis, Nodes: nodes, Settings: redis.RedisConfig{RedisSettings: s}})
	return &redisRun{r: f.Service.(*redis.Redis)}
}

// get is key's value on instance id ("" when missing).
func get(t *testing.T, c *redisRun, id int, key string) string {
	t.Helper()
	v, err := c.r.Command(context.Background(), id, "GET", key)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := v.(string)
	return s
}

// TestRedisFaultsOnRealInstances: restart forgets a key without persistence and keeps
// it with AOF always; clock-jump expires a short TTL and shortens a long one; failover
// loses a grant made after the split and leaves instance 1 the primary of its replicas.
func TestRedisFaultsOnRealInstances(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range []redis.RedisPersistence{redis.PersistNone, redis.PersistAOFAlways} {
		c := startRedis(t, redis.RedisSettings{Topology: redis.RedisSingle, Persistence: p}, 1)
		if _, err := c.r.Command(ctx, 1, "SET", "lock", "v", "PX", "60000"); err != nil {
			t.Fatal(err)
		}
		if _, err := (nemesis.Restart{Target: nemesis.TargetAll}).Apply(ctx, c, rng); err != nil {
			t.Fatal(err)
		}
		if kept := get(t, c, 1, "lock") == "v"; kept != (p == redis.PersistAOFAlways) {
			t.Errorf("persistence %s: key kept across the restart: %v", p, kept)
		}
	}

	c := startRedis(t, redis.RedisSettings{Topology: redis.RedisSingle}, 1)
	_, _ = c.r.Command(ctx, 1, "SET", "short", "v", "PX", "5000")
	_, _ = c.r.Command(ctx, 1, "SET", "long", "v", "PX", "60000")
	if _, err := (nemesis.ClockJump{Target: nemesis.TargetOne, Delta: 10 * time.Second}).Apply(ctx, c, rng); err != nil {
		t.Fatal(err)
	}
	ttl, _ := c.r.Command(ctx, 1, "PTTL", "long")
	if get(t, c, 1, "short") != "" || ttl.(int64) > 50000 || ttl.(int64) < 40000 {
		t.Errorf("after a 10 s jump: short %q, long's PTTL %v (want gone, ~50000)", get(t, c, 1, "short"), ttl)
	}

	c = startRedis(t, redis.RedisSettings{Topology: redis.RedisReplicas}, 3)
	a, err := (nemesis.Failover{}).Apply(ctx, c, rng)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("failover: %v", a.Value)
	if get(t, c, 1, "lock") != "" || a.Value["holder"] != 4 {
		t.Errorf("the grant after the split survived the failover: %q, %v", get(t, c, 1, "lock"), a.Value)
	}
	if err := c.r.WaitServing(ctx, 5*time.Second); err != nil {
		t.Fatalf("replicas not linked to instance 1 again: %v", err)
	}
	if id, _ := c.r.Leader(ctx); id != 1 {
		t.Errorf("primary after the failover: s%d, want s1", id)
	}
	if _, err := c.r.Command(ctx, 1, "SET", "after", "v"); err != nil || !strings.Contains(get(t, c, 1, "after"), "v") {
		t.Errorf("instance 1 does not take writes after the failover: %v", err)
	}
}
