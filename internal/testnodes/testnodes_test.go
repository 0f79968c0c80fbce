package testnodes

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/netns"
)

// ssh logs in to node addr with the fixture's key and host keys, runs a command.
func ssh(n *Nodes, addr string, argv ...string) ([]byte, error) {
	args := append([]string{"-i", n.KeyFile, "-o", "UserKnownHostsFile=" + n.KnownHostsFile,
		"-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
		n.User + "@" + addr}, argv...)
	return exec.Command("ssh", args...).CombinedOutput()
}

func TestNodesServeSSHAndLeaveNothing(t *testing.T) {
	n := StartT(t, 2)
	if _, err := exec.LookPath("ssh"); err != nil {
		t.Skip("no ssh client")
	}
	for i, a := range n.Addrs {
		out, err := ssh(n, a.String(), "ip", "-o", "-4", "addr", "show", "dev", "eth0")
		if err != nil || !strings.Contains(string(out), a.String()) {
			t.Fatalf("node %d: ssh: %v: %s", i, err, out)
		}
	}
	// No sshd of ours listens in the host's own namespace.
	if out, _ := exec.Command("ss", "-Hltn", "sport = :22").Output(); len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("something listens on port 22 in the host namespace: %s", out)
	}
	if err := n.StopSSHD(1); err != nil {
		t.Fatal(err)
	}
	if out, err := ssh(n, n.Addrs[1].String(), "true"); err == nil || !strings.Contains(string(out), "refused") {
		t.Errorf("ssh to a node whose sshd was stopped: %v: %s", err, out)
	}
	dir, br, nets := n.Dir, n.Bridge(), []string{n.Netns(0), n.Netns(1)}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	assertGone(t, dir, br, nets)
}

// TestCleanupRemovesACrashedFixture: a fixture whose process died (its owner file
// names a dead pid and nobody holds its lock) is removed by netns.CleanupAll, bridge included.
func TestCleanupRemovesACrashedFixture(t *testing.T) {
	n := StartT(t, 1)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	// A new owner file (the fixture's lock stays on the one removed) naming a dead pid.
	owner := "/run/" + netns.Prefix + n.id + ".owner"
	if err := os.Remove(owner); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(owner, []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := netns.CleanupAll(false)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(rep.Links, n.Bridge()) || !contains(rep.Namespaces, n.Netns(0)) {
		t.Errorf("cleanup report %+v misses the fixture's bridge or namespace", rep)
	}
	assertGone(t, n.Dir, n.Bridge(), []string{n.Netns(0)})
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func assertGone(t *testing.T, dir, bridge string, nets []string) {
	t.Helper()
	if _, err := os.Stat("/sys/class/net/" + bridge); err == nil {
		t.Errorf("bridge %s left behind", bridge)
	}
	for _, ns := range nets {
		if netns.Exists(ns) {
			t.Errorf("namespace %s left behind", ns)
		}
	}
	if out, _ := exec.Command("pgrep", "-f", "sshd -D -e -f "+dir).Output(); len(out) > 0 {
		t.Errorf("sshd left running: %s", out)
	}
}

func TestStartEnsembleServes(t *testing.T) {
	n := StartT(t, 3)
	connect, stop, err := n.StartEnsemble(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if got := strings.Count(connect, ":2181"); got != 3 {
		t.Errorf("connect string %q", connect)
	}
	out, err := fourLetter(context.Background(), strings.Split(connect, ",")[0], "srvr")
	if err != nil || !strings.Contains(out, "Mode:") {
		t.Errorf("srvr: %v: %s", err, out)
	}
	if err := stop(); err != nil {
		t.Error(err)
	}
}
