package redis

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

func TestRedisConfRendersEachSetting(t *testing.T) {
	f := redisFiles{Conf: "/r/s2/redis.conf", Log: "/r/s2/server.log", Pid: "/r/s2/redis.pid", Data: "/r/s2/data"}
	addr := netip.MustParseAddr("10.77.1.2")
	cases := []struct {
		name    string
		s       RedisSettings
		primary netip.Addr
		want    []string
		not     []string
	}{
		{"defaults", RedisSettings{}, netip.Addr{},
			[]string{"appendonly no", `save ""`, "bind 10.77.1.2", "port 6379", "protected-mode no", "daemonize no",
				`dir "/r/s2/data"`, `logfile "/r/s2/server.log"`, `pidfile "/r/s2/redis.pid"`, "a single topology",
				"repl-diskless-sync-delay 0"},
			[]string{"appendonly yes", "replicaof"}},
		{"aof everysec", RedisSettings{Persistence: PersistAOFEverysec}, netip.Addr{},
			[]string{"appendonly yes", "appendfsync everysec", `save ""`}, []string{"appendonly no", "appendfsync always"}},
		{"aof always", RedisSettings{Persistence: PersistAOFAlways}, netip.Addr{},
			[]string{"appendonly yes", "appendfsync always"}, []string{"appendfsync everysec"}},
		{"replica", RedisSettings{Topology: RedisReplicas}, lockservice.ServerAddr(1),
			[]string{"replicaof 10.77.1.1 6379", "a replicas topology"}, []string{"min-replicas"}},
		{"sentinel's replica, guarded", RedisSettings{Topology: RedisSentinel, Guard: ReplicationGuard{MinReplicasToWrite: 1}}, lockservice.ServerAddr(1),
			[]string{"replicaof 10.77.1.1 6379", "a sentinel topology", "min-replicas-to-write 1", "min-replicas-max-lag 10"}, nil},
		{"cluster's instance, guarded", RedisSettings{Topology: RedisCluster, Guard: ReplicationGuard{MinReplicasToWrite: 1, MinReplicasMaxLag: 2 * time.Second}}, netip.Addr{},
			[]string{"cluster-enabled yes", "min-replicas-to-write 1", "min-replicas-max-lag 2"}, []string{"replicaof"}},
	}
	for _, c := range cases {
		conf := string(redisConf(c.s, 2, addr, f, c.primary))
		lines := strings.Split(conf, "\n")
		if !strings.HasPrefix(lines[0], redisMarker) {
			t.Errorf("%s: first line %q does not start with the marker", c.name, lines[0])
		}
		for _, w := range c.want {
			if !strings.Contains(conf, w) {
				t.Errorf("%s: want %q in\n%s", c.name, w, conf)
			}
		}
		for _, n := range c.not {
			if strings.Contains(conf, n) {
				t.Errorf("%s: want no %q in\n%s", c.name, n, conf)
			}
		}
	}
}

