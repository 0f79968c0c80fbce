package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
)

// planRedis is the run the flags (and a run file, if yaml is not empty) make.
func planRedis(t *testing.T, yaml string, args ...string) (harnessConfigView, error) {
	t.Helper()
	fs, o := runFlags()
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if yaml != "" {
		if _, err := applyRunFile(fs, writeFile(t, "redis.yaml", yaml)); err != nil {
			t.Fatal(err)
		}
	}
	o.noteSet(fs)
	cfg, err := o.plan(context.Background(), io.Discard)
	return harnessConfigView{cfg.Service, cfg.Settings, cfg.Nodes}, err
}

// harnessConfigView is what the Redis flags decide of a run's configuration.
type harnessConfigView struct {
	Service  kind.Name
	Settings lockservice.Settings
	Nodes    int
}

func TestRedisFlagsAndRunFile(t *testing.T) {
	single := redis.RedisSettings{Topology: redis.RedisSingle, Persistence: redis.PersistNone}
	cases := []struct {
		name, yaml string
		args       []string
		want       harnessConfigView
	}{
		{"gozk", "", []string{"--recipe", "gozk"}, harnessConfigView{kind.ZooKeeper, zookeeper.DefaultSettings(), 3}},
		{"the recipe's service", "", []string{"--recipe", "redis-lock"}, harnessConfigView{kind.Redis, single, 1}},
		{"--service", "", []string{"--service", "redis", "--recipe", "redis-lock", "--redis-persistence", "aof-always"},
			harnessConfigView{kind.Redis, redis.RedisSettings{Topology: redis.RedisSingle, Persistence: redis.PersistAOFAlways}, 1}},
		{"redlock by default", "", []string{"--recipe", "redsync"},
			harnessConfigView{kind.Redis, redis.RedisSettings{Topology: redis.RedisRedlock, Persistence: redis.PersistNone}, 3}},
		{"redlock", "", []string{"--recipe", "redsync", "--redis-topology", "redlock"},
			harnessConfigView{kind.Redis, redis.RedisSettings{Topology: redis.RedisRedlock, Persistence: redis.PersistNone}, 3}},
		{"run file", "service: redis\nrecipe: redsync\nredis-topology: redlock\nnodes: 5\nredis-persistence: aof-everysec\n", nil,
			harnessConfigView{kind.Redis, redis.RedisSettings{Topology: redis.RedisRedlock, Persistence: redis.PersistAOFEverysec}, 5}},
		{"cluster", "", []string{"--recipe", "redislock", "--redis-topology", "cluster"},
			harnessConfigView{kind.Redis, redis.RedisSettings{Topology: redis.RedisCluster, Persistence: redis.PersistNone,
				Cluster: redis.ClusterSettings{NodeTimeout: time.Second}}, 6}},
		{"cluster run file", "service: redis\nrecipe: redis-lock\nredis-topology: cluster\nnodes: 3\nredis-cluster-node-timeout: 2s\n", nil,
			harnessConfigView{kind.Redis, redis.RedisSettings{Topology: redis.RedisCluster, Persistence: redis.PersistNone,
				Cluster: redis.ClusterSettings{NodeTimeout: 2 * time.Second}}, 3}},
		{"cluster by default", "", []string{"--recipe", "redsync-one-cluster"},
			harnessConfigView{kind.Redis, redis.RedisSettings{Topology: redis.RedisCluster, Persistence: redis.PersistNone,
				Cluster: redis.ClusterSettings{NodeTimeout: time.Second}}, 6}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := planRedis(t, c.yaml, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
		})
	}
	bad := map[string][]string{
		"--service: want zookeeper, redis, postgres, mariadb or etcd": {"--service", "consul", "--recipe", "redis-lock"},
		"--redis-topology: want single":                               {"--recipe", "redis-lock", "--redis-topology", "galaxy"},
		"--redis-persistence: want none":                              {"--recipe", "redis-lock", "--redis-persistence", "rdb"},
		"is a ZooKeeper recipe":                                       {"--service", "redis", "--recipe", "gozk"},
		"is a Redis recipe":                                           {"--service", "zookeeper", "--recipe", "redis-lock"},
		"single topology is one instance":                             {"--recipe", "redis-lock", "--nodes", "3"},
		"RedLock wants at least 3":                                    {"--recipe", "redsync", "--redis-topology", "redlock", "--nodes", "2"},
		"has no fencing token":                                        {"--recipe", "redsync", "--redis-topology", "redlock", "--fenced"},
		"Redis settings":                                              {"--recipe", "gozk", "--redis-topology", "redlock"},
		"Redis has no sessions":                                       {"--recipe", "redis-lock", "--nemesis", "session-expire"},
		"--connect names 2 Redis instances, --nodes says 3":           {"--recipe", "redis-lock", "--connect", "192.0.2.1:6379,192.0.2.2", "--nodes", "3"},
		"an existing Redis (connect) keeps the persistence":           {"--recipe", "redis-lock", "--connect", "192.0.2.1", "--redis-persistence", "aof-always"},
		"a loopback address cannot be reached":                        {"--recipe", "redis-lock", "--connect", "127.0.0.1:6379"},
		"kill acts on the servers":                                    {"--recipe", "redis-lock", "--connect", "192.0.2.1", "--nemesis", "kill"},
		"no plain Redis client loop":                                  {"--recipe", "redis-lock", "--baseline-processes"},
		"redlock over independent instances":                          {"--recipe", "redsync", "--redis-topology", "replicas", "--nodes", "3"},
		"--workers: want 1 to 250, got 0":                             {"--recipe", "gozk", "--workers", "0"},
		"not redlock":                                                 {"--recipe", "redis-lock", "--redis-topology", "redlock"},
		"recipe redis-py-lock has no redis cluster mode here":         {"--recipe", "redis-py-lock", "--redis-topology", "cluster"},
		"the cluster topology is 3 primaries with a replica each":     {"--recipe", "redislock", "--redis-topology", "cluster", "--nodes", "4"},
		"redis-cluster-node-timeout: a cluster setting":               {"--recipe", "redis-lock", "--redis-topology", "replicas", "--nodes", "3", "--redis-cluster-node-timeout", "2s"},
		"nemesis clock-jump: not on --redis-topology cluster":         {"--recipe", "redis-lock", "--redis-topology", "cluster", "--nemesis", "clock-jump"},
		"run it with --redis-topology cluster, not redlock":           {"--recipe", "redsync-one-cluster", "--redis-topology", "redlock"},
	}
	for want, args := range bad {
		if _, err := planRedis(t, "", args...); err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(want)) {
			t.Errorf("%v: got %v, want an error about %q", args, err, want)
		}
	}
}

