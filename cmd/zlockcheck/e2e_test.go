package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/netns"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// binary is the zlockcheck binary built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "zlockcheck-e2e")
	if err != nil {
		panic(err)
	}
	// The binary lives outside the checkout and carries its Java and Python workers.
	binary = filepath.Join(dir, "zlockcheck")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		panic("build zlockcheck: " + err.Error() + "\n" + string(out))
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireIntegration skips tests that need root, network namespaces and ZooKeeper
// (fails under ZLC_REQUIRE_INTEGRATION; skips in -short mode: see testenv).
func requireIntegration(t *testing.T) {
	t.Helper()
	testenv.RequireIntegration(t, testenv.Root, testenv.ZooKeeper, testenv.Python3)
}

// zlockcheck runs the binary and returns its exit code, stdout and stderr.
func zlockcheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

func readResults(t *testing.T, store string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, "latest", "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res map[string]any
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	return res
}

// assertNothingLeft fails if any namespace of the run stored in store, or any of its
// ZooKeeper servers or workers, remains. (Other tests may run ensembles meanwhile:
// only this run's objects are looked for.)
func assertNothingLeft(t *testing.T, store string) {
	t.Helper()
	runID := runIDOf(t, store)
	names, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, netns.Prefix+runID) {
			t.Errorf("namespace of run %s left behind: %s", runID, n)
		}
	}
	dir, _ := filepath.EvalSymlinks(filepath.Join(store, "latest"))
	for _, pattern := range []string{dir, "zlc/" + runID} {
		out, _ := exec.Command("pgrep", "-af", pattern).Output()
		if s := strings.TrimSpace(string(out)); s != "" {
			t.Errorf("processes of run %s left behind: %s", runID, s)
		}
	}
	out, _ := exec.Command("ip", "-o", "link").Output()
	if strings.Contains(string(out), "zlc") {
		t.Errorf("zlc links left in the host namespace:\n%s", out)
	}
}

// runIDOf reads the run id from the latest run's config.json.
func runIDOf(t *testing.T, store string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil || cfg.RunID == "" {
		t.Fatalf("config.json has no run_id: %v", err)
	}
	return cfg.RunID
}