func TestRedisSettingsValidate(t *testing.T) {
	cases := []struct {
		s     RedisSettings
		nodes int
		bad   string // a word of the error, "" for none
	}{
		{RedisSettings{}, 1, ""},
		{RedisSettings{}, 3, "single topology"},
		{RedisSettings{Topology: RedisRedlock}, 3, ""},
		{RedisSettings{Topology: RedisRedlock}, 5, ""},
		{RedisSettings{Topology: RedisRedlock}, 2, "RedLock"},
		{RedisSettings{Topology: RedisReplicas}, 1, "replicas"},
		{RedisSettings{Topology: RedisReplicas}, 3, ""},
		{RedisSettings{Topology: RedisSentinel}, 3, ""},
		{RedisSettings{Topology: RedisSentinel}, 2, "at least 3"},
		{RedisSettings{Topology: RedisSentinel, Sentinel: SentinelSettings{DownAfter: 10 * time.Millisecond}}, 3, "redis-down-after"},
		{RedisSettings{Topology: RedisSentinel, Sentinel: SentinelSettings{FailoverTimeout: 500 * time.Millisecond}}, 3, "redis-failover-timeout"},
		{RedisSettings{Topology: RedisSentinel, Guard: ReplicationGuard{MinReplicasToWrite: -1}}, 3, "redis-min-replicas-to-write"},
		{RedisSettings{Topology: RedisSentinel, Guard: ReplicationGuard{MinReplicasToWrite: 1, MinReplicasMaxLag: 1500 * time.Millisecond}}, 3, "whole seconds"},
		{RedisSettings{Topology: RedisSentinel, Guard: ReplicationGuard{MinReplicasMaxLag: 2 * time.Second}}, 3, "needs --redis-min-replicas-to-write"},
		{RedisSettings{Topology: RedisSentinel, Guard: ReplicationGuard{MinReplicasToWrite: 3}}, 3, "a primary of the sentinel topology of 3 has 2"},
		{RedisSettings{Topology: RedisSingle, Guard: ReplicationGuard{MinReplicasToWrite: 1}}, 1, "has 0"},
		{RedisSettings{Topology: RedisRedlock, Guard: ReplicationGuard{MinReplicasToWrite: 1}}, 3, "has 0"},
		{RedisSettings{Topology: RedisCluster, Guard: ReplicationGuard{MinReplicasToWrite: 1}}, 3, "a primary of the cluster topology of 3 has 0"},
		{RedisSettings{Topology: RedisCluster, Guard: ReplicationGuard{MinReplicasToWrite: 1}}, 6, ""},
		{RedisSettings{Topology: RedisReplicas, Guard: ReplicationGuard{MinReplicasToWrite: 2}}, 3, ""},
		{RedisSettings{Topology: RedisReplicas, Sentinel: SentinelSettings{DownAfter: time.Second}}, 3, "sentinel settings"},
		{RedisSettings{Topology: "galaxy"}, 3, "redis-topology"},
		{RedisSettings{Persistence: "rdb"}, 1, "redis-persistence"},
		{RedisSettings{Topology: RedisRedlock}, 10, "1 to 9"},
	}
	for _, c := range cases {
		checkRefusal(t, fmt.Sprintf("%+v with %d nodes", c.s, c.nodes), c.s.validateNodes(c.nodes), c.bad)
	}
	if n := (RedisSettings{}).DefaultNodes(); n != 1 {
		t.Errorf("single's default nodes: %d", n)
	}
	if n := (RedisSettings{Topology: RedisRedlock}).DefaultNodes(); n != 3 {
		t.Errorf("redlock's default nodes: %d", n)
	}
}

// clientList is CLIENT LIST as Redis 7.0.15 writes it: a worker at 10.77.2.1 (id 7),
// a replica's link (flags S), and a worker at 10.77.2.2 (id 12).
const clientList = "id=7 addr=10.77.2.1:40112 laddr=10.77.1.1:6379 fd=8 name= age=3 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=get user=default redir=-1 resp=2\n" +
	"id=5 addr=10.77.1.2:35000 laddr=10.77.1.1:6379 fd=9 name= age=9 idle=1 flags=S db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=replconf user=default redir=-1 resp=2\n" +
	"id=12 addr=10.77.2.2:40200 laddr=10.77.1.1:6379 fd=10 name=w2 age=1 idle=0 flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=1024 rbp=0 obl=0 oll=0 omem=0 tot-mem=1800 events=r cmd=set user=default redir=-1 resp=2\n"

