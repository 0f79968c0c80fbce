package lockservice

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// TestCleanupScript runs cleanup's node script here, with nft replaced by false (it
// must not touch this machine's tables): it kills a stand-in server started from a
// zlc node directory, leaves one that is not, and removes the directory.
func TestCleanupScript(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "zlcabc123", "s1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ours := exec.Command("setsid", "sh", "-c", "sleep 60; :", "QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	theirs := exec.Command("sh", "-c", "sleep 60; :", "QuorumPeerMain", filepath.Join(base, "other", "zoo.cfg"))
	for _, c := range []*exec.Cmd{ours, theirs} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
	}
	done := make(chan error, 1)
	go func() { done <- ours.Wait() }()
	time.Sleep(100 * time.Millisecond)
	out, err := testnodes.LocalShell{}.Run(context.Background(), sshnode.Cmd{Script: cleanupScript(base, "false", nil)})
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the server of a zlc node directory survived cleanup: %s", out)
	}
	if err := theirs.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("cleanup killed a server it did not start: %v", err)
	}
	if _, err := os.Stat(filepath.Join(base, "zlcabc123")); !os.IsNotExist(err) {
		t.Fatalf("node directory left: %v", err)
	}
	if !strings.Contains(string(out), "server process") || !strings.Contains(string(out), "directory "+base) {
		t.Fatalf("cleanup said %q", out)
	}
}

// TestSweepNodeRemovesOnlyDeadRunsOfThisMachine runs the sweep's node scripts here
// (nft replaced by false): of the run directories under the node directory, only the
// one this machine started whose owner here is dead goes, with its server; a live
// run's, another machine's and one without an owner file stay.
func TestSweepNodeRemovesOnlyDeadRunsOfThisMachine(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root)
	base := t.TempDir()
	me := MachineID()
	live := "tl" + netns.RandomID()[:5]
	owner := "/run/" + netns.Prefix + live + ".owner"
	if err := os.WriteFile(owner, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(owner)
	dead := "td" + netns.RandomID()[:5]
	runs := map[string]string{dead: me + " " + dead, live: me + " " + live, "tother1": "another-machine tother1", "told001": ""}
	for id, content := range runs {
		dir := filepath.Join(base, "zlc"+id, "s1")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if content != "" {
			if err := os.WriteFile(filepath.Join(base, "zlc"+id, NodeOwnerFile), []byte(content+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	server := exec.Command("setsid", "sh", "-c", "sleep 60; :", "QuorumPeerMain", filepath.Join(base, "zlc"+dead, "s1", "zoo.cfg"))
	kept := exec.Command("sh", "-c", "sleep 60; :", "QuorumPeerMain", filepath.Join(base, "zlc"+live, "s1", "zoo.cfg"))
	for _, c := range []*exec.Cmd{server, kept} {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		defer c.Process.Kill()
	}
	done := make(chan error, 1)
	go func() { done <- server.Wait() }()
	time.Sleep(100 * time.Millisecond)

	ids, err := deadRunsOn(context.Background(), testnodes.LocalShell{}, base, me)
	if err != nil || len(ids) != 1 || ids[0] != dead {
		t.Fatalf("dead runs = %v, %v; want [%s]", ids, err, dead)
	}
	out, err := sweepNode(context.Background(), testnodes.LocalShell{}, base, "false", ids)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatalf("the dead run's server survived the sweep: %s", out)
	}
	if err := kept.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the sweep killed the live run's server: %v", err)
	}
	for id := range runs {
		_, err := os.Stat(filepath.Join(base, "zlc"+id))
		if gone := os.IsNotExist(err); gone != (id == dead) {
			t.Errorf("run %s: directory gone %v after the sweep, want %v", id, gone, id == dead)
		}
	}
	if s := strings.Join(out, "\n"); !strings.Contains(s, "server process") || !strings.Contains(s, "directory "+filepath.Join(base, "zlc"+dead)) {
		t.Errorf("the sweep said %q", s)
	}
}