func TestRunGozkMutexIsValid(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	code, stdout, stderr := zlockcheck(t, "run", "--recipe", "gozk", "--time", "10s", "--seed", "7", "--store", store)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitValid {
		t.Fatalf("exit %d, want %d (valid)", code, exitValid)
	}
	res := readResults(t, store)
	if res["verdict"] != "valid" {
		t.Errorf("results.json verdict %v, want valid", res["verdict"])
	}
	counts := res["counts"].(map[string]any)
	acq := counts["acquire"].(map[string]any)
	if ok, _ := acq["ok"].(float64); ok < 20 {
		t.Errorf("only %v acquires succeeded in 10 s: %v", acq["ok"], counts)
	}
	for _, f := range []string{"history.jsonl", "results.json", "timeline.html", "config.json", "servers/s1/server.log", "servers/s1/zoo.cfg"} {
		if _, err := os.Stat(filepath.Join(store, "latest", f)); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	// The stored history checks the same way on its own.
	code, out, _ := zlockcheck(t, "check", filepath.Join(store, "latest", "history.jsonl"))
	if code != exitValid {
		t.Errorf("check of the stored history: exit %d\n%s", code, out)
	}
	assertNothingLeft(t, store)
}

func TestRunBrokenWorkerIsInvalid(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	worker, err := filepath.Abs("../../recipes/testdata/broken_worker.py")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := zlockcheck(t, "run", "--recipe", "exec", "--worker-cmd", "python3 "+worker,
		"--time", "5s", "--seed", "3", "--store", store)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitInvalid {
		t.Fatalf("exit %d, want %d (invalid)", code, exitInvalid)
	}
	res := readResults(t, store)
	checks := res["checks"].([]any)
	witness, _ := checks[0].(map[string]any)["witness"].(string)
	if !strings.Contains(witness, "process") {
		t.Errorf("witness does not name the overlapping processes: %q", witness)
	}
	if !strings.Contains(stdout, "INVALID") {
		t.Errorf("summary does not say INVALID:\n%s", stdout)
	}
	if _, err := os.Stat(filepath.Join(store, "latest", "linearizability.html")); err != nil {
		t.Errorf("no visualization of the violation: %v", err)
	}
	assertNothingLeft(t, store)
}

// startRun starts a long run in the background and waits until its history has ops.
func startRun(t *testing.T, store string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(binary, "run", "--time", "60s", "--seed", "5", "--store", store, "--quiet")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(45 * time.Second)
	for time.Now().Before(deadline) {
		data, _ := os.ReadFile(filepath.Join(store, "latest", "history.jsonl"))
		if strings.Count(string(data), "\n") > 20 {
			return cmd
		}
		time.Sleep(200 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	t.Fatalf("run did not record ops within 45 s; stderr: %s", stderr.String())
	return nil
}

func TestSIGINTMidRunLeavesNothingAndHistoryChecks(t *testing.T) {
	requireIntegration(t)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		store := t.TempDir()
		cmd := startRun(t, store)
		if err := cmd.Process.Signal(sig); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Fatal(err)
		}
		if code := cmd.ProcessState.ExitCode(); code != exitValid {
			t.Errorf("%v: exit %d, want 0 (the partial history is valid)", sig, code)
		}
		assertNothingLeft(t, store)
		res := readResults(t, store)
		if res["interrupted"] != true {
			t.Errorf("%v: results.json does not say interrupted", sig)
		}
		code, out, _ := zlockcheck(t, "check", filepath.Join(store, "latest", "history.jsonl"))
		if code != exitValid {
			t.Errorf("%v: history of the interrupted run: exit %d\n%s", sig, code, out)
		}
	}
}

func TestSIGKILLThenCleanupLeavesNothing(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	cmd := startRun(t, store)
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	names, _ := netns.List()
	left := false
	for _, n := range names {
		left = left || strings.HasPrefix(n, netns.Prefix+runIDOf(t, store))
	}
	if !left {
		t.Error("expected the killed harness to leave namespaces for cleanup to find")
	}
	code, out, errOut := zlockcheck(t, "cleanup")
	if code != 0 {
		t.Fatalf("cleanup: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "removed") {
		t.Errorf("cleanup did not say what it removed: %s", out)
	}
	assertNothingLeft(t, store)
	// The history of the killed run is checkable (a truncated last line is tolerated).
	code, out, errOut = zlockcheck(t, "check", filepath.Join(store, "latest", "history.jsonl"))
	if code != exitValid {
		t.Errorf("history of the killed run: exit %d\n%s%s", code, out, errOut)
	}
	// A second cleanup finds nothing.
	if _, out, _ := zlockcheck(t, "cleanup"); !strings.Contains(out, "nothing to clean up") {
		t.Errorf("second cleanup: %s", out)
	}
}

// TestCuratorAndKazooSmoke: one Curator and one Kazoo recipe run for real and are
// valid, the binary started outside the checkout with an empty cache: it unpacks its
// embedded workers (and compiles the Curator one) there on first use. make test-long's:
// TestPlannedProtocolRunsAreValid makes the same runs and checks in make test.
func TestCuratorAndKazooSmoke(t *testing.T) {
	requireIntegration(t)
	testenv.Long(t, "TestPlannedProtocolRunsAreValid runs curator-mutex and kazoo-lock from an empty cache with the same checks")
	cache := t.TempDir()
	for _, recipe := range []string{"curator-mutex", "kazoo-lock"} {
		t.Run(recipe, func(t *testing.T) {
			store := t.TempDir()
			cmd := exec.Command(binary, "run", "--recipe", recipe, "--time", "10s", "--seed", "2", "--store", store, "--quiet")
			cmd.Dir = t.TempDir()
			cmd.Env = append(os.Environ(), "ZLC_CACHE_DIR="+cache)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%v, want exit 0 (valid)\n%s", err, out)
			}
			res := readResults(t, store)
			ok, _ := res["counts"].(map[string]any)["acquire"].(map[string]any)["ok"].(float64)
			if ok < 10 {
				t.Errorf("only %v acquires succeeded in 10 s", ok)
			}
			data, err := os.ReadFile(filepath.Join(store, "latest", "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var cfg struct {
				WorkerArgv []string `json:"worker_argv"`
			}
			if err := json.Unmarshal(data, &cfg); err != nil || len(cfg.WorkerArgv) < 2 || !strings.HasPrefix(cfg.WorkerArgv[1], cache+"/") {
				t.Errorf("worker command %q (%v), want the worker from the cache %s", cfg.WorkerArgv, err, cache)
			}
			assertNothingLeft(t, store)
		})
	}
}

// TestProtocolViolationIsNotAPass runs a correct recipe behind a proxy that answers
// every release with the wrong id: the harness must treat each such reply as a crash
// of its worker and the run must not pass (it did, unnoticed, before replies were
// matched to their requests).
func TestProtocolViolationIsNotAPass(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	proxy, err := filepath.Abs("testdata/breaking_proxy.py")
	if err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := zlockcheck(t, "run", "--recipe", "exec", "--worker-cmd", "python3 "+proxy+" wrong-release-id "+binary+" worker --recipe zlc-mutex",
		"--time", "5s", "--seed", "3", "--workers", "2", "--store", store)
	t.Logf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	if code != exitError {
		t.Fatalf("exit %d, want %d (error: the workers broke the protocol)", code, exitError)
	}
	want := "a reply with id"
	if !strings.Contains(stderr, "broke the worker protocol") || !strings.Contains(stderr, want) || !strings.Contains(stderr, `"type":"ok"`) {
		t.Errorf("stderr does not name the violation and the line")
	}
	if setup, _ := readResults(t, store)["setup_error"].(string); !strings.Contains(setup, want) {
		t.Errorf("results.json's setup_error does not name the violation: %q", setup)
	}
	assertNothingLeft(t, store)
}

// TestBadLockPlaceIsAClearError: a worker whose acquires say its lock lives where no
// lock of the run can (another service's kind of place; a key outside the run's own
// names) breaks the protocol: the run is an error naming the field, and leaves
// nothing behind. The worker is redis-lock behind a proxy that rewrites its places.
func TestBadLockPlaceIsAClearError(t *testing.T) {
	requireRedis(t)
	proxy, err := filepath.Abs("testdata/breaking_proxy.py")
	if err != nil {
		t.Fatal(err)
	}
	t.Parallel() // beside the other side-by-side runs: each in a network of its own
	for _, c := range []struct{ name, place, want string }{
		{"another service's", `{"advisory":[7]}`, "field lock.advisory"},
		{"outside the run's keys", `{"keys":["app:other"]}`, `field lock.keys: "app:other" does not hold the lock's name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			store := t.TempDir()
			code, stdout, stderr := zlockcheckEnv(t, []string{"ZLC_TEST_PLACE=" + c.place}, "run", "--service", "redis", "--recipe", "exec",
				"--worker-cmd", "python3 "+proxy+" place "+binary+" worker --recipe redis-lock",
				"--time", "4s", "--seed", "3", "--workers", "2", "--final-phase=false", "--store", store)
			if code != exitError || !strings.Contains(stderr, "broke the worker protocol") || !strings.Contains(stderr, c.want) {
				t.Errorf("exit %d, want %d and %q\nstdout:\n%s\nstderr:\n%s", code, exitError, c.want, stdout, stderr)
			}
			assertNothingLeft(t, store)
		})
	}
}