func TestParseClientList(t *testing.T) {
	got := parseClientList(clientList + "garbage line\n\n")
	want := []redisClient{{7, "10.77.2.1:40112", "N"}, {5, "10.77.1.2:35000", "S"}, {12, "10.77.2.2:40200", "N"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if !got[1].replication() || got[0].replication() {
		t.Errorf("replication flags read wrong: %+v", got)
	}
	w1, w2 := netip.MustParseAddr("10.77.2.1"), netip.MustParseAddr("10.77.2.2")
	id, ok := lockservice.ParseSession("0xc")
	if !ok || id != 12 {
		t.Fatalf("ParseSession(0xc) = %d, %v", id, ok)
	}
	checks := []struct {
		c     redisClient
		id    uint64
		hasID bool
		addr  netip.Addr
		want  bool
	}{
		{got[2], 12, true, w2, true},
		{got[2], 12, true, w1, false}, // the id, but another worker's address
		{got[0], 12, true, netip.Addr{}, false},
		{got[2], 12, true, netip.Addr{}, true},
		{got[0], 0, false, w1, true},
		{got[0], 0, false, netip.Addr{}, false}, // nothing to match by
	}
	for _, c := range checks {
		if m := clientMatch(c.c, c.id, c.hasID, c.addr); m != c.want {
			t.Errorf("clientMatch(%+v, %d, %v, %s) = %v", c.c, c.id, c.hasID, c.addr, m)
		}
	}
}

func TestSessionsAndOwners(t *testing.T) {
	for _, bad := range []string{"", "0x", "12", "0xzz", "x12"} {
		if _, ok := lockservice.ParseSession(bad); ok {
			t.Errorf("ParseSession(%q) accepted", bad)
		}
	}
	if s := lockservice.SessionName(255); s != "0xff" {
		t.Errorf("SessionName(255) = %q", s)
	}
	owners := map[string]string{
		"0x1f:9c2e4a":  "0x1f",
		"0x1f:a:b":     "0x1f",
		"shared-value": "shared-value",
		"":             "",
	}
	for v, want := range owners {
		if got := lockservice.OwnerOf(v); got != want {
			t.Errorf("OwnerOf(%q) = %q, want %q", v, got, want)
		}
	}
	s := func(v string) *string { return &v }
	majorities := []struct {
		values []*string
		want   string
		ok     bool
	}{
		{[]*string{s("a"), s("a"), nil}, "a", true},
		{[]*string{s("a"), s("b"), nil}, "", false},
		{[]*string{s("a"), nil, nil, nil, s("a")}, "", false},
		{[]*string{s("a"), s("a"), s("b"), nil, s("a")}, "a", true},
		{[]*string{s("a")}, "a", true},
	}
	for _, m := range majorities {
		if v, ok := majorityValue(m.values); v != m.want || ok != m.ok {
			t.Errorf("majorityValue(%d values) = %q, %v; want %q, %v", len(m.values), v, ok, m.want, m.ok)
		}
	}
}

func TestRESPReplies(t *testing.T) {
	in := "+PONG\r\n-ERR wrong\r\n:42\r\n$5\r\nhello\r\n$-1\r\n*2\r\n$1\r\na\r\n:1\r\n$0\r\n\r\n"
	r := bufio.NewReader(strings.NewReader(in))
	want := []any{"PONG", respError("ERR wrong"), int64(42), "hello", nil, []any{"a", int64(1)}, ""}
	for i, w := range want {
		got, err := readReply(r)
		if err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, w) {
			t.Errorf("reply %d: got %#v, want %#v", i, got, w)
		}
	}
	for _, bad := range []string{"$3\r\nab\r\n", "?x\r\n", "$x\r\n", "*-2\r\n", "\r\n"} {
		if _, err := readReply(bufio.NewReader(strings.NewReader(bad))); err == nil {
			t.Errorf("readReply(%q) accepted", bad)
		}
	}
	var b strings.Builder
	writeCommand(&b, []string{"GET", "k y"})
	if b.String() != "*2\r\n$3\r\nGET\r\n$3\r\nk y\r\n" {
		t.Errorf("writeCommand: %q", b.String())
	}
	info := parseInfo("# Replication\r\nrole:slave\r\nmaster_link_status:up\r\n\r\n")
	if info["role"] != "slave" || info["master_link_status"] != "up" {
		t.Errorf("parseInfo: %v", info)
	}
}

func TestWrittenByUs(t *testing.T) {
	dir := t.TempDir()
	ours, theirs := filepath.Join(dir, "ours.conf"), filepath.Join(dir, "theirs.conf")
	f := redisFiles{Conf: ours, Log: "l", Pid: "p", Data: "d"}
	if err := os.WriteFile(ours, redisConf(RedisSettings{}, 1, lockservice.ServerAddr(1), f, netip.Addr{}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(theirs, []byte("port 6379\n"+redisMarker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if !writtenByUs(ours) || writtenByUs(theirs) || writtenByUs(filepath.Join(dir, "none.conf")) {
		t.Errorf("writtenByUs: ours %v, theirs %v", writtenByUs(ours), writtenByUs(theirs))
	}
}

// TestUniqueServer: through a masquerade a client id alone names an instance only
// when exactly one instance has a client with it.
func TestUniqueServer(t *testing.T) {
	instances := []*lockservice.Member{{ID: 1}, {ID: 2}, {ID: 3}}
	all := [][]redisClient{{{ID: 8}, {ID: 9}}, {{ID: 9}}, {{ID: 10}}}
	for _, c := range []struct {
		id     uint64
		want   int
		wantOK bool
	}{{8, 1, true}, {10, 3, true}, {9, 0, false}, {11, 0, false}} {
		got, ok := uniqueServer(all, func(cl redisClient) bool { return cl.ID == c.id }, instances)
		if got != c.want || ok != c.wantOK {
			t.Errorf("id %d: got %d, %v; want %d, %v", c.id, got, ok, c.want, c.wantOK)
		}
	}
}

// TestSentinelConfRendersEachSetting: the sentinel's file opens with the marker
// cleanup looks for, watches instance 1 with a majority's quorum, and carries each
// setting (the defaults when unset).
func TestSentinelConfRendersEachSetting(t *testing.T) {
	addr := netip.MustParseAddr("10.77.1.2")
	cases := []struct {
		g    SentinelSettings
		n    int
		want []string
	}{
		{SentinelSettings{}, 3, []string{"sentinel monitor zlc-primary 10.77.1.1 6379 2", "down-after-milliseconds zlc-primary 1000",
			"failover-timeout zlc-primary 5000", "port 26379", "bind 10.77.1.2", `dir "/r/s2"`, `logfile "/r/s2/sentinel.log"`}},
		{SentinelSettings{DownAfter: 3 * time.Second, FailoverTimeout: 9 * time.Second}, 5,
			[]string{"zlc-primary 10.77.1.1 6379 3", "down-after-milliseconds zlc-primary 3000", "failover-timeout zlc-primary 9000", "Sentinel 2 of 5"}},
	}
	for _, c := range cases {
		conf := string(sentinelConf(c.g, 2, c.n, addr, lockservice.ServerAddr(1), "/r/s2"))
		if !strings.HasPrefix(conf, redisMarker) {
			t.Errorf("%+v: does not start with the marker:\n%s", c.g, conf)
		}
		for _, w := range c.want {
			if !strings.Contains(conf, w) {
				t.Errorf("%+v: want %q in\n%s", c.g, w, conf)
			}
		}
	}
}

// TestSentinelTopologyFits: the sentinel topology takes the recipes whose client finds
// the primary through sentinels (redsync too: one pool), and a user's own recipe (its
// worker answers init);
// it refuses the others, an existing deployment and SSH nodes, naming why.
func TestSentinelTopologyFits(t *testing.T) {
	s := RedisSettings{Topology: RedisSentinel}
	for _, c := range []struct {
		p   lockservice.Plan
		bad string
	}{
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Sentinel: true, Nodes: 3}, ""},
		{lockservice.Plan{Recipe: "exec", Nodes: 3}, ""},
		{lockservice.Plan{Recipe: "redisson-lock", Catalogued: true, Nodes: 3}, "no Sentinel mode"},
		{lockservice.Plan{Recipe: "redsync", Catalogued: true, RedLock: true, Sentinel: true, Nodes: 3}, ""},
		{lockservice.Plan{Recipe: "mutant-redlock-minority", Catalogued: true, RedLock: true, Nodes: 3}, "--redis-topology redlock"},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Sentinel: true, Nodes: 3, Connect: "a:26379,b:26379,c:26379"}, "--connect"},
		{lockservice.Plan{Recipe: "redis-lock", Catalogued: true, Sentinel: true, Nodes: 2}, "at least 3"},
	} {
		checkRefusal(t, fmt.Sprintf("%+v", c.p), s.Validate(c.p), c.bad)
	}
}

// TestARecipeThatWaitsForAReplicaNeedsOne: a recipe that waits for a replica after
// each grant (redis-lock-wait) runs on the replicas and sentinel topologies and on a
// cluster with replicas, and is refused on one instance or independent ones, naming
// the topologies it needs (TestClusterTopologyFits: a cluster without replicas).
func TestARecipeThatWaitsForAReplicaNeedsOne(t *testing.T) {
	p := lockservice.Plan{Recipe: "redis-lock-wait", Catalogued: true, Sentinel: true, Cluster: true, Replicas: true, Nodes: 3}
	for _, c := range []struct {
		topology RedisTopology
		nodes    int
		ok       bool
	}{{RedisReplicas, 3, true}, {RedisSentinel, 3, true}, {RedisCluster, 6, true}, {RedisSingle, 1, false}, {RedisRedlock, 3, false}} {
		p.Nodes = c.nodes
		err := RedisSettings{Topology: c.topology}.Validate(p)
		if c.ok != (err == nil) || !c.ok && !strings.Contains(err.Error(), "replicas, sentinel or cluster") {
			t.Errorf("%s: %v", c.topology, err)
		}
	}
}

// checkRefusal checks what a table case of a settings check returned: no error when
// bad is empty, else an error that says bad.
func checkRefusal(t *testing.T, what string, err error, bad string) {
	t.Helper()
	switch {
	case bad == "" && err != nil:
		t.Errorf("%s: %v", what, err)
	case bad != "" && (err == nil || !strings.Contains(err.Error(), bad)):
		t.Errorf("%s: want an error about %q, got %v", what, bad, err)
	}
}
