package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestConnectToAnExistingEnsemble runs against an ensemble zlockcheck does not manage
// (three servers on test nodes, reached like remote hosts): client faults work, the
// verdicts are the usual ones, and the run leaves nothing behind, neither on this
// host (namespaces, links, nft tables, forwarding) nor on the ensemble (its chroot).
func TestConnectToAnExistingEnsemble(t *testing.T) {
	requireIntegration(t)
	nodes := testnodes.StartT(t, 3)
	connect, stop, err := nodes.StartEnsemble(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	fwd := forwardingOf(t, nodes.Bridge())

	t.Run("refusals", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--connect", connect, "--nemesis", "kill"}, "does not manage them"},
			{[]string{"--connect", connect, "--nemesis", "partition"}, "does not manage them"},
			{[]string{"--connect", "127.0.0.1:2181"}, "loopback"},
			{[]string{"--connect", connect, "--chroot", "zlockcheck/x"}, "chroot"},
		} {
			store := t.TempDir()
			code, _, stderr := zlockcheck(t, append([]string{"run", "--store", store, "--time", "5s"}, c.args...)...)
			if code != exitError || !strings.Contains(stderr, c.want) {
				t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, exitError, c.want)
			}
			if entries, _ := os.ReadDir(store); len(entries) > 0 {
				t.Errorf("%v: refused, yet the run started (store has %d entries)", c.args, len(entries))
			}
		}
	})
	t.Run("zlc-mutex/valid", func(t *testing.T) {
		store := t.TempDir()
		code, stdout, stderr := zlockcheck(t, "run", "--connect", connect, "--recipe", "zlc-mutex",
			"--nemesis", "client-pause,client-partition,session-expire,client-kill,reply-loss,client-server-partition", "--nemesis-interval", "3s",
			"--time", "20s", "--seed", "3", "--store", store)
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
		if code != exitValid {
			t.Fatalf("exit %d, want %d (valid)", code, exitValid)
		}
		if !strings.Contains(stderr, "nemesis: start") {
			t.Error("no fault was injected")
		}
		assertFaultsApplied(t, stderr)
		res := readResults(t, store)
		if v, _ := res["zookeeper_version"].(string); !strings.Contains(v, "existing, not managed by zlockcheck") {
			t.Errorf("results.json does not say the ensemble was an existing one: zookeeper_version %q", v)
		}
		assertConnectLeftNothing(t, store, connect, nodes.Bridge(), fwd)
	})
	t.Run("zlc-mutex/client-server-partition", func(t *testing.T) {
		testenv.Long(t, "client-server-partition alone; make test keeps it among zlc-mutex/valid's client faults")
		// Made on the workers' side: the servers are not the tool's to change.
		store := t.TempDir()
		code, stdout, stderr := zlockcheck(t, "run", "--connect", connect, "--recipe", "zlc-mutex",
			"--nemesis", "client-server-partition", "--nemesis-interval", "2s",
			"--time", "15s", "--seed", "5", "--store", store)
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
		if code != exitValid {
			t.Fatalf("exit %d, want %d (valid)", code, exitValid)
		}
		if !strings.Contains(stderr, "workers' side") {
			t.Error("no client-server partition was made on the workers' side")
		}
		assertFaultsApplied(t, stderr)
		assertConnectLeftNothing(t, store, connect, nodes.Bridge(), fwd)
	})
	t.Run("gozk/client-pause/invalid", func(t *testing.T) {
		// TestClientPauseBreaksGozk's detection (same fault, seed and length) over --connect.
		testenv.Long(t, "TestClientPauseBreaksGozk's detection again over --connect; make test keeps it on a managed ensemble")
		store := t.TempDir()
		code, stdout, stderr := zlockcheck(t, "run", "--connect", connect, "--recipe", "gozk",
			"--nemesis", "client-pause", "--nemesis-targets", "holder", "--nemesis-interval", "3s",
			"--time", "30s", "--seed", "11", "--store", store, "--chroot", "/zlockcheck-test/gozk")
		t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
		if code != exitInvalid {
			t.Fatalf("exit %d, want %d (invalid)", code, exitInvalid)
		}
		assertConnectLeftNothing(t, store, connect, nodes.Bridge(), fwd)
	})
}

