package recipes

import (
	"debug/buildinfo"
	"fmt"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// Runtime is what runs a recipe's worker process.
type Runtime string

// The worker runtimes.
const (
	// InProcess recipes are Go code in this module, served by `zlockcheck worker
	// --recipe NAME` (Serve) in a process of the zlockcheck binary itself.
	InProcess Runtime = "go"
	// Java recipes run in a worker of recipes/jvm, compiled with javac on first use:
	// ZlcCuratorWorker against Debian's Curator jars (by recipes/curator's scripts),
	// or a worker against a release fetched from Maven Central (Library.Maven).
	Java Runtime = "java"
	// Python recipes run in a worker of recipes/python (Entry.Worker): Kazoo's on
	// Debian's /usr/bin/python3 with python3-kazoo, or, for a library from PyPI
	// (Library.PyPI), in a virtual environment of recipes/python's requirements.
	Python Runtime = "python"
	// Node recipes run in a worker of recipes/node on the machine's node, with the
	// libraries of Library.Npm installed from the npm registry into the cache.
	Node Runtime = "node"
)

// Library names the library a recipe tests, for the record of a run: its version is
// the Debian package's (Debian), the Go module's (Module; "" for this module) or the
// release that Maven names (a profile of recipes/jvm/pom.xml, e.g. "curator-5.9.0":
// the worker is compiled against its jars).
type Library struct {
	Name   string
	Debian string
	Module string
	Maven  string
	// PyPI is the requirement a Python recipe's library is pinned at in
	// recipes/python/requirements.txt, e.g. "redis==8.1.0" (its worker runs in the
	// virtual environment made of that file).
	PyPI string
	// Npm is the package a Node recipe's library is pinned at in recipes/node's
	// package.json and package-lock.json, name@version, e.g. "redis-semaphore@5.8.0"
	// (its worker runs with the node_modules npm ci made of them).
	Npm string
}

// release is the version a library fetched from a registry is pinned at ("5.9.0",
// "2.11.0"); "" for the others.
func (l Library) release() string {
	switch {
	case l.Maven != "":
		return l.Maven[strings.LastIndex(l.Maven, "-")+1:]
	case l.PyPI != "":
		return l.PyPI[strings.Index(l.PyPI, "==")+2:]
	}
	return ""
}

// fetched reports whether the library comes from a registry into the cache (Maven
// Central, PyPI, npm), not from a Debian package or this module.
func (l Library) fetched() bool { return l.Maven != "" || l.PyPI != "" || l.Npm != "" }

// Entry is one recipe of the catalogue.
type Entry struct {
	// Name is what --recipe takes.
	Name string
	// Doc is a one-line description.
	Doc string
	// Kinds are the workloads the recipe speaks; the first is its default.
	Kinds []workloads.Kind
	// Runtime is what runs its worker.
	Runtime Runtime
	// Mutant marks a deliberately broken variant of a recipe (zlc-mutex, redis-lock,
	// or a hand-written RedLock), which a run is expected to find invalid (or stuck);
	// mutant-herd, safe and live, is expected to be flagged by the herd check.
	Mutant bool
	// Library is the library under test.
	Library Library
	// Service is the kind of lock service the recipe's worker talks to: "" (or
	// kind.ZooKeeper) for a ZooKeeper ensemble, kind.Redis for Redis instances
	// (init's connect lists host:port of each; see NewRedisLock). A harness refuses a
	// recipe on another service.
	Service kind.Name
	// RedLock marks a lock over a majority of independent instances (RedLock): it
	// runs on Redis's redlock topology only, which a run gives it unless told
	// otherwise, and has no fencing token.
	RedLock bool
	// Sentinel marks a single-primary Redis recipe whose client can find the primary
	// through Redis Sentinels and follow a promotion (init's sentinel_master): it
	// may run on Redis's sentinel topology; the others are refused there.
	Sentinel bool
	// Cluster marks a single-primary Redis recipe whose client can follow a Redis
	// Cluster's slots (init's redis_cluster): it may run on Redis's cluster
	// topology; the others are refused there.
	Cluster bool
	// ClusterQuorum marks a RedLock whose instances are keys of one Redis Cluster
	// (locknames.ClusterRedLockKeys), the known misuse of RedLock there: it runs on
	// Redis's cluster topology only, which a run gives it unless told otherwise, and
	// the harness reads its lock as the value a majority of those keys hold. It is
	// no RedLock over independent instances (RedLock is false).
	ClusterQuorum bool
	// Replicas marks a Redis recipe that needs its primary to have replicas (it
	// waits for one after a grant: WAIT): it runs on the replicas or sentinel
	// topology, or on a cluster whose primaries have replicas.
	Replicas bool
	// SessionLock marks a lock that lives in the holder's session on the server (a
	// PostgreSQL advisory lock, a MariaDB GET_LOCK): it goes when the server ends the
	// session, and a server's restart or crash ends every session on it.
	SessionLock bool
	// New builds an InProcess recipe; nil for the others.
	New Constructor
	// Base is the recipe this one is with another release of its library (Library
	// says which): its worker is told Base ("": Name).
	Base string
	// Worker is a Java recipe's worker: the main class of one of recipes/jvm's
	// workers, compiled against Library.Maven's jars ("": the Curator worker of
	// recipes/curator); or a Python recipe's: its script in recipes/python; or a
	// Node recipe's: its script in recipes/node.
	Worker string
}

// WorkerRecipe is the name the recipe's worker is told: Base, or Name.
func (r Entry) WorkerRecipe() string {
	if r.Base != "" {
		return r.Base
	}
	return r.Name
}

// Catalog lists every recipe: the real ones sorted by name, then the mutants sorted
// by name. It is the one place a recipe is added.
func Catalog() []Entry {
	goKinds := []workloads.Kind{workloads.Mutex, workloads.Counter}
	zlc := Library{Name: "zlockcheck"}
	curator := Library{Name: "Curator", Debian: "libcurator-recipes-java"}
	kazoo := Library{Name: "Kazoo", Debian: "python3-kazoo"}
	list := []Entry{
		{Name: "gozk", Runtime: InProcess, Kinds: goKinds, New: NewGoZK,
			Library: Library{Name: "go-zookeeper", Module: "github.com/go-zookeeper/zk"},
			Doc:     "go-zookeeper's own zk.Lock, used as its users use it; lost only after a session expiry is seen"},
		{Name: zlcmutex.MutantNone.String(), Runtime: InProcess, Kinds: goKinds, Library: zlc,
			New: NewZLC(zlcmutex.MutantNone), Doc: zlcmutex.MutantNone.Description()},
		{Name: "curator-mutex", Runtime: Java, Library: curator,
			Kinds: []workloads.Kind{workloads.Mutex, workloads.Counter},
			Doc:   "Curator's InterProcessMutex; SUSPENDED or LOST while holding reports lost"},
		{Name: "curator-semaphore", Runtime: Java, Library: curator,
			Kinds: []workloads.Kind{workloads.Semaphore},
			Doc:   "Curator's InterProcessSemaphoreV2 (leases)"},
		{Name: "curator-rwlock", Runtime: Java, Library: curator,
			Kinds: []workloads.Kind{workloads.RWLock},
			Doc:   "Curator's InterProcessReadWriteLock"},
		{Name: "curator-reentrant", Runtime: Java, Library: curator,
			Kinds: []workloads.Kind{workloads.Reentrant, workloads.Mutex},
			Doc:   "Curator's InterProcessMutex acquired twice, released twice"},
		{Name: "kazoo-lock", Runtime: Python, Worker: "kazoo_worker.py", Library: kazoo,
			Kinds: []workloads.Kind{workloads.Mutex, workloads.Counter},
			Doc:   "Kazoo's Lock; SUSPENDED or LOST while holding reports lost"},
		{Name: "kazoo-semaphore", Runtime: Python, Worker: "kazoo_worker.py", Library: kazoo,
			Kinds: []workloads.Kind{workloads.Semaphore},
			Doc:   "Kazoo's Semaphore"},
		{Name: "kazoo-rwlock", Runtime: Python, Worker: "kazoo_worker.py", Library: kazoo,
			Kinds: []workloads.Kind{workloads.RWLock},
			Doc:   "Kazoo's ReadLock / WriteLock"},
	}
	list = append(list, releaseOf(list, Library{Name: "Curator", Maven: "curator-5.9.0"})...)
	list = append(list, releaseOf(list, Library{Name: "Kazoo", PyPI: "kazoo==2.11.0"})...)
	for _, m := range append(zlcmutex.Mutants(), zlcmutex.MutantHerd) {
		list = append(list, Entry{Name: m.String(), Runtime: InProcess, Kinds: goKinds, Library: zlc,
			Mutant: true, New: NewZLC(m), Doc: m.Description()})
	}
	list = append(list, redisEntries()...)
	list = append(list, redissonEntries()...)
	list = append(list, springEntries()...)
	list = append(list, pythonEntries()...)
	list = append(list, nodeEntries()...)
	list = append(list, dbEntries()...)
	list = append(list, etcdEntries()...)
	slices.SortStableFunc(list, func(a, b Entry) int {
		if a.Mutant != b.Mutant {
			if a.Mutant {
				return 1
			}
			return -1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return list
}

// releaseOf is the recipes of list on Debian's package of l's library (the same
// Library.Name) again with l, a release from a registry: curator-mutex becomes
// curator-5.9-mutex (Curator 5.9.0 from Maven Central), kazoo-lock kazoo-2.11-lock
// (Kazoo 2.11.0 from PyPI); the same worker, told the recipe it is a release of.
func releaseOf(list []Entry, l Library) []Entry {
	version := l.release()
	short := version[:strings.LastIndex(version, ".")]
	prefix := strings.ToLower(l.Name)
	var out []Entry
	for _, e := range list {
		if e.Library.Name != l.Name || e.Library.Debian == "" {
			continue
		}
		e.Base, e.Library = e.Name, l
		e.Name = prefix + "-" + short + strings.TrimPrefix(e.Name, prefix)
		e.Doc = strings.Replace(e.Doc, l.Name+"'s", l.Name+" "+version+"'s", 1)
		out = append(out, e)
	}
	return out
}

// redissonEntries are Redisson's locks (recipes/jvm/ZlcRedissonWorker.java).
func redissonEntries() []Entry {
	lib := Library{Name: "Redisson", Maven: "redisson-3.52.0"}
	mutex, counter := []workloads.Kind{workloads.Mutex}, []workloads.Kind{workloads.Mutex, workloads.Counter}
	e := func(name string, kinds []workloads.Kind, redlock bool, doc string) Entry {
		// Every lock on one primary finds it through sentinels (useSentinelServers).
		return Entry{Name: name, Runtime: Java, Worker: "ZlcRedissonWorker", Library: lib, Service: kind.Redis,
			Kinds: kinds, RedLock: redlock, Sentinel: !redlock, Doc: doc}
	}
	return []Entry{
		e("redisson-lock", []workloads.Kind{workloads.Mutex, workloads.Reentrant, workloads.Counter}, false,
			"Redisson's RLock, tryLock(wait) with the watchdog renewing it (lockWatchdogTimeout the TTL); Redisson tells a holder nothing when a renewal finds the lock gone: it learns at unlock; cannot fence"),
		e("redisson-lock-lease", counter, false,
			"Redisson's RLock, tryLock(wait, lease) with the TTL as the lease and no watchdog; lost when the lease runs out; cannot fence"),
		e("redisson-fenced", counter, false,
			"Redisson's RFencedLock, tryLockAndGetToken(wait) with the watchdog: a fencing token on every acquire, which the fenced counter checks; learns a lost lock at unlock"),
		e("redisson-redlock", mutex, true,
			"Redisson's RedissonRedLock (deprecated, still shipped) over one RedissonClient per independent primary, tryLock(wait) with the watchdog on each; cannot fence"),
	}
}

// pythonEntries are the Python libraries from PyPI (recipes/python).
func pythonEntries() []Entry {
	return []Entry{
		{Name: "redis-py-lock", Runtime: Python, Worker: "redis_py_worker.py", Service: kind.Redis, Sentinel: true,
			Library: Library{Name: "redis-py", PyPI: "redis==8.1.0"}, Kinds: []workloads.Kind{workloads.Mutex},
			Doc: "redis-py's Lock (client.lock(name, timeout=TTL)) with the client's defaults, polled at its own pace; no renewal; lost when its validity runs out; under sentinels, Sentinel(...).master_for(name); cannot fence"},
		{Name: "python-redis-lock", Runtime: Python, Worker: "python_redis_lock_worker.py", Service: kind.Redis, Sentinel: true,
			Library: Library{Name: "python-redis-lock", PyPI: "python-redis-lock==4.0.1"}, Kinds: []workloads.Kind{workloads.Mutex},
			Doc: "python-redis-lock's Lock with auto_renewal (a thread renews the key every 2/3 of its expiry) over redis-py; tells a holder nothing when a renewal finds the key gone: it learns at release; under sentinels, redis-py's Sentinel(...).master_for(name); cannot fence"},
		{Name: "pottery-redlock", Runtime: Python, Worker: "pottery_worker.py", Service: kind.Redis, RedLock: true,
			Library: Library{Name: "pottery", PyPI: "pottery==3.0.1"}, Kinds: []workloads.Kind{workloads.Mutex},
			Doc: "pottery's Redlock over one redis-py client per independent primary (auto_release_time the TTL), polled at its own pace; no renewal; lost when its validity runs out; cannot fence"},
		{Name: "pals-lock", Runtime: Python, Worker: "pals_worker.py", Service: kind.Postgres, SessionLock: true,
			Library: Library{Name: "pals", PyPI: "pals==0.4.0"}, Kinds: []workloads.Kind{workloads.Mutex, workloads.RWLock},
			Doc: "pals's Locker / Lock (pg_advisory_lock on a pooled SQLAlchemy connection, lock_timeout for timed acquires; shared for readers); tells a holder nothing when its session ends: it learns at release; cannot fence"},
		{Name: "etcd-python-lock", Runtime: Python, Worker: "etcd3_worker.py", Service: kind.Etcd,
			Library: Library{Name: "etcd3", PyPI: "etcd3==0.12.0"}, Kinds: []workloads.Kind{workloads.Mutex},
			Doc: "Python etcd3's Lock (client.lock(name, ttl=TTL).acquire(timeout), release(); one member per client): a key /locks/NAME on a lease of its own per try, which the library never renews: the worker calls refresh() every third of the TTL while holding; lost when a refresh answers TTL 0 (a refresh that fails tells nothing); the key's create revision as the token"},
	}
}

// nodeEntries are the Node libraries from the npm registry (recipes/node).
func nodeEntries() []Entry {
	mutex := []workloads.Kind{workloads.Mutex}
	return []Entry{
		{Name: "node-redlock", Runtime: Node, Worker: "redlock_worker.js", Service: kind.Redis, RedLock: true, Kinds: mutex,
			Library: Library{Name: "@sesamecare-oss/redlock", Npm: "@sesamecare-oss/redlock@1.4.0"},
			Doc:     "@sesamecare-oss/redlock (the maintained redlock) over ioredis with its defaults, one client per independent primary: acquire([name], TTL) with the library's retries until the acquire timeout, release(); no extension; lost when the Lock's expiration passes; cannot fence"},
		{Name: "etcd-node-lock", Runtime: Node, Worker: "etcd3_worker.js", Service: kind.Etcd, Kinds: mutex,
			Library: Library{Name: "etcd3", Npm: "etcd3@1.1.2"},
			Doc:     "etcd3's Lock (client.lock(name).ttl(TTL).acquire(), one try: the worker tries again every 100 ms until the acquire timeout; release() revokes the lease): a key on a lease of its own per hold; the Lock tells a holder nothing, its Lease emits lost (a keep-alive answered TTL 0, or no answer for twice the TTL), which the worker reports; the key's create revision as the token"},
		{Name: "redis-semaphore-mutex", Runtime: Node, Worker: "redis_semaphore_worker.js", Service: kind.Redis, Kinds: mutex, Sentinel: true,
			Library: Library{Name: "redis-semaphore", Npm: "redis-semaphore@5.8.0"},
			Doc:     "redis-semaphore's Mutex over ioredis with its defaults on one instance: tryAcquire() with the acquire timeout, a refresh every 0.8 TTL, release(); lost when onLockLost is called (a refresh found the key gone); cannot fence"},
	}
}

// springEntries are Spring Integration's lock registries
// (recipes/jvm/ZlcSpringWorker.java).
func springEntries() []Entry {
	lib := Library{Name: "Spring Integration", Maven: "spring-integration-7.1.2"}
	e := func(name string, service kind.Name, doc string) Entry {
		// The Redis registries find the primary through sentinels (RedisSentinelConfiguration).
		return Entry{Name: name, Runtime: Java, Worker: "ZlcSpringWorker", Library: lib, Service: service,
			Kinds: []workloads.Kind{workloads.Mutex}, Sentinel: service == kind.Redis, Doc: doc}
	}
	return []Entry{
		e("spring-jdbc-postgres", kind.Postgres,
			"Spring Integration's JdbcLockRegistry (DefaultLockRepository, table zlc_int_LOCK, HikariCP) on PostgreSQL, tryLock(wait) / unlock(), the TTL as expireAfter, no renewal; lost when the TTL runs out; cannot fence"),
		e("spring-jdbc-mariadb", kind.MariaDB,
			"Spring Integration's JdbcLockRegistry on one MariaDB server, as spring-jdbc-postgres"),
		e("spring-redis-lock", kind.Redis,
			"Spring Integration's RedisLockRegistry (spin lock, Lettuce) on the first instance, tryLock(wait) / unlock(), the TTL as expireAfter, no renewal; lost when the TTL runs out; cannot fence"),
		e("spring-redis-lock-renewed", kind.Redis,
			"spring-redis-lock with a renewal task scheduler renewing the lock every third of the TTL; it tells a holder nothing when a renewal finds the lock gone: it learns at unlock; cannot fence"),
	}
}

// redisEntries are the Redis recipes and their mutants.
func redisEntries() []Entry {
	mutex := []workloads.Kind{workloads.Mutex}
	goRedis := Library{Name: "go-redis", Module: "github.com/redis/go-redis/v9"}
	list := []Entry{
		{Name: "redislock", Runtime: InProcess, Kinds: mutex, Service: kind.Redis, Sentinel: true, Cluster: true, New: NewRedislock,
			Library: Library{Name: "redislock", Module: "github.com/bsm/redislock"},
			Doc:     "bsm/redislock's Obtain / Release on one Redis instance, polling until the acquire timeout; lost when the TTL runs out (monotonic); cannot fence"},
		{Name: "redsync", Runtime: InProcess, Kinds: mutex, Service: kind.Redis, RedLock: true, Sentinel: true, Cluster: true, New: NewRedsync,
			Library: Library{Name: "redsync", Module: "github.com/go-redsync/redsync/v4"},
			Doc:     "RedLock with go-redsync/redsync over 3 or more independent Redis primaries (WithFailFast, tries bounded by the acquire timeout); on --redis-topology sentinel, one pool on the primary the sentinels name, on cluster one pool on the cluster client; lost when Until() passes; cannot fence"},
		{Name: "redsync-one-cluster", Runtime: InProcess, Kinds: mutex, Service: kind.Redis, Cluster: true, ClusterQuorum: true, New: NewRedsyncOneCluster,
			Library: Library{Name: "redsync", Module: "github.com/go-redsync/redsync/v4"},
			Doc:     "the known misuse of RedLock on a Redis Cluster (redisson#956, #1728): redsync over 3 pools that are one go-redis cluster client, each renaming the key ({lock1}, {lock2}, {lock4} before the path: two of the three on one primary); --redis-topology cluster only; lost when Until() passes; cannot fence"},
	}
	for _, v := range redisLockVariants {
		e := Entry{Name: v.name, Runtime: InProcess, Kinds: []workloads.Kind{workloads.Mutex, workloads.Counter}, Service: kind.Redis, Library: goRedis, Sentinel: true,
			Cluster: true, Mutant: v.m.mutant(), Replicas: v.m == redisWait, New: redisLockVariant(v.m), Doc: v.doc}
		if v.m == redisCorrect {
			e.New = NewRedisLock
		}
		list = append(list, e)
	}
	for _, v := range redLockVariants {
		list = append(list, Entry{Name: v.name, Runtime: InProcess, Kinds: mutex, Service: kind.Redis, RedLock: true,
			Library: goRedis, Mutant: true, New: redLockVariant(v.m), Doc: v.doc})
	}
	return list
}

// dbEntries are the database recipes and their mutants.
func dbEntries() []Entry {
	pgx := Library{Name: "pgx", Module: "github.com/jackc/pgx/v5"}
	mysql := Library{Name: "go-sql-driver/mysql", Module: "github.com/go-sql-driver/mysql"}
	// A session lock stacks: its runs and explore default to the reentrant workload,
	// which nests some acquires and so also checks the mutex.
	session := []workloads.Kind{workloads.Reentrant, workloads.Mutex}
	var list []Entry
	for _, v := range pgTableVariants {
		e := Entry{Name: v.name, Runtime: InProcess, Kinds: []workloads.Kind{workloads.Mutex, workloads.Counter},
			Service: kind.Postgres, Library: pgx, Mutant: v.m > pgTableExpiry, New: pgTableVariant(v.m), Doc: v.doc}
		switch v.m {
		case pgTableCorrect:
			e.New = NewPgTable
		case pgTableExpiry:
			e.New = NewPgTableExpiry
		}
		list = append(list, e)
	}
	for _, v := range pgAdvisoryVariants {
		e := Entry{Name: v.name, Runtime: InProcess, Kinds: session, Service: kind.Postgres, Library: pgx,
			Mutant: v.m != sessCorrect, New: pgAdvisoryVariant(v.m), Doc: v.doc, SessionLock: true}
		if v.m == sessCorrect {
			e.New = NewPgAdvisory
		}
		list = append(list, e)
	}
	for _, v := range mariadbGetLockVariants {
		e := Entry{Name: v.name, Runtime: InProcess, Kinds: session, Service: kind.MariaDB, Library: mysql,
			Mutant: v.m != sessCorrect, New: mariadbGetLockVariant(v.m), Doc: v.doc, SessionLock: true}
		if v.m == sessCorrect {
			e.New = NewMariaDBGetLock
		}
		list = append(list, e)
	}
	return list
}

// etcdEntries are the etcd recipes and their mutants.
func etcdEntries() []Entry {
	var list []Entry
	for _, v := range etcdVariants {
		list = append(list, Entry{Name: v.name, Runtime: InProcess, Kinds: []workloads.Kind{workloads.Mutex, workloads.Counter},
			Service: kind.Etcd, Library: Library{Name: "etcd client", Module: "go.etcd.io/etcd/client/v3"},
			Mutant: v.v >= etcdIgnoreDone, New: etcdVariantOf(v.v), Doc: v.doc})
	}
	return list
}

// RealNames lists the catalogue's recipes without the mutants, in its order.
func RealNames() []string {
	var names []string
	for _, r := range Catalog() {
		if !r.Mutant {
			names = append(names, r.Name)
		}
	}
	return names
}

// Find returns the named recipe; the error lists the real recipes.
func Find(name string) (Entry, error) {
	var names []string
	for _, r := range Catalog() {
		if r.Name == name {
			return r, nil
		}
		if !r.Mutant {
			names = append(names, r.Name)
		}
	}
	return Entry{}, fmt.Errorf("unknown recipe %q (want exec or one of %s; `zlockcheck recipes` lists them)", name, strings.Join(names, ", "))
}

// Lookup returns the constructor of the named InProcess recipe.
func Lookup(name string) (Constructor, error) {
	r, err := Find(name)
	if err != nil {
		return nil, err
	}
	if r.New == nil {
		return nil, fmt.Errorf("recipe %s runs in its own %s worker, not in zlockcheck worker", name, r.Runtime)
	}
	return r.New, nil
}

// Supports reports whether the recipe speaks the workload kind.
func (r Entry) Supports(k workloads.Kind) bool { return slices.Contains(r.Kinds, k) }

// Version names the library under test and its installed version, e.g. "Curator
// 5.4.0-1 (Debian libcurator-recipes-java)", for results.json; "" when unknown.
func (r Entry) Version() string {
	l := r.Library
	if l.Maven != "" {
		return l.Name + " " + l.release() + " (Maven Central)"
	}
	if l.PyPI != "" {
		return l.Name + " " + l.release() + " (PyPI)"
	}
	if l.Npm != "" {
		return l.Name + " " + l.Npm[strings.LastIndex(l.Npm, "@")+1:] + " (npm)"
	}
	if l.Debian != "" {
		out, err := exec.Command("dpkg-query", "-W", "-f=${Version}", l.Debian).Output()
		if err != nil || len(out) == 0 {
			return ""
		}
		return l.Name + " " + string(out) + " (Debian " + l.Debian + ")"
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || l.Name == "" {
		return ""
	}
	return l.goVersion(bi)
}

// VersionIn is Version for a recipe whose worker runs binary: for a Go recipe (a
// build of zlockcheck, maybe against another client library) the library's version
// that binary was built with; for any other, Version.
func (r Entry) VersionIn(binary string) string {
	if r.Runtime != InProcess || r.Library.Name == "" {
		return r.Version()
	}
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return r.Version()
	}
	return r.Library.goVersion(bi)
}

// goVersion names the library and its version in a Go binary's build information.
func (l Library) goVersion(bi *debug.BuildInfo) string {
	if l.Module == "" {
		return l.Name + " " + bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == l.Module {
			return l.Name + " " + d.Version
		}
	}
	return ""
}

// supports reports whether the named InProcess recipe speaks kind; constructors
// check their config with it.
func supports(name string, kind workloads.Kind) bool {
	r, err := Find(name)
	return err == nil && r.Supports(kind)
}
