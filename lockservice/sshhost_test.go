package lockservice

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/testnodes"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// TestSSHHostLifecycle starts a stand-in server (a shell that sleeps, its zoo.cfg
// path on its command line as ZooKeeper's), pauses, resumes, kills and restarts it
// through SSHHost's scripts, on this machine's sh (testnodes.LocalShell, a stand-in
// for an SSH node).
func TestSSHHostLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's s1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &SSHHost{id: 1, node: testnodes.LocalShell{}, dir: dir, prefix: SSHTablePrefix("abc123")}
	h.argv = []string{"sh", "-c", "echo started; sleep 60; :", h.file("zoo.cfg")}
	ctx := context.Background()
	if err := h.Signal(ctx, syscall.SIGSTOP); !errors.Is(err, nemesis.ErrNotRunning) {
		t.Fatalf("signal before start: %v, want ErrNotRunning", err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Kill(context.Background()) })
	pid := h.Pid()
	if pid <= 1 {
		t.Fatalf("pid %d after start", pid)
	}
	if pgid, _ := syscall.Getpgid(pid); pgid != pid {
		t.Fatalf("server %d leads process group %d, want its own", pid, pgid)
	}
	if err := h.Start(ctx); err == nil {
		t.Fatal("a second start of a running server succeeded")
	}
	if err := h.Signal(ctx, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The stop takes effect when the process next runs: on a busy machine, not at once.
	st := procState(t, pid)
	for deadline := time.Now().Add(2 * time.Second); st != "T" && time.Now().Before(deadline); st = procState(t, pid) {
		time.Sleep(10 * time.Millisecond)
	}
	if st != "T" {
		t.Fatalf("state %q 2s after SIGSTOP", st)
	}
	if err := h.Signal(ctx, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := h.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("kill took %s, state %q", time.Since(t0), procState(t, pid))
	if h.Pid() != 0 {
		t.Fatal("pid after kill")
	}
	if err := syscall.Kill(pid, 0); err == nil && procState(t, pid) != "Z" {
		t.Fatalf("process %d still alive after Kill", pid)
	}
	if err := h.Kill(ctx); err != nil {
		t.Fatalf("kill of a stopped server: %v", err)
	}
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	lines, err := h.LogTail(ctx, 5)
	if err != nil || len(lines) != 2 || lines[1] != "started" {
		t.Fatalf("log tail %q, %v: want two starts", lines, err)
	}
}

// TestSSHHostPidFileGuard: a pid file that names another process (a reused pid) is
// never signalled.
func TestSSHHostPidFileGuard(t *testing.T) {
	dir := t.TempDir()
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer other.Process.Kill()
	if err := os.WriteFile(filepath.Join(dir, "server.pid"), []byte(strconv.Itoa(other.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := &SSHHost{id: 1, node: testnodes.LocalShell{}, dir: dir, pid: other.Process.Pid}
	if err := h.Signal(context.Background(), syscall.SIGSTOP); !errors.Is(err, nemesis.ErrNotRunning) {
		t.Fatalf("signal through a foreign pid file: %v", err)
	}
	if err := h.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if procState(t, other.Process.Pid) == "T" || other.ProcessState != nil {
		t.Fatal("the foreign process was touched")
	}
	if err := syscall.Kill(other.Process.Pid, 0); err != nil {
		t.Fatalf("the foreign process was killed: %v", err)
	}
}

func TestSSHHostGlob(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "zk home")
	_ = os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	for _, f := range []string{"zookeeper-3.9.jar", "lib/a.jar", "lib/b.jar"} {
		_ = os.WriteFile(filepath.Join(dir, f), nil, 0o644)
	}
	h := &SSHHost{id: 1, node: testnodes.LocalShell{}}
	got, err := h.Glob(context.Background(), filepath.Join(dir, "*.jar"), filepath.Join(dir, "lib/*.jar"), filepath.Join(dir, "none/*.jar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || !strings.HasSuffix(got[0], "zookeeper-3.9.jar") {
		t.Fatalf("glob: %q, want the three jars, pattern after pattern", got)
	}
	if h.Where() != "local" {
		t.Errorf("Where() = %q, want the node's name", h.Where())
	}
}

// TestSSHHostKnowsAServerByItsDirectory: a server whose command line does not name
// its configuration (redis-server rewrites its process title) is known by its
// working directory, in its node directory.
func TestSSHHostKnowsAServerByItsDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &SSHHost{id: 1, node: testnodes.LocalShell{}, dir: dir}
	h.SetArgv([]string{"sleep", "60"})
	if err := h.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Kill(context.Background()) })
	pid := h.Pid()
	if pid <= 1 {
		t.Fatalf("pid %d after start: the host does not know its server by its directory", pid)
	}
	if err := h.Kill(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := procState(t, pid); st != "" && st != "Z" {
		t.Fatalf("server %d in state %q after Kill", pid, st)
	}
}

func procState(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return ""
	}
	_, rest, _ := strings.Cut(string(data), ") ")
	return rest[:1]
}
