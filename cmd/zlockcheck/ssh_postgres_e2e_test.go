package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestSSHRunsPostgres: a PostgreSQL primary and its streaming standby on two SSH
// nodes (the test's own, in namespaces it made), pg-advisory under server faults
// made on the nodes (the primary killed and paused) is valid; each server's
// configuration, listening on its node's address, and its log come back into the run
// directory, and nothing is left on the nodes or on this machine.
func TestSSHRunsPostgres(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.NFTables, testenv.PostgreSQL)
	nodes := testnodes.StartT(t, 2)
	// The node directory's parents must let the postgres account in.
	store, nodeDir := keptIfFailed(t), filepath.Join(keptIfFailed(t), "nodes")
	args := append([]string{"run", "--service", "postgres", "--recipe", "pg-advisory", "--nemesis", "kill,pause",
		"--nemesis-interval", "3s", "--time", "15s", "--seed", "3", "--store", store}, sshArgs(nodes, nodeDir)...)
	code, stdout, stderr := zlockcheck(t, args...)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)", code, exitValid)
	}
	assertFaultsApplied(t, stderr)
	for id := 1; id <= 2; id++ {
		dir := filepath.Join(store, "latest", "servers", fmt.Sprintf("s%d", id))
		conf, err := os.ReadFile(filepath.Join(dir, "postgresql.conf"))
		if err != nil || !strings.Contains(string(conf), "listen_addresses = '"+nodes.Addrs[id-1].String()+"'") {
			t.Errorf("server %d: postgresql.conf does not listen on its node's address (%v):\n%s", id, err, conf)
		}
		if id == 2 && !strings.Contains(string(conf), "primary_conninfo = 'host="+nodes.Addrs[0].String()) {
			t.Errorf("server 2 is not a standby of node 1:\n%s", conf)
		}
		if _, err := os.Stat(filepath.Join(dir, "server.log")); err != nil {
			t.Errorf("server %d: %v", id, err)
		}
	}
	assertNothingLeftOnNodes(t, store, nodes, nodeDir)
}
