package main

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
	"github.com/zlockcheck/zlockcheck/internal/testnodes"
)

// runNamespaces lists the namespaces of run id that exist now.
func runNamespaces(t *testing.T, id string) []string {
	t.Helper()
	names, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, netns.Prefix+id) {
			out = append(out, n)
		}
	}
	return out
}

// startBackground starts the binary with args, its stderr kept in the returned
// builder (read it after Wait).
func startBackground(t *testing.T, args ...string) (*exec.Cmd, *strings.Builder) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, &stderr
}

// waitFor polls cond every 100 ms for up to limit.
func waitFor(limit time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return false
}

// cmdline is process pid's command line ("" when it does not run).
func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	return string(b)
}

// partitioned reports whether a namespace of the run has a nemesis table (zlc_...).
func partitioned(names []string) bool {
	for _, ns := range names {
		out, err := netns.Exec(context.Background(), ns, nil, "nft", "list", "tables")
		if err == nil && strings.Contains(string(out), "zlc_") {
			return true
		}
	}
	return false
}

// TestSIGKILLedRunIsSweptByTheNext: a run's harness killed with SIGKILL mid-partition
// leaves its namespaces (a process still in one, as a daemonized server would be);
// the next run removes them, that process and the partition's tables, says so in one
// line, and is valid.
func TestSIGKILLedRunIsSweptByTheNext(t *testing.T) {
	requireIntegration(t)
	storeA, storeB := t.TempDir(), t.TempDir()
	a, _ := startBackground(t, "run", "--nodes", "3", "--workers", "3", "--time", "60s", "--seed", "3",
		"--nemesis", "partition,client-partition", "--nemesis-interval", "1s", "--store", storeA, "--quiet")
	var id string
	var names []string
	if !waitFor(50*time.Second, func() bool {
		if _, err := os.Stat(filepath.Join(storeA, "latest", "config.json")); err != nil {
			return false
		}
		if id == "" {
			id = runIDOf(t, storeA)
		}
		names = runNamespaces(t, id)
		return partitioned(names)
	}) {
		t.Fatalf("run %q made no partition within 50 s (namespaces %v)", id, names)
	}
	// The run's processes, by their command lines (a pid may be reused later).
	procs := map[int]string{}
	for _, ns := range names {
		for _, pid := range netns.Pids(ns) {
			procs[pid] = cmdline(pid)
		}
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	// A process that outlives its harness, as a daemonized server does.
	survivor := exec.Command("ip", "netns", "exec", names[0], "sleep", "120")
	survivor.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := survivor.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = survivor.Wait(); close(exited) }()
	defer survivor.Process.Kill()
	if left := runNamespaces(t, id); len(left) == 0 {
		t.Fatal("the killed run left no namespaces to sweep")
	}

	code, _, errOut := zlockcheck(t, "run", "--nodes", "1", "--workers", "2", "--time", "4s", "--seed", "4", "--store", storeB, "--quiet")
	if code != exitValid {
		t.Errorf("second run: exit %d, want valid\n%s", code, errOut)
	}
	line := ""
	for _, l := range strings.Split(errOut, "\n") {
		if strings.HasPrefix(l, "swept what dead runs left") {
			line = l
		}
	}
	t.Logf("second run said: %s", line)
	if !strings.Contains(line, netns.Prefix+id+"hub") || !strings.Contains(line, "processes in them") {
		t.Errorf("the second run did not say it swept run %s's namespaces and processes: %q", id, errOut)
	}
	if left := runNamespaces(t, id); len(left) > 0 {
		t.Errorf("namespaces of the killed run left: %v", left)
	}
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Error("the process left in the killed run's namespace survived the sweep")
	}
	for pid, cmd := range procs {
		if now := cmdline(pid); now != "" && now == cmd {
			t.Errorf("process %d of the killed run still runs: %s", pid, cmd)
		}
	}
	if _, err := os.Stat("/run/" + netns.Prefix + id + ".owner"); err == nil {
		t.Error("the killed run's owner file is left")
	}
	if out, _ := exec.Command("ip", "-o", "link").Output(); strings.Contains(string(out), netns.Prefix+id) {
		t.Errorf("links of the killed run left in the host namespace:\n%s", out)
	}
	assertNothingLeft(t, storeB)
}

