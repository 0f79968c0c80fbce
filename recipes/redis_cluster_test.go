package recipes

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// startRedisCluster starts three cluster-enabled redis-servers on 127.0.0.1 (each
// port free, and its cluster bus port, 10000 above it, too) and makes them one
// cluster of three primaries, server i serving the i-th third of the slots; it
// returns them once each says cluster_state:ok.
func startRedisCluster(t *testing.T) []*redisServer {
	t.Helper()
	requireRedis(t)
	var servers []*redisServer
	for range 3 {
		servers = append(servers, startClusterInstance(t))
	}
	ctx := context.Background()
	for i, s := range servers {
		s.do(t, "CLUSTER", "SET-CONFIG-EPOCH", i+1)
	}
	for _, s := range servers[1:] {
		_, port, _ := net.SplitHostPort(s.addr)
		servers[0].do(t, "CLUSTER", "MEET", "127.0.0.1", port)
	}
	for i, s := range servers {
		s.do(t, "CLUSTER", "ADDSLOTSRANGE", i*redisopt.SlotCount/3, (i+1)*redisopt.SlotCount/3-1)
	}
	for _, s := range servers {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			info, _ := s.admin.ClusterInfo(ctx).Result()
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:3") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cluster did not form: %s", s.addr, info)
			}
		}
	}
	return servers
}

// startClusterInstance starts a cluster-enabled redis-server on a free port of
// 127.0.0.1 whose cluster bus port, 10000 above it, is free too; it knows no other
// instance yet.
func startClusterInstance(t *testing.T) *redisServer {
	t.Helper()
	clusterArgs := func(dir string) []string {
		return []string{"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"), "--cluster-node-timeout", "1000"}
	}
	for {
		addr := freeAddr(t)
		_, port, _ := net.SplitHostPort(addr)
		p, _ := strconv.Atoi(port)
		bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		if err != nil {
			continue // no bus port: another
		}
		bus.Close()
		s, err := tryStartRedisAt(t, addr, clusterArgs)
		if err != nil {
			t.Fatalf("starting a cluster instance: %v", err)
		}
		return s
	}
}

// addClusterReplica starts an instance, joins it to the cluster of servers and
// makes it a replica of primary; it returns it once its link to primary is up
// and it finds the cluster ok (before that it refuses reads: CLUSTERDOWN).
func addClusterReplica(t *testing.T, servers []*redisServer, primary *redisServer) *redisServer {
	t.Helper()
	// Redis 7 waits repl-diskless-sync-delay (5 s) for more replicas before it sends
	// the first one its data: not here.
	primary.do(t, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
	replica := startClusterInstance(t)
	_, port, _ := net.SplitHostPort(replica.addr)
	servers[0].do(t, "CLUSTER", "MEET", "127.0.0.1", port)
	id, _ := primary.do(t, "CLUSTER", "MYID").(string)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if err := replica.admin.Do(context.Background(), "CLUSTER", "REPLICATE", id).Err(); err == nil {
			break // the replica has heard of the primary
		} else if time.Now().After(deadline) {
			t.Fatalf("CLUSTER REPLICATE %s: %v", id, err)
		}
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		info, _ := replica.do(t, "INFO", "replication").(string)
		state, _ := replica.admin.ClusterInfo(context.Background()).Result()
		if strings.Contains(info, "master_link_status:up") && strings.Contains(state, "cluster_state:ok") {
			return replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica's link or its view of the cluster never came up:\n%s\n%s", info, state)
		}
	}
}

// addrsOf is the servers' addresses, in order.
func addrsOf(servers []*redisServer) []string {
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.addr
	}
	return addrs
}

// slotServer is the server of startRedisCluster's that serves key's slot.
func slotServer(servers []*redisServer, key string) *redisServer {
	return servers[redisopt.KeySlot(key)*3/redisopt.SlotCount]
}

