package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// The SSH-node tests run zlockcheck against a fixture (internal/testnodes): network
// namespaces joined by a bridge, each running sshd. The nodes share this machine's
// file system, so these tests prove the SSH control path, the faults on the nodes and
// the network between control node, workers and servers, not an install on another
// host.

// sshArgs are the flags that point a run at the fixture's nodes, their files under
// nodeDir.
func sshArgs(n *testnodes.Nodes, nodeDir string) []string {
	addrs := make([]string, len(n.Addrs))
	for i, a := range n.Addrs {
		addrs[i] = a.String()
	}
	return []string{"--ssh-nodes", strings.Join(addrs, ","), "--ssh-user", n.User, "--ssh-key", n.KeyFile,
		"--ssh-known-hosts", n.KnownHostsFile, "--node-dir", nodeDir}
}

// assertNothingLeftOnNodes fails if the run stored in store left anything: on this
// machine (its namespaces, processes, links, nftables tables) or on the nodes (a
// table, a server process, a node directory).
func assertNothingLeftOnNodes(t *testing.T, store string, n *testnodes.Nodes, nodeDir string) {
	t.Helper()
	runID := runIDOf(t, store)
	names, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if strings.HasPrefix(name, netns.Prefix+runID) {
			t.Errorf("namespace of run %s left behind: %s", runID, name)
		}
	}
	dir, _ := filepath.EvalSymlinks(filepath.Join(store, "latest"))
	for _, pattern := range []string{dir, "zlc/" + runID, nodeDir} {
		out, _ := exec.Command("pgrep", "-af", pattern).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("processes of run %s left behind: %s", runID, s)
		}
	}
	out, _ := exec.Command("ip", "-o", "link").Output()
	if strings.Contains(string(out), "zlc"+runID) {
		t.Errorf("links of run %s left in the host namespace:\n%s", runID, out)
	}
	out, _ = exec.Command("nft", "list", "tables").Output()
	if strings.Contains(string(out), runID) {
		t.Errorf("nftables tables of run %s left in the host namespace:\n%s", runID, out)
	}
	for i := range n.Addrs {
		out, err := netns.Exec(t.Context(), n.Netns(i), nil, "nft", "list", "tables")
		if err != nil {
			t.Errorf("node %d: nft list tables: %v", i+1, err)
		}
		if strings.Contains(string(out), "zlc_") {
			t.Errorf("node %d: nftables tables left:\n%s", i+1, out)
		}
	}
	entries, _ := os.ReadDir(nodeDir)
	for _, e := range entries {
		t.Errorf("node directory left: %s", filepath.Join(nodeDir, e.Name()))
	}
}

// TestSSHRunServerFaultsValid: a 30 s zlc-mutex run on four SSH nodes, the last an
// observer, under kill, pause and partition is valid, brings every server's files
// back (its srvr mode too) and leaves nothing.
func TestSSHRunServerFaultsValid(t *testing.T) {
	requireIntegration(t)
	testenv.Long(t, "TestSSHRunsEveryKind applies server faults on SSH nodes through the same hosts, TestObserversServerFaultsValid runs observers under them, and the SSH sweep and SIGINT tests run ZooKeeper on SSH nodes")
	nodes := testnodes.StartT(t, 4)
	store, nodeDir := t.TempDir(), filepath.Join(t.TempDir(), "nodes")
	args := append([]string{"run", "--recipe", "zlc-mutex", "--observers", "1", "--nemesis", "kill,pause,partition",
		"--nemesis-interval", "3s", "--time", "30s", "--seed", "5", "--store", store}, sshArgs(nodes, nodeDir)...)
	code, stdout, stderr := zlockcheck(t, args...)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)", code, exitValid)
	}
	if strings.Count(stderr, "nemesis: start") < 2 {
		t.Errorf("fewer than 2 faults in 30 s:\n%s", stderr)
	}
	for id := 1; id <= 4; id++ {
		for _, f := range []string{"zoo.cfg", "server.log", "srvr.txt"} {
			if _, err := os.Stat(filepath.Join(store, "latest", "servers", fmt.Sprintf("s%d", id), f)); err != nil {
				t.Errorf("server %d: %v", id, err)
			}
		}
	}
	cfg, _ := os.ReadFile(filepath.Join(store, "latest", "servers", "s1", "zoo.cfg"))
	if !strings.Contains(string(cfg), "server.2="+nodes.Addrs[1].String()+":2888:3888\n") ||
		!strings.Contains(string(cfg), "server.4="+nodes.Addrs[3].String()+":2888:3888:observer\n") {
		t.Errorf("zoo.cfg does not name the nodes' addresses and the observer:\n%s", cfg)
	}
	if srvr, _ := os.ReadFile(filepath.Join(store, "latest", "servers", "s4", "srvr.txt")); !strings.Contains(string(srvr), "Mode: observer") {
		t.Errorf("s4 is not an observer: its srvr.txt:\n%s", srvr)
	}
	var timings struct {
		Quorum time.Duration `json:"quorum_ns"`
	}
	data, _ := os.ReadFile(filepath.Join(store, "latest", "timings.json"))
	_ = json.Unmarshal(data, &timings)
	t.Logf("time to quorum over SSH: %s", timings.Quorum)
	assertNothingLeftOnNodes(t, store, nodes, nodeDir)
}