// TestConcurrentRunsDoNotSweepEachOther: a run starting while another is live (its
// owner's lock held) leaves it alone, and both are valid.
func TestConcurrentRunsDoNotSweepEachOther(t *testing.T) {
	requireIntegration(t)
	storeA, storeB := t.TempDir(), t.TempDir()
	// No faults: a partition of the one server, which this run had until 2026-11-30,
	// never did anything (it needs two servers, and is refused now).
	a, errA := startBackground(t, "run", "--nodes", "1", "--workers", "2", "--time", "14s", "--seed", "5",
		"--nemesis", "none", "--store", storeA, "--quiet")
	var idA string
	if !waitFor(40*time.Second, func() bool {
		if _, err := os.Stat(filepath.Join(storeA, "latest", "history.jsonl")); err != nil {
			return false
		}
		idA = runIDOf(t, storeA)
		return len(runNamespaces(t, idA)) > 0
	}) {
		t.Fatal("the first run made no namespaces within 40 s")
	}
	before := runNamespaces(t, idA)
	code, _, errB := zlockcheck(t, "run", "--nodes", "1", "--workers", "2", "--time", "4s", "--seed", "6", "--store", storeB, "--quiet")
	if code != exitValid {
		t.Errorf("second run: exit %d, want valid\n%s", code, errB)
	}
	idB := runIDOf(t, storeB)
	if strings.Contains(errB, netns.Prefix+idA) {
		t.Errorf("the second run swept the live first run %s: %s", idA, errB)
	}
	if a.ProcessState == nil {
		if now := runNamespaces(t, idA); len(now) < len(before) {
			t.Errorf("the first run's namespaces went while it ran: %v, then %v", before, now)
		}
	}
	err := a.Wait()
	if code := a.ProcessState.ExitCode(); err != nil && code != exitValid {
		t.Errorf("first run: %v, want valid\n%s", err, errA.String())
	}
	if strings.Contains(errA.String(), netns.Prefix+idB) {
		t.Errorf("the first run swept the second run %s: %s", idB, errA.String())
	}
	assertNothingLeft(t, storeA)
	assertNothingLeft(t, storeB)
}

// TestSIGKILLedSSHRunIsSweptByTheNext: a run on SSH nodes whose harness is killed
// mid-partition leaves its uplink here and its servers, tables and directory on the
// nodes; the next run on those nodes removes them all and is valid.
func TestSIGKILLedSSHRunIsSweptByTheNext(t *testing.T) {
	requireIntegration(t)
	nodes := testnodes.StartT(t, 3)
	storeA, storeB, nodeDir := t.TempDir(), t.TempDir(), filepath.Join(t.TempDir(), "nodes")
	a, errA := startBackground(t, append([]string{"run", "--recipe", "zlc-mutex", "--nemesis", "partition", "--nemesis-interval", "1s",
		"--time", "120s", "--seed", "9", "--store", storeA, "--quiet"}, sshArgs(nodes, nodeDir)...)...)
	if !waitForPartition(storeA, 90*time.Second) {
		t.Fatalf("no partition started within 90 s:\n%s", errA.String())
	}
	id := runIDOf(t, storeA)
	onNodes := func() bool {
		for i := range nodes.Addrs {
			out, _ := netns.Exec(t.Context(), nodes.Netns(i), nil, "nft", "list", "tables")
			if strings.Contains(string(out), "zlc_"+id+"_") {
				return true
			}
		}
		return false
	}
	if !waitFor(5*time.Second, onNodes) {
		t.Fatal("no zlc_<run>_ table on the nodes while the partition was on")
	}
	if err := a.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = a.Wait()
	if out, _ := exec.Command("pgrep", "-af", filepath.Join(nodeDir, "zlc"+id)).Output(); len(out) == 0 {
		t.Error("the killed run left no server on the nodes to sweep")
	}

	args := append([]string{"run", "--recipe", "zlc-mutex", "--time", "3s", "--seed", "10", "--store", storeB, "--quiet"}, sshArgs(nodes, nodeDir)...)
	code, _, errB := zlockcheck(t, args...)
	if code != exitValid {
		t.Errorf("second run: exit %d, want valid\n%s", code, errB)
	}
	t.Logf("second run said:\n%s", errB)
	if !strings.Contains(errB, "directory "+filepath.Join(nodeDir, "zlc"+id)) {
		t.Errorf("the second run did not say it swept run %s on the nodes", id)
	}
	if onNodes() {
		t.Error("the killed run's tables are left on the nodes")
	}
	assertNothingLeftOnNodes(t, storeA, nodes, nodeDir)
	assertNothingLeftOnNodes(t, storeB, nodes, nodeDir)
}

