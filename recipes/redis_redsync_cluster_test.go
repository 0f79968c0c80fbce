package recipes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	redsyncredis "github.com/go-redsync/redsync/v4/redis"

	"github.com/zlockcheck/zlockcheck/workloads"
	"github.com/zlockcheck/zlockcheck/workloads/locknames"
)

// keyLogConn is a redsync connection that records its commands and their keys.
type keyLogConn struct{ sent *[]string }

func (c keyLogConn) note(op, key string) { *c.sent = append(*c.sent, op+" "+key) }

func (c keyLogConn) Get(name string) (string, error)  { c.note("GET", name); return "", nil }
func (c keyLogConn) Set(name, _ string) (bool, error) { c.note("SET", name); return true, nil }
func (c keyLogConn) SetNX(name, _ string, _ time.Duration) (bool, error) {
	c.note("SETNX", name)
	return true, nil
}
func (c keyLogConn) PTTL(name string) (time.Duration, error) { c.note("PTTL", name); return 0, nil }
func (c keyLogConn) Eval(_ *redsyncredis.Script, keysAndArgs ...any) (any, error) {
	c.note("EVAL", strings.TrimSpace(fmt.Sprintln(keysAndArgs...)))
	return int64(1), nil
}
func (c keyLogConn) ScriptLoad(*redsyncredis.Script) error { return nil }
func (c keyLogConn) Close() error                          { return nil }

// keyLogPool hands out keyLogConns that record into sent.
type keyLogPool struct{ sent *[]string }

func (p keyLogPool) Get(context.Context) (redsyncredis.Conn, error) { return keyLogConn(p), nil }

// TestRenamedPool: every command of a renamed pool's connection goes to its own
// key (a script's keys renamed, its other arguments not); a command on another key
// is refused, not sent.
func TestRenamedPool(t *testing.T) {
	var keys []string
	pool := renamedPool{pool: keyLogPool{&keys}, from: "/l0", to: "{lock2}/l0"}
	c, err := pool.Get(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Get("/l0")
	c.Set("/l0", "v")
	c.SetNX("/l0", "v", time.Second)
	c.PTTL("/l0")
	c.Eval(redsyncredis.NewScript(1, "return 1", ""), "/l0", "/l0", 5)
	want := []string{"GET {lock2}/l0", "SET {lock2}/l0", "SETNX {lock2}/l0", "PTTL {lock2}/l0", "EVAL {lock2}/l0 /l0 5"}
	if !slices.Equal(keys, want) {
		t.Errorf("commands sent %q, want %q", keys, want)
	}
	keys = nil
	_, errGet := c.Get("/other")
	_, errNX := c.SetNX("/other", "v", time.Second)
	_, errEval := c.Eval(redsyncredis.NewScript(1, "return 1", ""), "/other", "v")
	_, errCount := c.Eval(redsyncredis.NewScript(2, "return 1", ""), "/l0")
	for _, err := range []error{errGet, errNX, errEval} {
		if !errors.Is(err, errOtherKey) {
			t.Errorf("a command on another key: %v, want errOtherKey", err)
		}
	}
	if errCount == nil || len(keys) != 0 {
		t.Errorf("a script of 2 keys given 1 argument: %v; sent %q, want nothing sent", errCount, keys)
	}
}

// TestRedsyncOneClusterRefuses: redsync-one-cluster refuses an init that names no
// Redis Cluster (pointing to the topology and to redsync), a fenced init and a
// counter, before it dials anything.
func TestRedsyncOneClusterRefuses(t *testing.T) {
	for _, c := range []struct {
		what string
		cfg  Config
		want string
	}{
		{"no cluster", Config{Servers: []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}}, "--redis-topology cluster"},
		{"no cluster", Config{Servers: []string{"127.0.0.1:1"}}, "over independent instances run redsync"},
		{"fenced", Config{Servers: []string{"127.0.0.1:1"}, RedisCluster: true, Fenced: true}, "cannot fence"},
		{"counter", Config{Servers: []string{"127.0.0.1:1"}, RedisCluster: true, Kind: workloads.Counter}, "does not support kind counter"},
	} {
		c.cfg.SessionTimeout, c.cfg.Path, c.cfg.Permits = time.Second, "/zlc-test/refuse/l0", 1
		if c.cfg.Kind == "" {
			c.cfg.Kind = workloads.Mutex
		}
		r, err := NewRedsyncOneCluster(context.Background(), c.cfg)
		if typ, msg := Classify(err); r != nil || typ != workloads.ReplyFail || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s %q, want fail saying %q", c.what, typ, msg, c.want)
		}
	}
}