// TestSSHSIGINTDuringPartitionHeals interrupts an SSH run while a partition is on
// the nodes: the run heals, tears down and leaves nothing.
func TestSSHSIGINTDuringPartitionHeals(t *testing.T) {
	requireIntegration(t)
	nodes := testnodes.StartT(t, 3)
	store, nodeDir := t.TempDir(), filepath.Join(t.TempDir(), "nodes")
	args := append([]string{"run", "--recipe", "zlc-mutex", "--nemesis", "partition", "--nemesis-interval", "1s",
		"--time", "120s", "--seed", "9", "--store", store, "--quiet"}, sshArgs(nodes, nodeDir)...)
	cmd := exec.Command(binary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if !waitForPartition(store, 90*time.Second) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("no partition started within 90 s:\n%s", stderr.String())
	}
	// The partition is on the nodes: a zlc_<run>_partition table on one of them (the
	// start is recorded before the fault is applied: give it a moment).
	runID := runIDOf(t, store)
	found := false
	for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); {
		for i := range nodes.Addrs {
			out, _ := netns.Exec(t.Context(), nodes.Netns(i), nil, "nft", "list", "tables")
			found = found || strings.Contains(string(out), "zlc_"+runID+"_partition")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !found {
		t.Error("no zlc_<run>_partition table on any node while the partition was on")
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatal(err)
	}
	t.Logf("stderr:\n%s", stderr.String())
	assertNothingLeftOnNodes(t, store, nodes, nodeDir)
	data, _ := os.ReadFile(filepath.Join(store, "latest", "history.jsonl"))
	if !strings.Contains(string(data), `"f":"stop"`) {
		t.Error("the partition's heal was not recorded")
	}
}

// waitForPartition waits until the last nemesis op of the store's latest history
// starts a partition.
func waitForPartition(store string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(filepath.Join(store, "latest", "history.jsonl"))
		lines := strings.Split(string(data), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], `"process":"nemesis"`) {
				if strings.Contains(lines[i], `"f":"start"`) && strings.Contains(lines[i], "partition") {
					return true
				}
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return false
}

// TestSSHDeadNodeIsAClearError: with sshd down on one node the run fails before it
// starts, naming the node, and leaves nothing.
func TestSSHDeadNodeIsAClearError(t *testing.T) {
	requireIntegration(t)
	nodes := testnodes.StartT(t, 3)
	if err := nodes.StopSSHD(1); err != nil {
		t.Fatal(err)
	}
	store, nodeDir := t.TempDir(), filepath.Join(t.TempDir(), "nodes")
	args := append([]string{"run", "--recipe", "zlc-mutex", "--time", "10s", "--store", store, "--quiet"}, sshArgs(nodes, nodeDir)...)
	start := time.Now()
	code, stdout, stderr := zlockcheck(t, args...)
	t.Logf("exit %d after %s\nstdout:\n%s\nstderr:\n%s", code, time.Since(start), stdout, stderr)
	if code != exitError {
		t.Fatalf("exit %d, want %d (error)", code, exitError)
	}
	want := "node 2 (" + nodes.Addrs[1].String() + ")"
	if !strings.Contains(stderr, want) || !strings.Contains(stderr, "connection refused") {
		t.Errorf("the error does not name %s and why", want)
	}
	if strings.Contains(stderr, "node 1 (") || strings.Contains(stderr, "node 3 (") {
		t.Error("the error blames a node whose sshd runs")
	}
	if data, _ := os.ReadFile(filepath.Join(store, "latest", "history.jsonl")); strings.Contains(string(data), `"f":"acquire"`) {
		t.Error("the run started although a node was unreachable")
	}
	assertNothingLeftOnNodes(t, store, nodes, nodeDir)
}