// TestRedisBadInputLeavesNothing: the binary refuses a ZooKeeper recipe on Redis, a
// RedLock recipe on one instance, explore of a recipe on a topology it cannot use and
// a matrix row on a topology its recipe cannot use, before it makes anything.
func TestRedisBadInputLeavesNothing(t *testing.T) {
	store := t.TempDir()
	cases := map[string][]string{
		"is a ZooKeeper recipe":                     {"run", "--service", "redis", "--recipe", "gozk", "--store", store},
		"--redis-topology redlock":                  {"run", "--recipe", "redsync", "--redis-topology", "single", "--store", store},
		"locks one Redis primary":                   {"explore", "--recipe", "redis-lock", "--redis-topology", "redlock", "--nodes", "3", "--store", store},
		"recipe redsync: recipe redsync is RedLock": {"matrix", "--recipes", "redis-lock,redsync", "--redis-topology", "single", "--store", store},
	}
	refusedBeforeAnything(t, store, cases)
	if _, err := os.Stat(filepath.Join(store, "latest")); err == nil {
		t.Error("a run directory was made")
	}
}

// TestDatabaseBadInputLeavesNothing: the binary refuses, before it makes anything, a
// recipe asked for what its mechanism cannot do (a counter on a session lock, which
// cannot fence; a re-entrant lock table), a PostgreSQL of more than a primary and a
// standby, a failover with no standby or on MariaDB, session-expire on a database, and
// --db-keepalive on a service without one.
func TestDatabaseBadInputLeavesNothing(t *testing.T) {
	store := t.TempDir()
	cases := map[string][]string{
		"counter":                           {"run", "--recipe", "pg-advisory", "--workload", "counter", "--store", store},
		"reentrant":                         {"run", "--recipe", "pg-table", "--workload", "reentrant", "--store", store},
		"a primary and a streaming standby": {"run", "--recipe", "pg-advisory", "--nodes", "3", "--store", store},
		"it needs --nodes 2":                {"run", "--recipe", "pg-table", "--nemesis", "failover", "--store", store},
		"nothing to fail over to":           {"run", "--recipe", "mariadb-getlock", "--nemesis", "failover", "--store", store},
		"has no sessions to expire":         {"run", "--recipe", "pg-advisory", "--nemesis", "session-expire", "--store", store},
		"db-keepalive":                      {"run", "--recipe", "gozk", "--db-keepalive", "3s", "--store", store},
	}
	refusedBeforeAnything(t, store, cases)
}

// refusedBeforeAnything runs each case's command line, which must exit with an error
// that says its key, and finds the store empty after them all.
func refusedBeforeAnything(t *testing.T, store string, cases map[string][]string) {
	t.Helper()
	for want, args := range cases {
		code, stdout, stderr := zlockcheck(t, args...)
		if code != exitError || !strings.Contains(stderr, want) {
			t.Errorf("%v: exit %d, stderr %q, stdout %q; want exit %d and %q", args, code, stderr, stdout, exitError, want)
		}
	}
	if entries, err := os.ReadDir(store); err != nil || len(entries) > 0 {
		t.Errorf("the store holds %v (%v) after runs that should not start", entries, err)
	}
}