// TestRedsyncOneClusterLosesItsQuorumWithOnePrimary: on a Redis Cluster of three
// primaries, redsync-one-cluster keeps the lock in its three keys, each on the
// primary of its slot (lock1 and lock4 on the third, lock2 on the second), its
// grant naming them and its value its connection to the first key's primary; it
// excludes, and its release deletes all three. Then the misuse: the third primary
// loses its keys (as when the cluster promotes a replica that never got them),
// and another client is granted while the holder holds, where redsync over three
// independent instances, one of which loses its key, keeps the other out.
func TestRedsyncOneClusterLosesItsQuorumWithOnePrimary(t *testing.T) {
	servers := startRedisCluster(t)
	addrs := addrsOf(servers)
	path := testRedisKey(t)
	keys := locknames.ClusterRedLockKeys(path)
	newRecipe := func(worker int) (Recipe, *recordedEvents) {
		ev := newRecordedEvents()
		r, err := NewRedsyncOneCluster(context.Background(), Config{Servers: addrs, RedisCluster: true, SessionTimeout: 5 * time.Second,
			Path: path, Kind: workloads.Mutex, Permits: 1, Worker: worker, Log: newTestLog(t), Events: ev})
		if err != nil {
			t.Fatalf("new recipe: %v", err)
		}
		t.Cleanup(func() { r.Close() })
		return r, ev
	}
	a, evA := newRecipe(1)
	b, _ := newRecipe(2)
	ga := mustAcquire(t, a, "a")
	session := lastSession(t, evA)
	if ga.Lock == nil || !slices.Equal(ga.Lock.Keys, keys) || ga.Lock.Session != session || !strings.HasPrefix(ga.Lock.Value, session+":") {
		t.Fatalf("grant %+v, session %s: want the keys %q and a value naming the session", ga.Lock, session, keys)
	}
	// With WithFailFast the grant comes once two keys are set; the third request is
	// cut off, and may land later or never: read the keys once they stop changing.
	vals := settle(t, func() []string { return clusterValues(t, servers, keys) })
	held := 0
	for i, k := range keys {
		if home := slotServer(servers, k); home != servers[[]int{2, 1, 2}[i]] {
			t.Errorf("key %s on %s, want server %d", k, home.addr, []int{2, 1, 2}[i])
		}
		if vals[i] == ga.Lock.Value {
			held++
		}
	}
	if held < 2 {
		t.Errorf("the keys hold %q, want the grant's value %q in two at least", vals, ga.Lock.Value)
	}
	if !slices.Contains(servers[2].clientIDs(t), session) {
		t.Errorf("the session %s is no client of the first key's primary %s", session, servers[2].addr)
	}
	expectTimeout(t, b, "b while a holds")
	mustRelease(t, a, "a")
	// The release returns once a majority deleted (WithFailFast): the last
	// request may be cut off, and its key keep a's value until its TTL.
	var left []string
	for _, k := range keys {
		if v := slotServer(servers, k).get(t, k); v != "" {
			left = append(left, k+" = "+v)
		}
	}
	if len(left) > 1 {
		t.Errorf("after the release %d keys hold a value: %q", len(left), left)
	}
	mustAcquire(t, a, "a again")
	// A DEL before a write cut off lands would be undone by it.
	settle(t, func() []string { return clusterValues(t, servers, keys) })
	servers[2].do(t, "DEL", keys[0])
	servers[2].do(t, "DEL", keys[2])
	mustAcquire(t, b, "b once the third primary lost a's two keys (a still holds)")

	// Independent instances: one that loses the key leaves the holder two of three,
	// so long as all three had it (WithFailFast may leave one unset: RedLock's own
	// weakness, not this test's point; such a grant is given back and asked again).
	instances, independent := startRedises(t, 3)
	c, _ := newTestRedisRecipe(t, NewRedsync, independent, path, 5*time.Second, 3)
	d, _ := newTestRedisRecipe(t, NewRedsync, independent, path, 5*time.Second, 4)
	read := func() []string {
		var out []string
		for _, in := range instances {
			out = append(out, in.get(t, path))
		}
		return out
	}
	for try := 1; ; try++ {
		gc := mustAcquire(t, c, "redsync c")
		if v := settle(t, read); v[0] == gc.Lock.Value && v[1] == gc.Lock.Value && v[2] == gc.Lock.Value {
			break
		}
		if try == 5 {
			t.Fatal("redsync c never had its key on all three instances in 5 grants")
		}
		mustRelease(t, c, "redsync c, one instance short")
		settle(t, read)
	}
	instances[0].do(t, "DEL", path)
	expectTimeout(t, d, "redsync d once one independent instance lost c's key")
}

// clusterValues reads keys, each on the primary of its slot among servers.
func clusterValues(t *testing.T, servers []*redisServer, keys []string) []string {
	var out []string
	for _, k := range keys {
		out = append(out, slotServer(servers, k).get(t, k))
	}
	return out
}

// settle reads values until two reads 100 ms apart agree (a write a client cut off
// has landed, or will not), for up to 3 s, and returns them.
func settle(t *testing.T, read func() []string) []string {
	t.Helper()
	last := read()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		now := read()
		if slices.Equal(now, last) {
			return now
		}
		last = now
	}
	t.Fatalf("the keys did not settle in 3 s: %q", last)
	return nil
}
