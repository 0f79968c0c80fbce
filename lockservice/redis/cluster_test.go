package redis

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// clusterNodesText is CLUSTER NODES as Redis 7.0.15 writes it, from instance 4's
// side, after instance 1 was killed and its replica, instance 4, promoted (epoch 7):
// instance 1 still listed failed, slotless; a slot being imported shown in brackets.
const clusterNodesText = `e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 10.77.1.4:6379@16379 myself,master - 0 1764470000000 7 connected 0-5460 [5461-<-3a6c0d]
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 10.77.1.1:6379@16379 master,fail - 1764469990000 1764469989000 1 disconnected
292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 10.77.1.2:6379@16379,host2 master - 0 1764470000500 2 connected 5461-10921
3a6c0d6c8b1f0f4e1f2d2a0e7c3c3b2f1d0e9c8b 10.77.1.3:6379@16379 master - 0 1764470000500 3 connected 10922-16383
8c2f4f5e0d3e6b7a9c1d2e3f4a5b6c7d8e9f0a1b 10.77.1.5:6379@16379 slave 292f8b365bb7edb5e285caf0b7e6ddc7265d2f4f 0 1764470000500 2 connected
9d3e5f6a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6e 10.77.1.6:6379@16379 slave 3a6c0d6c8b1f0f4e1f2d2a0e7c3c3b2f1d0e9c8b 0 1764470000500 3 connected
`

func TestParseClusterNodes(t *testing.T) {
	nodes, err := parseClusterNodes(clusterNodesText + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 6 {
		t.Fatalf("%d nodes, want 6: %+v", len(nodes), nodes)
	}
	want := clusterNode{id: "e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca", addr: "10.77.1.4:6379", flags: []string{"myself", "master"},
		epoch: 7, connected: true, slots: []slotRange{{0, 5460}}}
	if !reflect.DeepEqual(nodes[0], want) {
		t.Errorf("the promoted replica: %+v, want %+v", nodes[0], want)
	}
	if n := nodes[1]; !n.has("fail") || n.connected || len(n.slots) != 0 || n.primary != "" {
		t.Errorf("the failed primary: %+v", n)
	}
	if n := nodes[2]; n.addr != "10.77.1.2:6379" || !reflect.DeepEqual(n.slots, []slotRange{{5461, 10921}}) {
		t.Errorf("a primary announcing a hostname: %+v", n)
	}
	if n := nodes[4]; !n.has("slave") || n.primary != nodes[2].id || n.epoch != 2 {
		t.Errorf("a replica: %+v", n)
	}
	for _, bad := range []string{
		"e7d1 10.77.1.4:6379@16379 master - 0 0 7",                       // too few fields
		"e7d1 10.77.1.4@16379 master - 0 0 7 connected 0-10",             // no port
		"e7d1 10.77.1.4:6379@16379 master - 0 0 seven connected 0-10",    // epoch
		"e7d1 10.77.1.4:6379@16379 master - 0 0 7 connected 10-0",        // a range backwards
		"e7d1 10.77.1.4:6379@16379 master - 0 0 7 connected 0-16384",     // past the last slot
		"e7d1 10.77.1.4:6379@16379 master - 0 0 7 connected zero",        // not a slot
		"e7d1 10.77.1.4:6379@16379 master - 0 0 7 connected 5-",          // half a range
		"ok\ne7d1 10.77.1.4:6379@16379 master - 0 0 7 connected 0-16383", // a stray line
	} {
		if got, err := parseClusterNodes(bad); err == nil {
			t.Errorf("parseClusterNodes(%q) = %+v, want an error", bad, got)
		}
	}
}

// TestSlotOwner: a slot's primary is the one with the highest epoch that any view says
// serves it, so an old primary cut off from the others, which still claims its
// slots in its own view, loses to the replica promoted in its place.
func TestSlotOwner(t *testing.T) {
	promoted, err := parseClusterNodes(clusterNodesText)
	if err != nil {
		t.Fatal(err)
	}
	isolated, err := parseClusterNodes("67ed2db8 10.77.1.1:6379@16379 myself,master - 0 0 1 connected 0-5460\n" +
		"e7d1eecc 10.77.1.4:6379@16379 slave 67ed2db8 0 0 1 disconnected\n")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		views [][]clusterNode
		slot  int
		want  string
		ok    bool
	}{
		{"the isolated primary alone", [][]clusterNode{isolated}, 100, "10.77.1.1:6379", true},
		{"its replica promoted, seen by one view", [][]clusterNode{isolated, nil, promoted}, 100, "10.77.1.4:6379", true},
		{"the promotion seen first", [][]clusterNode{promoted, isolated}, 5460, "10.77.1.4:6379", true},
		{"another primary's slot", [][]clusterNode{isolated, promoted}, 5461, "10.77.1.2:6379", true},
		{"the last slot", [][]clusterNode{promoted}, 16383, "10.77.1.3:6379", true},
		{"a slot no view says is served", [][]clusterNode{isolated}, 5461, "", false},
		{"no view", nil, 0, "", false},
		{"views with nothing", [][]clusterNode{nil, nil}, 0, "", false},
	}
	for _, c := range cases {
		got, ok := slotOwner(c.views, c.slot)
		if got != c.want || ok != c.ok {
			t.Errorf("%s: slotOwner(slot %d) = %q, %v; want %q, %v", c.name, c.slot, got, ok, c.want, c.ok)
		}
	}
}

