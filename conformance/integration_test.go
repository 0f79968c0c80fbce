package conformance

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/zksim"
)

// TestConformanceOfRealWorkers: the project's own workers keep every rule on a real
// standalone ZooKeeper (zlc-mutex and gozk through zlockcheck worker, Curator's
// InterProcessMutex through the Java worker, Kazoo's Lock through the Python one).
func TestConformanceOfRealWorkers(t *testing.T) {
	testenv.RequireIntegration(t, testenv.ZooKeeper, testenv.JDK, testenv.Curator, testenv.Kazoo)
	dir := t.TempDir()
	workers := realWorkers(t, dir)
	ctx := context.Background()
	server, err := lockservice.StartLocal(ctx, kind.ZooKeeper, lockservice.LocalConfig{Dir: filepath.Join(dir, "zk"), SessionTimeout: lockservice.DefaultSessionTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	for _, w := range workers {
		t.Run(w.name, func(t *testing.T) { checkConforms(t, w.name, w.argv, server) })
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
		if w.name != "curator-mutex" && w.name != "kazoo-lock" {
			continue // the Go recipes run in the simulator's wire mode itself (package zksim)
		}
		t.Run(w.name, func(t *testing.T) { checkConforms(t, w.name, w.argv, server) })
	}
}

// realWorker is one of the project's workers, by recipe name and command line.
type realWorker struct {
	name string
	argv []string
}

// realWorkers builds zlockcheck and the Curator worker into dir and returns the
// project's workers: zlc-mutex and gozk through zlockcheck worker, Curator's
// InterProcessMutex through the Java worker, Kazoo's Lock through the Python one.
func realWorkers(t *testing.T, dir string) []realWorker {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "zlockcheck")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/zlockcheck").CombinedOutput(); err != nil {
		t.Fatalf("build zlockcheck: %v\n%s", err, out)
	}
	curator := filepath.Join(dir, "curator")
	if out, err := exec.Command("sh", filepath.Join(root, "recipes/curator/build.sh"), curator).CombinedOutput(); err != nil {
		t.Fatalf("build the Curator worker: %v\n%s", err, out)
	}
	return []realWorker{
		{"zlc-mutex", []string{bin, "worker", "--recipe", "zlc-mutex"}},
		{"gozk", []string{bin, "worker", "--recipe", "gozk"}},
		{"curator-mutex", []string{filepath.Join(root, "recipes/curator/run.sh"), curator, "curator-mutex"}},
		{"kazoo-lock", []string{"/usr/bin/python3", filepath.Join(root, "recipes/kazoo/kazoo_worker.py"), "kazoo-lock"}},
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
