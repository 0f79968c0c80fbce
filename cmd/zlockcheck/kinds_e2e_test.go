package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// requireRedis skips tests that need root, namespaces and Debian's redis-server
// (fails under ZLC_REQUIRE_INTEGRATION, as requireIntegration does).
func requireRedis(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.RedisServer)
}

// requireDatabases skips tests that need root, namespaces, Debian's postgresql and
// mariadb-server (fails under ZLC_REQUIRE_INTEGRATION, as requireIntegration does).
func requireDatabases(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.NFTables, testenv.PostgreSQL, testenv.MariaDB)
}

// requireJVM skips tests that need root, namespaces, ZooKeeper and a JDK (fails
// under ZLC_REQUIRE_INTEGRATION, as requireIntegration does).
func requireEtcd(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.NFTables, testenv.Etcd)
}

func requireJVM(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.ZooKeeper, testenv.JDK)
}

// requireDatabasesJVM skips tests that need what requireDatabases does and a JDK.
func requireDatabasesJVM(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.NFTables, testenv.PostgreSQL, testenv.MariaDB, testenv.JDK)
}

// requireRedisJVM skips tests that need root, namespaces, Redis and a JDK (fails
// under ZLC_REQUIRE_INTEGRATION, as requireIntegration does).
func requireRedisJVM(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.RedisServer, testenv.JDK)
}

// hasCheck reports whether results hold a check of key with verdict.
func hasCheck(res map[string]any, key, verdict string) bool {
	checks, _ := res["checks"].([]any)
	for _, c := range checks {
		m, _ := c.(map[string]any)
		if m["key"] == key && m["verdict"] == verdict {
			return true
		}
	}
	return false
}

// kindRun is one run of TestEveryKindRunsValid.
type kindRun struct {
	name    string
	require func(*testing.T)
	args    []string
	// service and settings are what config.json must record: the service, and a
	// piece of its settings section ("": none asked).
	service, settings string
	// log is what the run's log (or its report) says serves; files are what the run directory
	// must hold.
	log   string
	files []string
	// closed: the store is root's alone (mode 0700), which the postgres account
	// cannot enter; its servers keep their files in a directory of their own.
	closed bool
	// parallel: runs side by side with the other parallel ones (independent
	// namespaces and servers).
	parallel bool
	// long: run by make test-long only (a JVM recipe's five JVMs; make test keeps
	// its conformance).
	long bool
	// etcdClient, when set, is the etcd client whose build of zlockcheck (make
	// build's, lockservice/etcd/clients) the run's Go workers need: the test builds
	// it beside its binary.
	etcdClient string
}

