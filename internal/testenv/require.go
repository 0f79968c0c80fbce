package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A Requirement is one thing an integration test needs from the machine.
type Requirement int

// The requirements. Each names, in a skip or failure message, what to install.
const (
	// Root: network namespaces, signals to other users' processes.
	Root Requirement = iota
	// ZooKeeper: Debian's zookeeper package (/usr/share/java/zookeeper.jar).
	ZooKeeper
	// IPRoute2: the ip command (namespaces, links).
	IPRoute2
	// NFTables: the nft command (the nemesis's partitions).
	NFTables
	// TrafficControl: the tc command (the nemesis's delays and losses).
	TrafficControl
	// Bash and Timeout: the shell and coreutils' timeout, for commands run in a namespace.
	Bash
	Timeout
	// Python3: a python3 on the PATH (the fake and broken workers in testdata).
	Python3
	// Kazoo: /usr/bin/python3 that can import kazoo (the Kazoo worker).
	Kazoo
	// JDK: javac (the Curator worker is compiled on first use).
	JDK
	// Curator: Debian's Curator jars (the Curator worker's classpath).
	Curator
	// Chromium: Debian's chromium (the results browser's tests).
	Chromium
	// RedisServer: Debian's redis-server on the PATH (the binary is in redis-tools).
	RedisServer
	// PostgreSQL: Debian's postgresql (version 15's initdb and postgres).
	PostgreSQL
	// MariaDB: Debian's mariadb-server (mariadbd, mariadb-install-db).
	MariaDB
	// Etcd: Debian's etcd-server (/usr/bin/etcd, 3.4).
	Etcd
	// ExampleWorkers: the example workers' libraries (make setup:
	// build/examples-venv with redis-py and psycopg, examples/workers/node_modules
	// with ioredis and pg) and node.
	ExampleWorkers
	// StandaloneZK: a standalone ZooKeeper named by ZLC_ZK_CONNECT
	// (scripts/with-zk.sh starts one; make test runs go test under it).
	StandaloneZK
)

// requirement is one row of the catalogue: what to tell the user, and whether the
// machine has it.
type requirement struct {
	what    string
	present func() bool
}

// catalogue is every Requirement, in one place.
func catalogue() map[Requirement]requirement {
	return map[Requirement]requirement{
		Root:           {"root", func() bool { return os.Geteuid() == 0 }},
		ZooKeeper:      {"Debian's zookeeper package", fileExists("/usr/share/java/zookeeper.jar")},
		IPRoute2:       {"iproute2 (ip)", onPath("ip")},
		NFTables:       {"nftables (nft)", onPath("nft")},
		TrafficControl: {"iproute2's tc", onPath("tc")},
		Bash:           {"bash", onPath("bash")},
		Timeout:        {"coreutils' timeout", onPath("timeout")},
		Python3:        {"python3", onPath("python3")},
		Kazoo: {"/usr/bin/python3 with python3-kazoo", func() bool {
			return exec.Command("/usr/bin/python3", "-c", "import kazoo").Run() == nil
		}},
		JDK:         {"javac (default-jdk-headless)", onPath("javac")},
		Curator:     {"libcurator-recipes-java", fileExists("/usr/share/java/curator-recipes.jar")},
		Chromium:    {"Debian's chromium package", func() bool { return ChromiumPath() != "" }},
		RedisServer: {"Debian's redis-server and redis-tools (redis-server)", onPath("redis-server")},
		PostgreSQL:  {"Debian's postgresql (15)", fileExists("/usr/lib/postgresql/15/bin/postgres")},
		MariaDB:     {"Debian's mariadb-server (mariadbd, mariadb-install-db)", func() bool { return onPath("mariadbd")() && onPath("mariadb-install-db")() }},
		Etcd:        {"Debian's etcd-server (/usr/bin/etcd)", fileExists("/usr/bin/etcd")},
		ExampleWorkers: {"the example workers' libraries (make setup: build/examples-venv, examples/workers/node_modules) and node",
			func() bool { return ExampleWorkersRoot() != "" }},
		StandaloneZK: {"a standalone ZooKeeper in " + ZKConnectVar + " (run under scripts/with-zk.sh; make test does)",
			func() bool { return os.Getenv(ZKConnectVar) != "" }},
	}
}

