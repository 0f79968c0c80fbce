package testenv

import "strings"

// Names of the variables Go code reads through this package.
const (
	// RequireIntegrationVar turns a missing integration requirement into a failure.
	RequireIntegrationVar = "ZLC_REQUIRE_INTEGRATION"
	// ZKConnectVar names a standalone ZooKeeper for the recipe tests.
	ZKConnectVar = "ZLC_ZK_CONNECT"
)

// A Var is one ZLC_* environment variable.
type Var struct {
	// Name is the variable, e.g. ZLC_CACHE_DIR.
	Name string
	// Meaning is what setting it does.
	Meaning string
	// ReadBy is who reads it (files or targets).
	ReadBy string
}

// Vars is every ZLC_* environment variable the project reads or sets, product and
// tests alike, sorted by name: the one list (the README's table is written from it,
// and TestEveryVariableIsListed finds any variable the code uses that is not here).
func Vars() []Var {
	return []Var{
		{"ZLC_CACHE_DIR", "where the binary unpacks and builds its embedded Java, Python and Node workers, and keeps what `zlockcheck fetch` brings from Maven Central (the ZooKeeper releases, the JVM workers' libraries, a local Maven repository in `m2/`), PyPI (the Python workers' virtual environment) and npm (the Node workers' `node-npm-HASH`, npm's cache in `npm/`) (default: the user's cache directory, zlockcheck/)", "zlockcheck (recipes/cache.go, internal/maven, internal/pypi, internal/npm); the e2e tests set it; the tests that run a release or a JVM, Python or Node worker read it (make setup fetched there)"},
		{"ZLC_CHECK_BIN", "the zlockcheck binary that checks the Curator worker's harness-like runs (default: one built from the checkout)", "recipes/curator/test.sh, make test"},
		{"ZLC_DB_MUTANTS", "all: the database explore e2e test runs every database mutant and correct recipe (default: a short set)", "cmd/zlockcheck/proofs_e2e_test.go, make mutants-db"},
		{"ZLC_ETCD_MUTANTS", "all: the etcd explore e2e test runs every etcd mutant and the correct recipe (default: a short set)", "cmd/zlockcheck/proofs_e2e_test.go, make mutants-etcd"},
		{"ZLC_EXPLORE", "set: run explore's control (a budget on zlc-mutex, curator-mutex and kazoo-lock must report no recipe bug)", "cmd/zlockcheck/explore_e2e_test.go, make explore"},
		{"ZLC_EXPLORE_BUDGET", "each recipe's budget in explore's control (default 5m)", "cmd/zlockcheck/explore_e2e_test.go"},
		{"ZLC_FENCING_FAULTS", "`all`: the fencing e2e test runs client-partition as well as client-pause (default: client-pause only)", "cmd/zlockcheck/mutants_e2e_test.go, make fencing"},
		{"ZLC_HELPER_PATH", "set by the nemesis tests for their helper process: the znode it creates", "nemesis/helper_test.go"},
		{"ZLC_HELPER_SERVERS", "set by the nemesis tests for their helper process: the servers it connects to", "nemesis/helper_test.go"},
		{"ZLC_HELPER_SESSION_TIMEOUT", "set by the nemesis tests for their helper process: its session timeout", "nemesis/helper_test.go"},
		{"ZLC_JAVA_DIR", "where the Curator worker's jars are (default /usr/share/java)", "recipes/curator/classpath.sh"},
		{"ZLC_JAVA_OPTS", "extra JVM options for the Curator worker", "recipes/curator/run.sh"},
		{"ZLC_KAZOO_PYTHON", "the interpreter the Kazoo worker suite runs the worker with (default /usr/bin/python3, Debian's Kazoo; the Python workers' virtual environment's for Kazoo 2.11)", "recipes/python/test_kazoo_worker.py"},
		{"ZLC_KAZOO_TEST_KEEP", "1: keep the Kazoo worker suite's temporary directory (server and worker logs)", "recipes/python/test_kazoo_worker.py"},
		{"ZLC_KEEP_SCREENSHOTS", "a directory where the browser tests keep their screenshots", "report/web/browser_test.go"},
		{"ZLC_LOCK", "a file the bench scripts run each run under flock with (a machine shared with other suites)", "bench/common.sh"},
		{LongVar, "set: run the tests make test leaves to make test-long (near-duplicates and long variants; docs/tests.md)", "internal/testenv.Long (the long tests), make test-long, make mutants, make property"},
		{"ZLC_MUTANT_SEEDS", "how many seeds the mutant e2e tests explore per mutant (default 1; make mutants: 3)", "cmd/zlockcheck/mutants_e2e_test.go, make mutants"},
		{"ZLC_MUTANT_TIME", "how long each control run of zlc-mutex under a mutant's hand-picked exposure lasts (default 20s; make mutants: 60s)", "cmd/zlockcheck/mutants_e2e_test.go, make mutants"},
		{"ZLC_NEMESIS_TEST_HELPER", "set by the nemesis tests: run the test binary as a ZooKeeper client helper", "nemesis/helper_test.go"},
		{"ZLC_NO_CDS", "1: build and run the Curator worker without its class-data-sharing archive", "recipes/curator/build.sh, run.sh"},
		{"ZLC_PROCESS", "set by the harness for each worker: its history process id", "harness (sets), zlockcheck worker --cpuprofile (reads)"},
		{"ZLC_PROPERTY", "set: run the long real-ensemble property searches", "harness/property_test.go, make property"},
		{"ZLC_PROP_TRACE", "set: log every real-ensemble property run step by step", "harness/property_test.go"},
		{"ZLC_REDIS_MUTANTS", "all: the Redis explore e2e test runs every Redis mutant and correct recipe (default: a short set)", "cmd/zlockcheck/proofs_e2e_test.go, make mutants-redis"},
		{RequireIntegrationVar, "set: an integration test whose requirements are missing fails instead of skipping", "internal/testenv (every integration test), make test"},
		{"ZLC_SERVICES_LOCKED", "set by bench/services.sh when it re-runs itself under flock ZLC_LOCK (it then takes no lock again)", "bench/services.sh"},
		{"ZLC_STRESS_SECONDS", "how long each of the Curator worker's harness-like runs lasts (default 15; make test: 10)", "recipes/curator/test.sh"},
		{"ZLC_TEST_KEEP", "1: keep the standalone server's and the Curator suite's temporary directories", "scripts/with-zk.sh, recipes/curator/test.sh"},
		{"ZLC_TEST_PLACE", "set by TestBadLockPlaceIsAClearError: the lock place its proxy worker puts on every acquire's ok", "cmd/zlockcheck/testdata/breaking_proxy.py"},
		{ZKConnectVar, "set by scripts/with-zk.sh: the standalone ZooKeeper's host:port", "recipe tests (internal/testenv), recipes/curator/test.sh"},
		{"ZLC_ZK_PID", "set by scripts/with-zk.sh: the standalone ZooKeeper's pid (tests pause it)", "recipes/curator/protocol_test.py, stress.py"},
	}
}

// VarsMarkdown is the README's table of Vars.
func VarsMarkdown() string {
	var b strings.Builder
	b.WriteString("| variable | meaning | read by |\n|---|---|---|\n")
	for _, v := range Vars() {
		b.WriteString("| `" + v.Name + "` | " + v.Meaning + " | " + v.ReadBy + " |\n")
	}
	return b.String()
}