// TestClusterLayout: three primaries cover every slot in three ranges, in order;
// instance 3+k replicates instance k, and with three instances none is a replica.
func TestClusterLayout(t *testing.T) {
	r := primaryRanges(3)
	if want := []slotRange{{0, 5460}, {5461, 10921}, {10922, 16383}}; !reflect.DeepEqual(r, want) {
		t.Errorf("primaryRanges(3) = %v, want %v", r, want)
	}
	for id, want := range map[int]int{1: 0, 2: 0, 3: 0, 4: 1, 5: 2, 6: 3} {
		if got := replicaOf(id, 6); got != want {
			t.Errorf("replicaOf(%d, 6) = %d, want %d", id, got, want)
		}
		if got := replicaOf(id, 3); got != 0 {
			t.Errorf("replicaOf(%d, 3) = %d, want none", id, got)
		}
	}
}

// TestClusterConfAndSettings: an instance of the cluster topology has cluster-enabled,
// its state file in its directory and the node timeout (1 s unless set); the topology
// is 6 instances unless told 3, its node timeout a setting of its own, and it fails
// over by itself.
func TestClusterConfAndSettings(t *testing.T) {
	f := redisFiles{Conf: "/r/s4/redis.conf", Log: "/r/s4/server.log", Pid: "/r/s4/redis.pid", Data: "/r/s4/data", Nodes: "/r/s4/nodes.conf"}
	for _, c := range []struct {
		s    RedisSettings
		want []string
	}{
		{RedisSettings{Topology: RedisCluster}, []string{"cluster-enabled yes", `cluster-config-file "/r/s4/nodes.conf"`, "cluster-node-timeout 1000", "a cluster topology"}},
		{RedisSettings{Topology: RedisCluster, Cluster: ClusterSettings{NodeTimeout: 2500 * time.Millisecond}}, []string{"cluster-node-timeout 2500"}},
	} {
		conf := string(redisConf(c.s, 4, netip.MustParseAddr("10.77.1.4"), f, netip.Addr{}))
		if !strings.HasPrefix(conf, redisMarker) || strings.Contains(conf, "replicaof") {
			t.Errorf("%+v:\n%s", c.s, conf)
		}
		for _, w := range c.want {
			if !strings.Contains(conf, w) {
				t.Errorf("%+v: want %q in\n%s", c.s, w, conf)
			}
		}
	}
	if conf := string(redisConf(RedisSettings{Topology: RedisReplicas}, 2, lockservice.ServerAddr(2), f, lockservice.ServerAddr(1))); strings.Contains(conf, "cluster") {
		t.Errorf("a replicas topology's instance with cluster lines:\n%s", conf)
	}
	s := RedisSettings{Topology: RedisCluster}
	if n := s.DefaultNodes(); n != 6 {
		t.Errorf("the cluster's default nodes: %d, want 6", n)
	}
	if !s.FailsOverItself() || (RedisSettings{Topology: RedisReplicas}).FailsOverItself() {
		t.Error("FailsOverItself: want the cluster, not replicas")
	}
	if got, err := ParseRedisTopology("cluster"); err != nil || got != RedisCluster {
		t.Errorf("ParseRedisTopology(cluster) = %q, %v", got, err)
	}
	for _, c := range []struct {
		s     RedisSettings
		nodes int
		bad   string
	}{
		{s, 6, ""},
		{s, 3, ""},
		{RedisSettings{Topology: RedisCluster, Cluster: ClusterSettings{NodeTimeout: 300 * time.Millisecond}}, 6, ""},
		{s, 4, "--nodes 4"},
		{s, 5, "--nodes 6"},
		{s, 9, "3 primaries with a replica each"},
		{s, 1, "--nodes 3"},
		{RedisSettings{Topology: RedisCluster, Cluster: ClusterSettings{NodeTimeout: 50 * time.Millisecond}}, 6, "redis-cluster-node-timeout"},
		{RedisSettings{Topology: RedisCluster, Cluster: ClusterSettings{NodeTimeout: 1500 * time.Microsecond}}, 6, "redis-cluster-node-timeout"},
		{RedisSettings{Topology: RedisReplicas, Cluster: ClusterSettings{NodeTimeout: time.Second}}, 3, "a cluster setting"},
		{RedisSettings{Topology: RedisCluster, Sentinel: SentinelSettings{DownAfter: time.Second}}, 6, "sentinel settings"},
	} {
		checkRefusal(t, fmt.Sprintf("%+v with %d nodes", c.s, c.nodes), c.s.validateNodes(c.nodes), c.bad)
	}
}