// TestSIGKILLedServiceRunsAreSwept: runs of every other service the tool starts
// (PostgreSQL, MariaDB, Redis), started at once (each sweeping while the others are
// live) and SIGKILLed once they record ops, are swept by the next run: their
// namespaces, server processes and database directories are gone.
func TestSIGKILLedServiceRunsAreSwept(t *testing.T) {
	requireDatabases(t)
	requireRedis(t)
	recipes := []string{"pg-advisory", "mariadb-getlock", "redis-lock"}
	type killed struct {
		cmd    *exec.Cmd
		stderr *strings.Builder
		store  string
	}
	var runs []killed
	for i, r := range recipes {
		store := keptIfFailed(t)
		cmd, stderr := startBackground(t, "run", "--recipe", r, "--nodes", "1", "--workers", "2", "--time", "60s",
			"--seed", strconv.Itoa(20+i), "--store", store, "--quiet")
		runs = append(runs, killed{cmd, stderr, store})
	}
	var ids []string
	var procs []map[int]string
	for i, r := range runs {
		if !waitFor(45*time.Second, func() bool {
			data, _ := os.ReadFile(filepath.Join(r.store, "latest", "history.jsonl"))
			return strings.Count(string(data), "\n") > 10
		}) {
			t.Fatalf("%s recorded no ops within 45 s: %s", recipes[i], r.stderr.String())
		}
		id := runIDOf(t, r.store)
		ids = append(ids, id)
		p := map[int]string{}
		for _, ns := range runNamespaces(t, id) {
			for _, pid := range netns.Pids(ns) {
				p[pid] = cmdline(pid)
			}
		}
		procs = append(procs, p)
	}
	for i, r := range runs {
		for j, id := range ids {
			if i != j && strings.Contains(r.stderr.String(), netns.Prefix+id) {
				t.Errorf("the %s run swept the live %s run: %s", recipes[i], recipes[j], r.stderr.String())
			}
		}
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		_ = r.cmd.Wait()
	}
	dirs, _ := filepath.Glob(filepath.Join(runs[0].store, "latest", "servers", "zlcpg-s*"))
	maria, _ := filepath.Glob(filepath.Join(runs[1].store, "latest", "servers", "zlcmariadb-s*"))
	dirs = append(dirs, maria...)
	if len(dirs) != 2 {
		t.Errorf("database server directories of the killed runs: %v, want one each", dirs)
	}

	store := t.TempDir()
	code, _, errOut := zlockcheck(t, "run", "--nodes", "1", "--workers", "2", "--time", "3s", "--seed", "23", "--store", store, "--quiet")
	if code != exitValid {
		t.Errorf("the next run: exit %d, want valid\n%s", code, errOut)
	}
	t.Logf("the next run said: %s", errOut)
	for i, id := range ids {
		if !strings.Contains(errOut, netns.Prefix+id+"hub") {
			t.Errorf("the next run did not say it swept the %s run %s", recipes[i], id)
		}
		if left := runNamespaces(t, id); len(left) > 0 {
			t.Errorf("namespaces of the killed %s run left: %v", recipes[i], left)
		}
		for pid, cmd := range procs[i] {
			if now := cmdline(pid); now != "" && now == cmd {
				t.Errorf("process %d of the killed %s run still runs: %s", pid, recipes[i], cmd)
			}
		}
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("database server directory %s of a killed run left: %v", d, err)
		}
	}
	for _, pattern := range []string{"redis-server", "postgres", "mariadbd"} {
		out, _ := exec.Command("pgrep", "-af", pattern).Output()
		for _, id := range ids {
			for _, l := range strings.Split(string(out), "\n") {
				if strings.Contains(l, runs[0].store) || strings.Contains(l, runs[1].store) || strings.Contains(l, runs[2].store) || strings.Contains(l, "zlc"+id) {
					t.Errorf("a server of a killed run still runs: %s", l)
				}
			}
		}
	}
	assertNothingLeft(t, store)
}
