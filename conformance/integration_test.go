package conformance

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/zksim"
)

// TestConformanceOfRealWorkers: the project's own workers keep every rule on a real
// standalone ZooKeeper (zlc-mutex and gozk through zlockcheck worker, Curator's
// InterProcessMutex through the Java worker, Kazoo's Lock through the Python one).
func TestConformanceOfRealWorkers(t *testing.T) {
	testenv.RequireIntegration(t, testenv.ZooKeeper, testenv.JDK, testenv.Curator, testenv.Kazoo)
	t.Parallel()
	dir := t.TempDir()
	workers := realWorkers(t, dir)
	ctx := context.Background()
	server, err := lockservice.StartLocal(ctx, kind.ZooKeeper, lockservice.LocalConfig{Dir: filepath.Join(dir, "zk"), SessionTimeout: lockservice.DefaultSessionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	for _, w := range workers {
		t.Run(w.name, func(t *testing.T) {
			if w.name == "kazoo-2.11-lock" {
				testenv.Long(t, "Kazoo 2.11 runs kazoo-lock's worker, which keeps every rule here in make test, on a newer Kazoo")
			}
			t.Parallel() // each rule's lock path is its own
			checkConforms(t, w.name, w.argv, server)
		})
	}
}

// TestConformanceOnTheSimulator: Curator's and Kazoo's workers keep every rule against the wire
// simulator's TCP server (no ZooKeeper, no faults), so Curator's and Kazoo's own
// client libraries find in it what they need of a server: the handshake with the
// read-only byte, create2 and containers, getChildren and getChildren2, watches and
// checkWatches, /zookeeper/config, and an expired session.
func TestConformanceOnTheSimulator(t *testing.T) {
	testenv.RequireIntegration(t, testenv.JDK, testenv.Curator, testenv.Kazoo)
	dir := t.TempDir()
	workers := realWorkers(t, dir)
	srv, err := zksim.StartServer(zksim.ServerConfig{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	server := zookeeper.At(srv.Addr(), lockservice.DefaultSessionTimeout)
	for _, w := range workers {
		if w.name != "curator-mutex" && w.name != "curator-5.9-mutex" && w.name != "kazoo-lock" {
			continue // the Go recipes run in the simulator's wire mode itself (package zksim)
		}
		t.Run(w.name, func(t *testing.T) {
			if w.name == "curator-5.9-mutex" {
				testenv.Long(t, "Curator 5.9 keeps every rule on a real ZooKeeper in make test; here, the simulator with its client too")
			}
			t.Parallel() // each rule's lock path is its own
			checkConforms(t, w.name, w.argv, server)
		})
	}
}

// realWorker is one of the project's workers, by recipe name and command line.
type realWorker struct {
	name string
	argv []string
}

// realWorkers builds zlockcheck and the Curator worker into dir and returns the
// project's workers: zlc-mutex and gozk through zlockcheck worker, Curator's
// InterProcessMutex through the Java worker (Debian's 5.4, and 5.9 from Maven Central
// as a run builds it, in the cache: make setup fetched it), Kazoo's Lock through the
// Python one.
func realWorkers(t *testing.T, dir string) []realWorker {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := zlockcheckBin(t)
	curator := filepath.Join(dir, "curator")
	if out, err := exec.Command("sh", filepath.Join(root, "recipes/curator/build.sh"), curator).CombinedOutput(); err != nil {
		t.Fatalf("build the Curator worker: %v\n%s", err, out)
	}
	r, err := recipes.Find("curator-5.9-mutex")
	if err != nil {
		t.Fatal(err)
	}
	curator59 := workerArgv(t, r)
	if r, err = recipes.Find("kazoo-2.11-lock"); err != nil {
		t.Fatal(err)
	}
	kazoo211 := workerArgv(t, r)
	return []realWorker{
		{"zlc-mutex", []string{bin, "worker", "--recipe", "zlc-mutex"}},
		{"gozk", []string{bin, "worker", "--recipe", "gozk"}},
		{"curator-mutex", []string{filepath.Join(root, "recipes/curator/run.sh"), curator, "curator-mutex"}},
		{"curator-5.9-mutex", curator59},
		{"kazoo-lock", []string{"/usr/bin/python3", filepath.Join(root, "recipes/python/kazoo_worker.py"), "kazoo-lock"}},
		{"kazoo-2.11-lock", kazoo211},
	}
}

// checkConforms runs every rule on the worker argv against server.
func checkConforms(t *testing.T, name string, argv []string, server lockservice.Local) {
	ctx := context.Background()
	rep, err := Run(ctx, Config{Argv: argv, Server: server})
	var b strings.Builder
	rep.Write(&b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if !rep.OK() {
		t.Errorf("%s broke the protocol:\n%s", name, b.String())
	}
	for _, res := range rep.Results {
		if strings.HasPrefix(res.Rule.Name, "cycle") && res.Skipped != "" {
			t.Errorf("%s speaks protocol v2, but rule %s was skipped: %s", name, res.Rule.Name, res.Skipped)
		}
	}
	t.Logf("\n%s", b.String())
}

// TestConformanceOnEveryService: on a private server of each other service, the
// project's own workers for it keep every rule (their acquires say where their lock
// lives, so the lost rules end it as the service would), and a worker that never
// notices that its database session lock was ended breaks the lost rule.
func TestConformanceOnEveryService(t *testing.T) {
	testenv.RequireIntegration(t, testenv.RedisServer, testenv.PostgreSQL, testenv.MariaDB)
	t.Parallel() // beside the ZooKeeper workers: the rules mostly wait
	bin := zlockcheckBin(t)
	cases := []struct {
		service kind.Name
		recipe  string
		broken  string // the rules it breaks, comma-separated ("": none)
		// allRules runs every rule on a case that breaks some (by default it runs
		// only those).
		allRules bool
		// settings are the private server's (nil: its defaults); skips are the rules
		// skipped by design (their reason's words).
		settings lockservice.Settings
		skips    map[string]string
		// long: the same worker as another case's, run by make test-long only; why
		// says whose ("": the JVM, Python or Node workers', by its runtime).
		long bool
		why  string
		// sessionTimeout is sent in init (0: the default); the rules' waits scale with it.
		sessionTimeout time.Duration
	}{
		{service: kind.Redis, recipe: "redis-lock"},
		// Redisson's locks, through the JVM worker (the one protocol implementation of
		// recipes/jvm, v2), compiled as a run compiles it, in
		// the cache (make setup fetched Redisson there). The watchdog's locks tell
		// their holder nothing when the lock is gone (the lost rule says so and
		// skips); the lease's worker reports its lease's end. RedLock's fields differ
		// per instance: its acquires say nothing, and the lost rule cannot aim.
		{service: kind.Redis, recipe: "redisson-lock", skips: neverTold, sessionTimeout: 2 * time.Second},
		{service: kind.Redis, recipe: "redisson-lock-lease", long: true},
		{service: kind.Redis, recipe: "redisson-fenced", skips: neverTold, long: true},
		{service: kind.Redis, recipe: "redisson-redlock", settings: redis.RedisSettings{Topology: redis.RedisRedlock},
			skips: noPlace, long: true},
		// Spring Integration's registries, through the same JVM worker: the leased
		// ones report the TTL's end; the renewed one tells its holder nothing.
		{service: kind.Redis, recipe: "spring-redis-lock", long: true},
		{service: kind.Redis, recipe: "spring-redis-lock-renewed", skips: neverTold, long: true},
		{service: kind.Postgres, recipe: "spring-jdbc-postgres", skips: noPlace, long: true},
		{service: kind.MariaDB, recipe: "spring-jdbc-mariadb", skips: noPlace, long: true},
		// redis-py's Lock, through the Python workers' protocol (recipes/python,
		// v2), in the virtual environment a run makes (make setup made it): it
		// reports its TTL's end.
		{service: kind.Redis, recipe: "redis-py-lock"},
		// python-redis-lock's waiter, whose holder closed without releasing, sits in a
		// BLPOP longer than redis-py 8's default 5 s socket timeout: redis-py sends it
		// again, 10 times, and the acquire outlasts its timeout by a minute
		// (docs/recipes.md#python-libraries-from-pypi).
		// The waiter's timeout in the close rule is 6 s with a 4 s session timeout.
		{service: kind.Redis, recipe: "python-redis-lock", broken: "close", sessionTimeout: 4 * time.Second, long: true},
		// pottery's Redlock over the redlock topology's three primaries: the same key
		// and uuid on each; it reports its validity's end.
		{service: kind.Redis, recipe: "pottery-redlock", settings: redis.RedisSettings{Topology: redis.RedisRedlock}, long: true},
		// pals's advisory lock tells its holder nothing when its session ends: it
		// breaks the lost rules, as the Go recipe without its heartbeat does, and
		// keeps every other.
		{service: kind.Postgres, recipe: "pals-lock", broken: "lost,cycle-lost", allRules: true, long: true},
		// The Node workers of npm's libraries (recipes/node, v2), with the node_modules
		// npm ci made in the cache (make setup made it): redis-semaphore's Mutex
		// reports its onLockLost; @sesamecare-oss/redlock its Lock's expiration, on
		// RedLock's three independent instances.
		{service: kind.Redis, recipe: "redis-semaphore-mutex"},
		{service: kind.Redis, recipe: "node-redlock", settings: redis.RedisSettings{Topology: redis.RedisRedlock}, long: true},
		{service: kind.Postgres, recipe: "pg-advisory"},
		{service: kind.Postgres, recipe: "pg-table-expiry"}, // a lease in a table: lost deletes its row
		{service: kind.Postgres, recipe: "mutant-pg-advisory-no-heartbeat", broken: "lost"},
		{service: kind.MariaDB, recipe: "mariadb-getlock"},
		{service: kind.MariaDB, recipe: "mutant-mariadb-no-heartbeat", broken: "lost"},
		// etcd's Mutex on a private member of Debian's etcd-server: a revoked lease
		// (End) is reported through the session's Done(); the mutant that ignores it
		// breaks the lost rules only.
		{service: kind.Etcd, recipe: "etcd-mutex"},
		{service: kind.Etcd, recipe: "mutant-etcd-ignore-done", broken: "lost,cycle-lost"},
		// etcd's Election as a lock: etcd-mutex's sessions and lost watch, Campaign
		// and Resign for Lock and Unlock.
		{service: kind.Etcd, recipe: "etcd-election", long: true, why: "etcd-election's sessions and lost watch are etcd-mutex's; this is Campaign and Resign behind them"},
		// etcd3's Lock (npm), through the Node workers' protocol: a revoked lease is
		// reported when its Lease's next keep-alive is answered TTL 0.
		{service: kind.Etcd, recipe: "etcd-node-lock"},
		// Python etcd3's Lock, through the Python workers' protocol: a revoked lease is
		// reported when the holder's next refresh() is answered TTL 0.
		{service: kind.Etcd, recipe: "etcd-python-lock", long: true},
	}
	for _, c := range cases {
		t.Run(string(c.service)+"/"+c.recipe, func(t *testing.T) {
			if c.long {
				why := "the JVM worker's protocol is redisson-lock's; this is another library's lock behind it"
				if r, err := recipes.Find(c.recipe); err == nil && r.Runtime == recipes.Python {
					why = "the Python workers' protocol is redis-py-lock's; this is another library's lock behind it"
				}
				if r, err := recipes.Find(c.recipe); err == nil && r.Runtime == recipes.Node {
					why = "the Node workers' protocol is redis-semaphore-mutex's; this is another library's lock behind it"
				}
				testenv.Long(t, cmp.Or(c.why, why))
			}
			t.Parallel() // each on a private server of its own
			cfg := Config{Argv: []string{bin, "worker", "--recipe", c.recipe}, Service: c.service, Settings: c.settings, SessionTimeout: c.sessionTimeout}
			if r, err := recipes.Find(c.recipe); err == nil && r.Runtime != recipes.InProcess {
				cfg.Argv = workerArgv(t, r)
			}
			var broken []string
			if c.broken != "" {
				broken = strings.Split(c.broken, ",")
			}
			if c.broken != "" && !c.allRules {
				// A short session timeout (unless the case names one): the rule waits 3
				// of them and 5 s for the lost event that never comes.
				cfg.Only, cfg.SessionTimeout = broken, cmp.Or(c.sessionTimeout, 2*time.Second)
			}
			rep, err := Run(context.Background(), cfg)
			var b strings.Builder
			rep.Write(&b)
			if err != nil {
				t.Fatalf("%v\n%s", err, b.String())
			}
			for _, res := range rep.Results {
				switch {
				case slices.Contains(broken, res.Rule.Name) && res.Passed:
					t.Errorf("%s kept rule %s, which it breaks", c.recipe, res.Rule.Name)
				case !slices.Contains(broken, res.Rule.Name) && !res.Passed:
					t.Errorf("%s broke rule %s: %s", c.recipe, res.Rule.Name, res.Problem)
				case res.Skipped != "" && c.skips[res.Rule.Name] != "" && strings.Contains(res.Skipped, c.skips[res.Rule.Name]):
				case res.Skipped != "":
					t.Errorf("%s: rule %s skipped (%s): its acquire says where its lock lives, so every rule can run", c.recipe, res.Rule.Name, res.Skipped)
				}
			}
			t.Logf("\n%s", b.String())
		})
	}
}

// The rules a JVM worker (protocol v2) skips, by design, and the reason's words: a
// lock whose library never tells its holder that it is gone (neverTold), or whose
// acquires do not say where it lives (noPlace), is not held to the lost rules.
var (
	neverTold = map[string]string{"lost": "sent no lost", "cycle-lost": "sent no lost"}
	noPlace   = map[string]string{"lost": "did not say where", "cycle-lost": "did not say where"}
)

// workerArgv is the command line of a Java, Python or Node recipe's worker as a run builds
// it, in the user's cache ($ZLC_CACHE_DIR or ~/.cache/zlockcheck, where make setup
// fetched its library).
func workerArgv(t *testing.T, r recipes.Entry) []string {
	t.Helper()
	cache, err := maven.CacheDir(os.Getenv("ZLC_CACHE_DIR"))
	if err != nil {
		t.Fatal(err)
	}
	argv, err := r.Command(context.Background(), recipes.CommandEnv{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	return argv
}

// built is the zlockcheck binary the integration tests share: built once (a link
// takes seconds), removed by TestMain.
var built struct {
	once     sync.Once
	dir, bin string
	err      error
}

// zlockcheckBin builds zlockcheck once for the package's tests.
func zlockcheckBin(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "zlc-conformance-test."); built.err != nil {
			return
		}
		built.bin = filepath.Join(built.dir, "zlockcheck")
		if out, err := exec.Command("go", "build", "-o", built.bin, "../cmd/zlockcheck").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("build zlockcheck: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.bin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}