// TestEveryKindRunsValid: one run per kind and deployment, each under faults that
// matter to it and that no correct recipe overlaps under, each valid with at least 20
// grants and its liveness judged through the lock's own entries; config.json
// records the service and its settings; the log says what served; nothing of the
// run is left. The runs go side by side, each in its own namespaces with its own
// servers.
// (A server-ended session, connection-kill, makes an honest unfenced overlap on the
// databases: docs/databases.md.)
func TestEveryKindRunsValid(t *testing.T) {
	redisFiles := []string{"servers/s1/server.log", "servers/s1/redis.conf"}
	runs := []kindRun{
		{name: "redis-lock", require: requireRedis, args: []string{"--service", "redis", "--recipe", "redis-lock"},
			service: "redis", settings: `"topology": "single"`, log: "redis 7.", files: redisFiles, parallel: true},
		{name: "redsync", require: requireRedis, args: []string{"--recipe", "redsync"},
			service: "redis", settings: `"topology": "redlock"`, log: "redlock topology of 3", files: append(redisFiles, "servers/s3/redis.conf"), parallel: true},
		{name: "redislock-replicas", require: requireRedis,
			args:    []string{"--service", "redis", "--redis-topology", "replicas", "--redis-persistence", "aof-always", "--recipe", "redislock"},
			service: "redis", settings: `"persistence": "aof-always"`, log: "replicas topology", files: append(redisFiles, "servers/s2/redis.conf", "servers/s1/data/appendonlydir"), parallel: true},
		// Sentinels beside the instances; the workers find the primary through them
		// (go-redis's failover client). No faults: a primary killed without
		// persistence loses the lock (docs/redis.md, Sentinel).
		{name: "redislock-sentinel", require: requireRedis,
			args:    []string{"--service", "redis", "--redis-topology", "sentinel", "--recipe", "redislock"},
			service: "redis", settings: `"topology": "sentinel"`, log: "sentinel topology of 3", files: append(redisFiles, "servers/s2/sentinel.conf", "servers/s3/sentinel.log"), long: true},
		// A Redis Cluster of 3 primaries and a replica of each, formed by the tool;
		// the workers' go-redis cluster client sends the lock's key to the primary
		// of its slot, and the harness reads it there. No faults: the cluster's own
		// failovers are not in the history yet (docs/redis.md, Redis Cluster).
		{name: "redislock-cluster", require: requireRedis,
			args:    []string{"--service", "redis", "--redis-topology", "cluster", "--recipe", "redislock"},
			service: "redis", settings: `"topology": "cluster"`, log: "cluster topology of 6", files: append(redisFiles, "servers/s6/redis.conf", "servers/s4/nodes.conf"), long: true},
		{name: "pg-table", require: requireDatabases, args: []string{"--recipe", "pg-table", "--nemesis", "reply-loss", "--nemesis-targets", "idle"},
			service: "postgres", log: "PostgreSQL 15", parallel: true},
		{name: "pg-table-expiry", require: requireDatabases,
			args:    []string{"--recipe", "pg-table-expiry", "--nemesis", "client-partition", "--nemesis-targets", "holder", "--nodes", "2", "--db-keepalive", "30s"},
			service: "postgres", settings: `"keepalive_ns": 30000000000`, log: "PostgreSQL 15", parallel: true},
		{name: "pg-advisory", require: requireDatabases, args: []string{"--recipe", "pg-advisory", "--nemesis", "client-partition,kill", "--nemesis-targets", "holder"},
			service: "postgres", log: "PostgreSQL 15", closed: true, parallel: true},
		{name: "mariadb-getlock", require: requireDatabases, args: []string{"--recipe", "mariadb-getlock", "--nemesis", "client-kill,kill", "--nemesis-targets", "holder"},
			service: "mariadb", log: "MariaDB 10.11", parallel: true},
		// redis-py's Lock through the Python workers' protocol, in the virtual
		// environment of PyPI's pins (the cache).
		{name: "redis-py-lock", require: requireRedis, args: []string{"--service", "redis", "--recipe", "redis-py-lock"},
			service: "redis", settings: `"topology": "single"`, log: "redis-py 8.1.0 (PyPI)", files: redisFiles, parallel: true},
		{name: "python-redis-lock", require: requireRedis, args: []string{"--service", "redis", "--recipe", "python-redis-lock"},
			service: "redis", settings: `"topology": "single"`, log: "python-redis-lock 4.0.1 (PyPI)", files: redisFiles, long: true},
		{name: "pottery-redlock", require: requireRedis, args: []string{"--recipe", "pottery-redlock", "--nemesis", "kill", "--nemesis-targets", "minority"},
			service: "redis", settings: `"topology": "redlock"`, log: "pottery 3.0.1 (PyPI)", files: append(redisFiles, "servers/s3/redis.conf"), long: true},
		{name: "pals-lock", require: requireDatabases, args: []string{"--recipe", "pals-lock", "--workload", "rwlock", "--nemesis", "reply-loss"},
			service: "postgres", log: "pals 0.4.0 (PyPI)", long: true},
		// redis-semaphore's Mutex through the Node workers' protocol, with the
		// node_modules npm ci made in the cache; @sesamecare-oss/redlock on RedLock's
		// three independent instances behind the same protocol.
		{name: "redis-semaphore-mutex", require: requireRedis, args: []string{"--service", "redis", "--recipe", "redis-semaphore-mutex"},
			service: "redis", settings: `"topology": "single"`, log: "redis-semaphore 5.8.0 (npm)", files: redisFiles, parallel: true},
		{name: "node-redlock", require: requireRedis, args: []string{"--recipe", "node-redlock"},
			service: "redis", settings: `"topology": "redlock"`, log: "@sesamecare-oss/redlock 1.4.0 (npm)", files: append(redisFiles, "servers/s3/redis.conf"), long: true},
		// Redisson's RLock through the JVM worker (Maven Central, the cache); alone,
		// for its five JVMs. Its lock is a hash the harness reads by its field.
		{name: "redisson-lock", require: requireRedisJVM, args: []string{"--service", "redis", "--recipe", "redisson-lock"},
			service: "redis", settings: `"topology": "single"`, log: "Redisson 3.52.0 (Maven Central)", files: redisFiles, long: true},
		// Spring Integration's JDBC registry through the JVM worker, on PostgreSQL
		// (its table zlc_int_LOCK made by the workers, gone with the servers).
		{name: "spring-jdbc-postgres", require: requireDatabasesJVM, args: []string{"--recipe", "spring-jdbc-postgres", "--nemesis", "client-kill", "--nemesis-targets", "holder"},
			service: "postgres", log: "Spring Integration 7.1.2 (Maven Central)", long: true},
		// Curator's current release on ZooKeeper's, both from Maven Central (make setup
		// fetched them into the cache); alone, for its five JVM workers. A minority
		// killed at a time: after all three servers killed at once, a Curator client
		// may be told its session expired as the final phase begins, and answer its
		// final acquire info (docs/recipes.md, Curator 5.9).
		// Kazoo's current release (PyPI) through the same worker as Debian's 2.8:
		// the read-write lock, whose readers 2.8 made wait for writers queued after
		// them.
		{name: "kazoo-2.11-rwlock", require: requireJVM, args: []string{"--recipe", "kazoo-2.11-rwlock", "--nemesis", "kill,partition"},
			service: "zookeeper", log: "Kazoo 2.11.0 (PyPI)", long: true},
		{name: "curator-5.9-on-zookeeper-3.9.5", require: requireJVM,
			args: []string{"--recipe", "curator-5.9-mutex", "--zk-version", "3.9.5", "--nemesis", "kill",
				"--nemesis-targets", "minority", "--session-timeout", "4s"},
			service: "zookeeper", settings: `"zk_version": "3.9.5"`, log: "ZooKeeper 3.9.5-", long: true},
		// etcd's Mutex on three of Debian's members under member faults; on a
		// release built from the Go module proxy, fenced, its leases revoked under
		// their holders (the fenced counter holds, with the create revision as the
		// token).
		{name: "etcd-mutex", require: requireEtcd, args: []string{"--recipe", "etcd-mutex", "--nemesis", "kill,pause,partition"},
			service: "etcd", log: "etcd 3.4.23 (Debian's etcd-server), 3 members", files: []string{"servers/s1/server.log", "servers/s3/etcd.conf.yml"}},
		// Python etcd3's Lock through the Python workers' protocol, in the virtual
		// environment of PyPI's pins (its sdist built there), under member faults.
		{name: "etcd-python-lock", require: requireEtcd, args: []string{"--recipe", "etcd-python-lock", "--nemesis", "kill,pause,partition"},
			service: "etcd", log: "etcd3 0.12.0 (PyPI)", long: true},
		{name: "etcd-mutex-3.6-fenced", require: requireEtcd,
			args:    []string{"--recipe", "etcd-mutex", "--etcd-version", "3.6.16", "--workload", "counter", "--fenced", "--nemesis", "session-expire,client-pause", "--nemesis-targets", "holder"},
			service: "etcd", settings: `"etcd_version": "3.6.16"`, log: "etcd 3.6.16 (release 3.6.16)", long: true},
		// On release 3.5's members, its workers are a build of zlockcheck against
		// the 3.5 client (the matching one, by default), and the report says so.
		{name: "etcd-mutex-3.5-matching-client", require: requireEtcd,
			args:    []string{"--recipe", "etcd-mutex", "--etcd-version", "3.5.35", "--nemesis", "kill,partition"},
			service: "etcd", settings: `"etcd_version": "3.5.35"`, log: "etcd client v3.5.35", long: true, etcdClient: "3.5.35"},
	}
	for _, c := range runs {
		t.Run(c.name, func(t *testing.T) {
			c.require(t)
			if c.long {
				testenv.Long(t, c.name+" runs another library behind a worker protocol make test runs end to end (redis-py-lock's, redis-semaphore-mutex's, or the JVM workers' conformance)")
			}
			if c.parallel {
				t.Parallel()
			}
			if c.etcdClient != "" {
				buildEtcdClient(t, c.etcdClient)
			}
			checkKindRun(t, c)
		})
	}
}