func forwardingOf(t *testing.T, ifc string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + ifc + "/forwarding")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// assertConnectLeftNothing checks that the --connect run stored in store left no
// namespace, link, nft table or uplink state on this host, restored forwarding on
// the interface towards the ensemble, and deleted its chroot (and the parents it
// made) on the ensemble.
func assertConnectLeftNothing(t *testing.T, store, connect, bridge, fwd string) {
	t.Helper()
	assertHostLeftNothing(t, store, bridge, fwd)
	assertChrootGone(t, store, connect)
}

// assertHostLeftNothing checks that the --connect run stored in store left no
// namespace, link, nft table or uplink state on this host, and restored forwarding on
// the interface towards the servers.
func assertHostLeftNothing(t *testing.T, store, bridge, fwd string) {
	t.Helper()
	runID := runIDOf(t, store)
	names, _ := netns.List()
	for _, n := range names {
		if strings.HasPrefix(n, netns.Prefix+runID) {
			t.Errorf("namespace %s left behind", n)
		}
	}
	if links, _ := exec.Command("ip", "-o", "link").Output(); strings.Contains(string(links), netns.Prefix+runID) {
		t.Errorf("links of run %s left in the host namespace:\n%s", runID, links)
	}
	if tables, _ := exec.Command("nft", "list", "tables").Output(); strings.Contains(string(tables), runID) {
		t.Errorf("nft table of run %s left in the host namespace:\n%s", runID, tables)
	}
	if _, err := os.Stat("/run/" + netns.Prefix + runID + ".uplink"); err == nil {
		t.Error("uplink state file left behind")
	}
	if got := forwardingOf(t, bridge); got != fwd {
		t.Errorf("forwarding on %s is %s after the run, was %s", bridge, got, fwd)
	}
}

// assertChrootGone checks that the --connect run stored in store deleted its chroot
// (and the parents it made) on the ensemble.
func assertChrootGone(t *testing.T, store, connect string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Connect string `json:"connect"`
		Chroot  string `json:"chroot"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.Connect != connect || cfg.Chroot == "" {
		t.Fatalf("config.json does not record connect and chroot: %+v, %v", cfg, err)
	}
	// The test runs in the host's namespace, which reaches the nodes directly.
	conn, _, err := zk.Connect(strings.Split(connect, ","), 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	root := "/" + strings.Split(strings.TrimPrefix(cfg.Chroot, "/"), "/")[0]
	for _, p := range []string{cfg.Chroot, root} {
		ok, _, err := conn.Exists(p)
		if err != nil {
			t.Fatalf("exists %s: %v", p, err)
		}
		if ok {
			t.Errorf("%s left on the ensemble", p)
		}
	}
}

// assertFaultsApplied fails when a fault could not be applied to the workers of a
// --connect run, except a session-expire aimed at a session that had already ended
// (the worker replaced it meanwhile: the same happens on the run's own ensemble), or
// when none was applied.
func assertFaultsApplied(t *testing.T, stderr string) {
	t.Helper()
	applied := 0
	var stops []string
	for _, line := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(line, "nemesis: stop ") {
			stops = append(stops, line)
		}
	}
	for i, line := range stops {
		switch {
		case !strings.Contains(line, `"error"`):
			applied++
		case i == len(stops)-1 && strings.Contains(line, "context deadline exceeded"):
			// The run's end cut the last fault's apply short.
		case strings.Contains(line, "session-expire") && strings.Contains(line, "has expired or the password is wrong"):
		default:
			t.Errorf("a fault failed against the existing ensemble: %s", line)
		}
	}
	if applied == 0 {
		t.Error("no fault was applied")
	}
}