// ExampleWorkersRoot is the checkout whose example workers' libraries make setup
// installed (build/examples-venv, examples/workers/node_modules), "" when it has not
// (or node is missing).
func ExampleWorkersRoot() string {
	dir, err := os.Getwd()
	for ; err == nil; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		if dir == filepath.Dir(dir) {
			return ""
		}
	}
	for _, need := range []string{"build/examples-venv/zlc-installed-requirements.txt", "examples/workers/node_modules/zlc-installed-package-lock.json"} {
		if _, err := os.Stat(filepath.Join(dir, need)); err != nil {
			return ""
		}
	}
	if !onPath("node")() {
		return ""
	}
	return dir
}

func fileExists(path string) func() bool {
	return func() bool { _, err := os.Stat(path); return err == nil }
}

func onPath(name string) func() bool {
	return func() bool { _, err := exec.LookPath(name); return err == nil }
}

// String is what the requirement's absence message names.
func (r Requirement) String() string {
	if c, ok := catalogue()[r]; ok {
		return c.what
	}
	return "unknown requirement"
}

// Missing returns the requirements among reqs that this machine lacks.
func Missing(reqs ...Requirement) []Requirement {
	cat := catalogue()
	var missing []Requirement
	for _, r := range reqs {
		if c, ok := cat[r]; !ok || !c.present() {
			missing = append(missing, r)
		}
	}
	return missing
}

// RequireIntegration skips t when the machine lacks any of reqs, unless
// ZLC_REQUIRE_INTEGRATION is set (as by make test), where their absence fails t. The
// message names everything missing at once. In -short mode (make test-short: unit
// tests only) it always skips.
func RequireIntegration(t testing.TB, reqs ...Requirement) {
	t.Helper()
	requireIntegration(t, testing.Short(), reqs)
}

func requireIntegration(t testing.TB, short bool, reqs []Requirement) {
	t.Helper()
	if short {
		t.Skip("integration test skipped in -short mode")
		return
	}
	missing := Missing(reqs...)
	if len(missing) == 0 {
		return
	}
	names := make([]string, len(missing))
	for i, r := range missing {
		names[i] = r.String()
	}
	msg := "integration test needs " + strings.Join(names, ", ")
	if Strict() {
		t.Fatal(msg + " (" + RequireIntegrationVar + " is set)")
		return
	}
	t.Skip(msg + " (run make test)")
}

// LongVar, when set, runs the tests that make test leaves to make test-long.
const LongVar = "ZLC_LONG"

// Long skips t unless ZLC_LONG is set (make test-long sets it): a long test, or a
// near-duplicate of a detection make test already makes, moved out of make test to
// keep CI under its budget. why says what make test keeps instead (docs/tests.md).
func Long(t testing.TB, why string) {
	t.Helper()
	if os.Getenv(LongVar) == "" {
		t.Skip("long test, run by make test-long (" + LongVar + "=1): " + why)
	}
}

// Strict reports whether ZLC_REQUIRE_INTEGRATION is set: a missing requirement fails.
func Strict() bool { return os.Getenv(RequireIntegrationVar) != "" }

// ZKServers returns the standalone ZooKeeper's addresses from ZLC_ZK_CONNECT,
// skipping (or failing, see RequireIntegration) t without one.
func ZKServers(t testing.TB) []string {
	t.Helper()
	RequireIntegration(t, StandaloneZK)
	return strings.Split(os.Getenv(ZKConnectVar), ",")
}

// ChromiumPath is Debian's chromium binary, or "" without one.
func ChromiumPath() string {
	for _, name := range []string{"/usr/bin/chromium", "chromium"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}
