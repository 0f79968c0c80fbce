package lockservice

import (
	"bytes"
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

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/sshnode"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// localShell is a fake node for unit tests: it runs sshHost's scripts with this
// machine's sh, as sshd would run them with the login shell, so the scripts (pid
// file, process group, signals, quoting) are tested without SSH.
type localShell struct{}

func (localShell) String() string { return "local" }

func (localShell) Run(ctx context.Context, c sshnode.Cmd) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", c.Script)
	cmd.Stdin = bytes.NewReader(c.Stdin)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out, &sshnode.Error{Node: "local", What: c.What, Status: ee.ExitCode(), Output: string(out)}
	}
	return out, err
}

func (l localShell) Exec(ctx context.Context, stdin []byte, argv ...string) ([]byte, error) {
	return l.Run(ctx, sshnode.Cmd{Script: sshnode.QuoteArgv(argv), Stdin: stdin})
}

func (localShell) ReadFile(_ context.Context, file string) ([]byte, error) { return os.ReadFile(file) }

func (localShell) WriteFile(_ context.Context, file string, data []byte, perm os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, data, perm)
}

// TestSSHHostLifecycle starts a stand-in server (a shell that sleeps, its zoo.cfg
// path on its command line as the real server's), pauses, resumes, kills and
// restarts it through sshHost's scripts.
func TestSSHHostLifecycle(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "it's s1")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	h := &sshHost{id: 1, node: localShell{}, dir: dir, prefix: sshTablePrefix("abc123")}
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
	if st := procState(t, pid); st != "T" {
		t.Fatalf("state %q after SIGSTOP", st)
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
	h := &sshHost{id: 1, node: localShell{}, dir: dir, pid: other.Process.Pid}
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
	h := &sshHost{id: 1, node: localShell{}}
	cfg := EnsembleConfig{ZKHome: dir}
	cp, err := cfg.classpath(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(cp, ".jar"); got != 3 {
		t.Fatalf("classpath %q: want 3 jars", cp)
	}
	cfg.ZKHome = filepath.Join(t.TempDir(), "none")
	if _, err := cfg.classpath(context.Background(), h); err == nil || !strings.Contains(err.Error(), "on local") {
		t.Fatalf("missing install: %v, want an error naming the node", err)
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
	out, err := localShell{}.Run(context.Background(), sshnode.Cmd{Script: cleanupScript(base, "false", nil)})
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
	me := machineID()
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
			if err := os.WriteFile(filepath.Join(base, "zlc"+id, nodeOwnerFile), []byte(content+"\n"), 0o644); err != nil {
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

	ids, err := deadRunsOn(context.Background(), localShell{}, base, me)
	if err != nil || len(ids) != 1 || ids[0] != dead {
		t.Fatalf("dead runs = %v, %v; want [%s]", ids, err, dead)
	}
	out, err := sweepNode(context.Background(), localShell{}, base, "false", ids)
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
