package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestSSHRunsRedis: RedLock's three independent instances on three SSH nodes (the
// test's own, in namespaces it made), redsync under server faults made on the nodes
// (an instance paused, an instance partitioned: RedLock's majority holds) is valid;
// each instance's redis.conf, listening on its node's address, and its log come back
// into the run directory, and nothing is left on the nodes or on this machine.
func TestSSHRunsRedis(t *testing.T) {
	requireRedis(t)
	nodes := testnodes.StartT(t, 3)
	store, nodeDir := keptIfFailed(t), filepath.Join(t.TempDir(), "nodes")
	args := append([]string{"run", "--service", "redis", "--recipe", "redsync", "--nemesis", "pause,partition",
		"--nemesis-interval", "3s", "--time", "15s", "--seed", "3", "--store", store}, sshArgs(nodes, nodeDir)...)
	code, stdout, stderr := zlockcheck(t, args...)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)", code, exitValid)
	}
	assertFaultsApplied(t, stderr)
	for id := 1; id <= 3; id++ {
		dir := filepath.Join(store, "latest", "servers", fmt.Sprintf("s%d", id))
		conf, err := os.ReadFile(filepath.Join(dir, "redis.conf"))
		if err != nil || !strings.Contains(string(conf), "bind "+nodes.Addrs[id-1].String()+"\n") {
			t.Errorf("instance %d: redis.conf does not bind its node's address (%v):\n%s", id, err, conf)
		}
		if _, err := os.Stat(filepath.Join(dir, "server.log")); err != nil {
			t.Errorf("instance %d: %v", id, err)
		}
	}
	assertNothingLeftOnNodes(t, store, nodes, nodeDir)
}
