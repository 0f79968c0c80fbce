package redis

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/nemesis"
)

// faultTarget is the nemesis's view of a Redis the test started: its servers and
// leader, no workers (a test adapter; the harness's cluster is the real one).
type faultTarget struct{ *Redis }

var _ nemesis.Cluster = faultTarget{}

func (c faultTarget) Servers() []nemesis.Server                            { return c.Nodes() }
func (c faultTarget) Clients() []nemesis.Client                            { return nil }
func (c faultTarget) Holder() (nemesis.Client, bool)                       { return nemesis.Client{}, false }
func (c faultTarget) Idle() (nemesis.Client, bool)                         { return nemesis.Client{}, false }
func (c faultTarget) Waiter() (nemesis.Client, bool)                       { return nemesis.Client{}, false }
func (c faultTarget) Service() any                                         { return c.Redis }
func (c faultTarget) ServerOf(context.Context, nemesis.Client) (int, bool) { return 0, false }
func (c faultTarget) Dial(context.Context, string, time.Duration) (net.Conn, error) {
	return nil, errors.New("no dialling in this test")
}

// TestSentinelsCutApartOnTheirPort: a coordination partition isolating the primary's
// namespace cuts its sentinel off from the two others, which find it down (SENTINEL
// SENTINELS flags it s_down), while the primary's replication goes on (each
// replica's link stays up, and a write reaches them); undone, the sentinels see it
// again. A plain partition would have cut the replicas' links too.
func TestSentinelsCutApartOnTheirPort(t *testing.T) {
	dir := t.TempDir()
	net := redisNet(t, dir)
	ctx := context.Background()
	r, err := StartRedis(ctx, net, RedisConfig{RedisSettings: RedisSettings{Topology: RedisSentinel}, Nodes: 3, Dir: dir})
	if r != nil {
		defer r.Close()
	}
	if err != nil {
		t.Fatal(err)
	}
	a, err := nemesis.Partition{Shape: nemesis.IsolateLeader, Coordination: true}.Apply(ctx, faultTarget{r}, rand.New(rand.NewPCG(1, 2)))
	defer a.Undo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if a.Value["fault"] != string(nemesis.ClassCoordinationPartition) || a.Value["leader"] != "s1" {
		t.Fatalf("applied %v, want a coordination partition isolating s1", a.Value)
	}
	if !waitFor(10*time.Second, func() bool { return sentinelFlagged(ctx, r, 2, 1, "s_down") }) {
		t.Fatalf("sentinel 2 never found sentinel 1 down under the partition (%v)", a.Value)
	}
	if _, err := r.Command(ctx, 1, "SET", "zlc-coordination", "1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{2, 3} {
		if !waitFor(5*time.Second, func() bool {
			m, err := r.info(ctx, r.Instances[id-1], "replication")
			v, _ := r.Command(ctx, id, "GET", "zlc-coordination")
			return err == nil && m["master_link_status"] == "up" && v == "1"
		}) {
			t.Errorf("replica s%d lost its link or the write under a partition of the sentinels' port only", id)
		}
	}
	if err := a.Undo(ctx); err != nil {
		t.Fatal(err)
	}
	if !waitFor(10*time.Second, func() bool { return !sentinelFlagged(ctx, r, 2, 1, "s_down") }) {
		t.Errorf("sentinel 2 still finds sentinel 1 down after the undo")
	}
}

// sentinelFlagged reports whether sentinel `of` flags sentinel `about` (the one
// beside instance `about`) with flag, per SENTINEL SENTINELS.
func sentinelFlagged(ctx context.Context, r *Redis, of, about int, flag string) bool {
	out, err := r.call(ctx, r.SentinelNodes[of-1], []string{"SENTINEL", "SENTINELS", SentinelMaster})
	if err != nil {
		return false
	}
	others, err := replyArray(out[0])
	if err != nil {
		return false
	}
	ip := r.Instances[about-1].Host.Addr().String()
	for _, o := range others {
		m, err := replyFields(o)
		if err == nil && m["ip"] == ip {
			return slices.Contains(strings.Split(m["flags"], ","), flag)
		}
	}
	return false
}

// waitFor polls ok every 100 ms until it holds or within passes.
func waitFor(within time.Duration, ok func() bool) bool {
	for deadline := time.Now().Add(within); ; time.Sleep(100 * time.Millisecond) {
		if ok() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