// buildEtcdClient builds zlockcheck against etcd client v beside the test's binary,
// as make build does beside bin/zlockcheck.
func buildEtcdClient(t *testing.T, v string) {
	t.Helper()
	out, err := exec.Command("go", "build", "-modfile", filepath.Join("..", "..", "lockservice", "etcd", "clients", "v"+v, "client.mod"),
		"-o", filepath.Join(filepath.Dir(binary), "zlockcheck-etcd-client-v"+v), ".").CombinedOutput()
	if err != nil {
		t.Fatalf("build zlockcheck against etcd client %s: %v\n%s", v, err, out)
	}
}

// checkKindRun makes run c and checks what TestEveryKindRunsValid asks of it.
func checkKindRun(t *testing.T, c kindRun) {
	store := keptIfFailed(t)
	if c.closed {
		if err := os.Chmod(store, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"run", "--time", "12s", "--seed", "7", "--session-timeout", "2s", "--nemesis-interval", "2s", "--store", store}, c.args...)
	code, stdout, stderr := zlockcheck(t, args...)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)", code, exitValid)
	}
	res := readResults(t, store)
	acq := res["counts"].(map[string]any)["acquire"].(map[string]any)
	if ok, _ := acq["ok"].(float64); ok < 20 {
		t.Errorf("only %v acquires succeeded in 12 s", acq["ok"])
	}
	if !hasCheck(res, "liveness", "valid") {
		t.Errorf("no valid liveness check (the final phase): %v", res["checks"])
	}
	for _, f := range append(c.files, "history.jsonl") {
		if _, err := os.Stat(filepath.Join(store, "latest", f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
	var cfg struct {
		Service  string          `json:"service"`
		Settings json.RawMessage `json:"settings"`
	}
	if err != nil || json.Unmarshal(data, &cfg) != nil || cfg.Service != c.service || !strings.Contains(string(data), c.settings) {
		t.Errorf("config.json does not record the service %s and settings %s: %s (%v)", c.service, c.settings, data, err)
	}
	if !strings.Contains(stderr+stdout, c.log) {
		t.Errorf("the run's log and report do not say %q:\n%s", c.log, stderr)
	}
	assertNothingLeft(t, store)
	if left, _ := filepath.Glob(filepath.Join(os.TempDir(), "zlcpg-run-*")); c.closed && len(left) > 0 {
		t.Errorf("the servers' own directories are left: %v", left)
	}
}