// TestRedisRecipesOnACluster: redis-lock and redislock on a Redis Cluster of three
// primaries (init's redis_cluster): the lock's key lands on the primary of its slot
// with a value naming the worker's connection there, which the session event and
// the grant name too; redis-lock's fencing counter shares the key's slot; the lock
// excludes and is handed over; the fenced counter works.
func TestRedisRecipesOnACluster(t *testing.T) {
	servers := startRedisCluster(t)
	addrs := addrsOf(servers)
	for _, c := range []struct {
		name  string
		new   Constructor
		token bool
	}{{"redis-lock", NewRedisLock, true}, {"redislock", NewRedislock, false}, {"redsync", NewRedsync, false}} {
		t.Run(c.name, func(t *testing.T) {
			key := testRedisKey(t)
			home := slotServer(servers, key)
			newRecipe := func(worker int, counter string) (Recipe, *recordedEvents) {
				ev := newRecordedEvents()
				cfg := Config{Servers: addrs, RedisCluster: true, SessionTimeout: 5 * time.Second, Path: key, Kind: workloads.Mutex,
					Permits: 1, Worker: worker, Log: newTestLog(t), Events: ev}
				if counter != "" {
					cfg.Kind, cfg.CounterPath, cfg.Fenced = workloads.Counter, counter, true
				}
				r, err := c.new(context.Background(), cfg)
				if err != nil {
					t.Fatalf("new recipe: %v", err)
				}
				t.Cleanup(func() { r.Close() })
				return r, ev
			}
			a, evA := newRecipe(1, "")
			b, _ := newRecipe(2, "")
			ga := mustAcquire(t, a, "a")
			session := lastSession(t, evA)
			if ga.Lock == nil || ga.Lock.Session != session || !strings.HasPrefix(home.get(t, key), session+":") {
				t.Errorf("grant %+v, session %s, the key on the slot's primary %s holds %q", ga.Lock, session, home.addr, home.get(t, key))
			}
			if !slices.Contains(home.clientIDs(t), session) {
				t.Errorf("the session %s is no client of the slot's primary %s: %v", session, home.addr, home.clientIDs(t))
			}
			if c.token {
				fence, err := redisopt.SameSlot(key, ":fence")
				if err != nil || home.get(t, fence) != string(ga.Token) {
					t.Errorf("the fencing counter %s on %s holds %q, the grant's token is %s (%v)", fence, home.addr, home.get(t, fence), ga.Token, err)
				}
			}
			expectTimeout(t, b, "b while a holds")
			mustRelease(t, a, "a")
			if v := home.get(t, key); v != "" {
				t.Errorf("after the release the key holds %q", v)
			}
			mustAcquire(t, b, "b after a released")
			mustRelease(t, b, "b")
			if !c.token {
				return
			}
			counter := key + "-counter"
			slotServer(servers, counter).do(t, "SET", counter, "0")
			w, _ := newRecipe(3, counter)
			mustAcquire(t, w, "the counter's holder")
			cn := w.(Counter)
			if err := cn.Write(context.Background(), 5); err != nil {
				t.Fatalf("fenced write: %v", err)
			}
			if v, err := cn.Read(context.Background()); err != nil || v != 5 {
				t.Errorf("fenced read = %d, %v; want 5", v, err)
			}
			mustRelease(t, w, "the counter's holder")
		})
	}
}

// TestRedisLockWaitOnACluster: redis-lock-wait on a cluster sends its SET and its
// WAIT 1 to the primary of the key's slot, over one connection. With no replica
// there every grant is given back and the acquire times out, leaving no key; once
// that primary has a replica, the acquire is granted and the replica has the key
// (read with READONLY) when it returns.
func TestRedisLockWaitOnACluster(t *testing.T) {
	servers := startRedisCluster(t)
	addrs := addrsOf(servers)
	key := testRedisKey(t)
	home := slotServer(servers, key)
	r, err := redisLockVariant(redisWait)(context.Background(), Config{Servers: addrs, RedisCluster: true,
		SessionTimeout: 2 * time.Second, Path: key, Kind: workloads.Mutex, Permits: 1, Worker: 1, Log: newTestLog(t), Events: newRecordedEvents()})
	if err != nil {
		t.Fatalf("new recipe: %v", err)
	}
	t.Cleanup(func() { r.Close() })
	expectTimeout(t, r, "no replica")
	if v := home.get(t, key); v != "" {
		t.Fatalf("after the timeout the key holds %q, want none", v)
	}
	replica := addClusterReplica(t, servers, home)
	g := mustAcquire(t, r, "with a replica")
	cn := replica.admin.Conn()
	defer cn.Close()
	ctx := context.Background()
	if err := cn.ReadOnly(ctx).Err(); err != nil {
		t.Fatalf("READONLY: %v", err)
	}
	if got, err := cn.Get(ctx, key).Result(); err != nil || got != g.Lock.Value {
		t.Fatalf("the replica has %q (%v) when the grant returned, want the grant's value %q", got, err, g.Lock.Value)
	}
	mustRelease(t, r, "with a replica")
}

// TestRedsyncOnAClusterDialsAgain: redsync's one pool on a cluster client, started
// while the key's primary refuses connections (killed, before its failover), dials
// again until the session timeout, as redis-lock's does, rather than failing at the
// first refused dial (a slot whose workers all fail at once breaks the run: the
// matrix's server cell on the cluster, 2026-11-30). No server: a port nothing
// listens on (three ports, as a cluster's addresses are).
func TestRedsyncOnAClusterDialsAgain(t *testing.T) {
	var addrs []string
	for range 3 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		l.Close()
	}
	var log strings.Builder
	cfg := Config{Kind: workloads.Mutex, Servers: addrs, RedisCluster: true, SessionTimeout: 500 * time.Millisecond, Path: "/zlc/t/l0", Log: &log}
	_, err := NewRedsync(context.Background(), cfg)
	if err == nil {
		t.Fatal("redsync reached a cluster on a closed port")
	}
	if !strings.Contains(log.String(), "trying again for up to 500ms") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("error %v, log:\n%s\nwant a refused dial tried again for the session timeout", err, log.String())
	}
}