// TestClusterTopologyFits: the cluster topology takes the recipes whose client follows
// its slots, and a user's own recipe (its worker answers init); it refuses the
// others (pointing to docs/redis.md), RedLock without a cluster mode (redsync has
// one: one pool on the cluster client), the recipe that waits for a replica of
// one primary, an existing cluster, SSH nodes and clock-jump, naming why.
func TestClusterTopologyFits(t *testing.T) {
	s := RedisSettings{Topology: RedisCluster}
	for _, c := range []struct {
		p   lockservice.Plan
		bad string
	}{
		{lockservice.Plan{Recipe: "redislock", Catalogued: true, Sentinel: true, Cluster: true, Nodes: 6}, ""},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Sentinel: true, Cluster: true, Nodes: 3, Fenced: true}, ""},
		{lockservice.Plan{Recipe: "exec", Nodes: 6, Faults: []nemesis.Class{nemesis.ClassKill, nemesis.ClassPartition}}, ""},
		{lockservice.Plan{Recipe: "redisson-lock", Catalogued: true, Sentinel: true, Nodes: 6}, "no Redis Cluster mode here"},
		{lockservice.Plan{Recipe: "redisson-lock", Catalogued: true, Sentinel: true, Nodes: 6}, "docs/redis.md"},
		{lockservice.Plan{Recipe: "redsync", Catalogued: true, RedLock: true, Sentinel: true, Cluster: true, Nodes: 6}, ""},
		{lockservice.Plan{Recipe: "redisson-redlock", Catalogued: true, RedLock: true, Nodes: 6}, "no Redis Cluster mode here"},
		{lockservice.Plan{Recipe: "redis-lock-wait", Catalogued: true, Sentinel: true, Cluster: true, Replicas: true, Nodes: 6}, ""},
		{lockservice.Plan{Recipe: "redis-lock-wait", Catalogued: true, Sentinel: true, Cluster: true, Replicas: true, Nodes: 3}, "--nodes 6"},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Cluster: true, Nodes: 3, Connect: "10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379"}, "existing Redis Cluster (--connect)"},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Cluster: true, Nodes: 6, SSH: &lockservice.SSHConfig{}}, "--ssh-nodes"},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Cluster: true, Nodes: 6, Faults: []nemesis.Class{nemesis.ClassClockJump}}, "clock-jump"},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Cluster: true, Nodes: 6, Faults: []nemesis.Class{nemesis.ClassFailover}}, "needs --redis-topology replicas, not cluster"},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Cluster: true, Nodes: 5}, "--nodes 5"},
	} {
		checkRefusal(t, fmt.Sprintf("%s %+v", c.p.Recipe, c.p), s.Validate(c.p), c.bad)
	}
	if _, p := s.Defaults(lockservice.Plan{Recipe: "redislock"}); p.Nodes != 6 {
		t.Errorf("Defaults: %d nodes, want 6", p.Nodes)
	}
}

// TestARecipeOfOneClusterRunsOnNothingElse: a RedLock over keys of one cluster
// (redsync-one-cluster) is given the cluster topology when the run names none (and
// a matrix deploys it there alone), runs on it, and is refused on every other
// topology, naming the one it needs.
func TestARecipeOfOneClusterRunsOnNothingElse(t *testing.T) {
	p := lockservice.Plan{Recipe: "redsync-one-cluster", Catalogued: true, Cluster: true, ClusterOnly: true}
	got, withNodes := RedisSettings{}.Defaults(p)
	if s := got.(RedisSettings); s.Topology != RedisCluster || withNodes.Nodes != 6 {
		t.Errorf("Defaults: topology %q of %d, want the cluster of 6", s.Topology, withNodes.Nodes)
	}
	if d := (RedisSettings{}).Deployments(p); len(d) != 1 || d[0].(RedisSettings).Topology != RedisCluster {
		t.Errorf("Deployments: %+v, want the cluster alone", d)
	}
	if d := (RedisSettings{}).Deployments(lockservice.Plan{Recipe: "redsync", Catalogued: true, RedLock: true}); len(d) != 3 {
		t.Errorf("Deployments of redsync: %+v, want single, replicas, redlock", d)
	}
	for _, c := range []struct {
		topology RedisTopology
		nodes    int
		bad      string
	}{
		{RedisCluster, 6, ""}, {RedisCluster, 3, ""},
		{RedisSingle, 1, "--redis-topology cluster, not single"}, {RedisReplicas, 3, "--redis-topology cluster, not replicas"},
		{RedisRedlock, 3, "RedLock over keys of one Redis Cluster"}, {RedisSentinel, 3, "--redis-topology cluster, not sentinel"},
	} {
		p.Nodes = c.nodes
		checkRefusal(t, string(c.topology), RedisSettings{Topology: c.topology}.Validate(p), c.bad)
	}
}
