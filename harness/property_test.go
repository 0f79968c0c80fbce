package harness

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"pgregory.net/rapid"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/lockservicetest"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// The lock property on a real ensemble: the properties the simulator checks
// (mutual exclusion after every step; liveness, orphans and the history at the end),
// checked with real ZooKeeper servers in namespaces and real recipes in worker
// processes speaking protocol v1, under real faults (the nemesis's session expiry,
// client partition, reply loss and watches-only tables, SIGKILL). rapid draws the
// schedules and shrinks a failing one; its steps and what they did are logged.
//
// Replay a failure with the command rapid prints, e.g.
//
//	go test -run 'TestLockPropertyOnEnsemble/gozk' ./harness/ -rapid.seed=N
//
// (or -rapid.failfile=testdata/rapid/...). By default each recipe gets propChecks
// checks of about propSteps steps; -rapid.checks, -rapid.steps and -rapid.shrinktime
// (or RAPID_CHECKS, RAPID_STEPS, RAPID_SHRINKTIME) override that.

// Test-local defaults of rapid's flags: a check costs seconds on a real ensemble.
const (
	propChecks     = "10"
	propSteps      = "6"
	propShrinkTime = "3m"
	// propMaxSteps caps a run's steps (rapid's Repeat has no cap; past it the actions
	// do nothing).
	propMaxSteps = 12
)

func TestLockPropertyOnEnsemble(t *testing.T) {
	requireProperty(t)
	env := startPropEnv(t)
	setRapidDefault(t, "rapid.steps", "RAPID_STEPS", propSteps)
	setRapidDefault(t, "rapid.shrinktime", "RAPID_SHRINKTIME", propShrinkTime)
	for _, tc := range []struct {
		name   string
		recipe string
		info   infoPolicy
		checks string
	}{
		{"zlc-mutex", "zlc-mutex", infoRetire, propChecks},
		{"gozk", "gozk", infoRetire, propChecks},
		// A JVM or a Python interpreter per worker start: fewer checks by default.
		{"curator-mutex", "curator-mutex", infoRetire, "3"},
		{"kazoo-lock", "kazoo-lock", infoRetire, "3"},
		// zlc-mutex cleans up on its error paths: a worker kept after an info must not
		// leave a node that still blocks in the final phase either. (gozk does:
		// TestLockPropertyFindsGoZKOrphan. zlc-mutex defers one cleanup to the next
		// acquire: TestGoZKOrphanSchedules/cut-timeout.)
		{"zlc-mutex-keep", "zlc-mutex", infoKeep, "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := env.recipe(t, tc.recipe, tc.info)
			setRapidDefault(t, "rapid.checks", "RAPID_CHECKS", tc.checks)
			stats := &propStats{}
			rapid.Check(t, env.property(rec, stepKinds(), stats))
			stats.log(t)
		})
	}
}

// TestLockPropertyCatchesMutants shows the property fails on deliberately broken
// recipes: a property that passes everything proves nothing.
func TestLockPropertyCatchesMutants(t *testing.T) {
	env := startPropEnv(t)
	setRapidDefault(t, "rapid.steps", "RAPID_STEPS", propSteps)
	for _, tc := range []struct {
		mutant string
		kinds  []string
		// want lists the failure kinds that count as caught.
		want []string
	}{
		// The second child holds too: two clients acquiring in a row both get ok.
		{"mutant-off-by-one", []string{stepAcquire, stepRelease, stepTimeout, stepWait}, []string{failExclusion}},
		// A timed-out acquire deletes the lowest child, the holder's, and leaves its
		// own: an orphan (blocking everyone: liveness), and the next acquire gets the
		// lock while the holder still holds.
		{"mutant-delete-lowest", []string{stepAcquire, stepRelease, stepTimeout, stepWait}, []string{failOrphan, failExclusion, failLiveness}},
	} {
		t.Run(tc.mutant, func(t *testing.T) {
			rec := env.recipe(t, tc.mutant, infoRetire)
			setRapidDefault(t, "rapid.checks", "RAPID_CHECKS", propChecks)
			stats := &propStats{}
			defer stats.log(t)
			msg := expectCounterexample(t, env.property(rec, tc.kinds, stats))
			for _, want := range tc.want {
				if strings.Contains(msg, "[rapid] failed after") && strings.Contains(msg, ": "+want+": ") {
					return
				}
			}
			t.Fatalf("the property failed, but not with %q:\n%s", tc.want, msg)
		})
	}
}

// propEnv is what every check of a test shares: one 3-node ensemble, four worker
// slots (namespaces), a session of the harness's own for looking at lock nodes, and
// the zlockcheck binary whose worker subcommand serves the Go recipes.
type propEnv struct {
	runID     string
	serverDir string
	net       *netns.Network
	ens       *zookeeper.Ensemble
	cl        *cluster
	slots     []netns.Host
	dir       string
	root      string
	st        time.Duration
	conn      *zk.Conn
	bin       string
	runs      int
}

// requireProperty skips the long real-ensemble property tests (the open searches:
// TestLockPropertyOnEnsemble, TestLockPropertyFindsGoZKOrphan) unless ZLC_PROPERTY is
// set (make property): they take minutes, and a search may need more checks than a CI
// run can afford. The short ones (the mutants, the fixed orphan schedules, the
// teardown) run in make test.
func requireProperty(t *testing.T) {
	t.Helper()
	if os.Getenv("ZLC_PROPERTY") == "" {
		t.Skip("real-ensemble property tests run with make property (ZLC_PROPERTY=1)")
	}
}

// startPropEnv starts the ensemble; t.Cleanup stops it and removes the run's
// namespaces on every exit path, then checks nothing of the run is left.
func startPropEnv(t *testing.T) *propEnv {
	t.Helper()
	requireIntegration(t)
	if testing.Short() {
		t.Skip("the lock property on a real ensemble takes minutes: skipped in -short mode")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	e := &propEnv{dir: t.TempDir(), root: root, st: lockservice.DefaultSessionTimeout}
	e.serverDir = filepath.Join(e.dir, "servers")
	// Cleanups run last-registered first: this check runs after the fixture's teardown.
	t.Cleanup(func() { assertRunGone(t, e.runID, e.serverDir) })
	ctx := context.Background()
	started := time.Now()
	f := lockservicetest.Start(t, lockservice.Config{Kind: kind.ZooKeeper, Dir: e.serverDir, Nodes: 3})
	e.runID, e.net, e.ens = f.RunID, f.Net, f.Service.(*zookeeper.Ensemble)
	t.Logf("run %s: 3 servers serving after %s (%s)", e.runID, time.Since(started).Round(time.Millisecond), e.ens.Connect())
	e.cl = newCluster(e.ens, false)
	for i := range 4 {
		h, err := e.net.AddHost(ctx, fmt.Sprintf("w%d", i+1), workerAddr(i+1))
		if err != nil {
			t.Fatal(err)
		}
		e.slots = append(e.slots, h)
	}
	e.conn, err = e.ens.Client(ctx, e.st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.conn.Close)
	return e
}

// TestPropEnvLeavesNothingBehind leaves a test early (t.Skip, which ends it as
// t.Fatal does) with the ensemble and two workers running and no teardown of its own:
// the cleanups must remove the run's namespaces, servers and workers.
func TestPropEnvLeavesNothingBehind(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real ensemble: skipped in -short mode")
	}
	requireIntegration(t)
	var (
		runID, serverDir string
		pids             []int
	)
	t.Run("early exit", func(t *testing.T) {
		env := startPropEnv(t)
		runID, serverDir = env.runID, env.serverDir
		rec := env.recipe(t, "zlc-mutex", infoRetire)
		m, err := newMachine(env, rec, 2, fmt.Sprintf("/zlc/%s/early", env.runID), filepath.Join(env.dir, "early"))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range m.clients {
			pids = append(pids, c.w.Pid())
		}
		for _, s := range env.ens.Servers {
			pids = append(pids, s.Host.Pid())
		}
		t.Skip("leaving early with the ensemble and two workers running")
	})
	if runID == "" {
		t.Fatal("the run did not start")
	}
	assertRunGone(t, runID, serverDir)
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			t.Errorf("process %d of run %s still running", pid, runID)
		}
	}
}

// assertRunGone fails if a server of the run, a namespace of the run, or the run's
// owner file remains. (Other runs on the machine are not this test's business.) An
// empty runID (the fixture failed before handing back its network, which it checks
// itself) looks for servers only.
func assertRunGone(t *testing.T, runID, serverDir string) {
	t.Helper()
	out, _ := exec.Command("pgrep", "-f", "QuorumPeerMain").Output()
	for _, pid := range strings.Fields(string(out)) {
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		if strings.Contains(string(cmdline), serverDir) {
			t.Errorf("ZooKeeper server %s of run %s left behind", pid, runID)
		}
	}
	if runID == "" {
		return
	}
	names, err := netns.List()
	if err != nil {
		t.Error(err)
	}
	for _, n := range names {
		if strings.HasPrefix(n, netns.Prefix+runID) {
			t.Errorf("namespace %s of run %s left behind", n, runID)
		}
	}
	if _, err := os.Stat("/run/" + netns.Prefix + runID + ".owner"); err == nil {
		t.Errorf("owner file of run %s left behind", runID)
	}
}

// aimed is the run's cluster as a client fault sees it: one client, the target.
type aimed struct {
	*cluster
	target nemesis.Client
}

func (a aimed) Clients() []nemesis.Client      { return []nemesis.Client{a.target} }
func (a aimed) Holder() (nemesis.Client, bool) { return a.target, true }
func (a aimed) Idle() (nemesis.Client, bool)   { return a.target, true }
func (a aimed) Waiter() (nemesis.Client, bool) { return a.target, true }

// recipe returns how to start the named recipe's workers, building what they need;
// it skips t when Java or Python's kazoo is missing (fails under
// ZLC_REQUIRE_INTEGRATION, see testenv).
func (e *propEnv) recipe(t *testing.T, name string, info infoPolicy) propRecipe {
	t.Helper()
	rec := propRecipe{Name: name, Info: info}
	switch {
	case strings.HasPrefix(name, "curator-"):
		testenv.RequireIntegration(t, testenv.JDK, testenv.Curator)
		out := filepath.Join(e.dir, "curator")
		build := exec.Command("sh", filepath.Join(e.root, "recipes/curator/build.sh"), out)
		if b, err := build.CombinedOutput(); err != nil {
			t.Fatalf("%s: the Curator worker did not build: %v\n%s", name, err, b)
		}
		rec.Argv = []string{filepath.Join(e.root, "recipes/curator/run.sh"), out, name}
	case strings.HasPrefix(name, "kazoo-"):
		testenv.RequireIntegration(t, testenv.Kazoo)
		rec.Argv = []string{"/usr/bin/python3", filepath.Join(e.root, "recipes/python/kazoo_worker.py"), name}
	default:
		if e.bin == "" {
			bin := filepath.Join(e.dir, "zlockcheck")
			build := exec.Command("go", "build", "-o", bin, "github.com/zlockcheck/zlockcheck/cmd/zlockcheck")
			if b, err := build.CombinedOutput(); err != nil {
				t.Fatalf("build zlockcheck: %v\n%s", err, b)
			}
			e.bin = bin
		}
		rec.Argv = []string{e.bin, "worker", "--recipe", name}
	}
	return rec
}

// propStats sums up the checks of a property.
type propStats struct {
	runs  int
	steps int
	total time.Duration
	fails int
	// traces, when kept (ZLC_PROP_TRACE set), are every run's report.
	traces []string
	// lastFail is the report of the last run that failed, with its worker logs:
	// rapid logs a failure only if its final replay fails again.
	lastFail string
}

// log logs the summary, and with ZLC_PROP_TRACE set every run step by step.
func (s *propStats) log(t *testing.T) {
	t.Helper()
	for i, tr := range s.traces {
		t.Logf("run %d:\n%s", i+1, tr)
	}
	if s.lastFail != "" && len(s.traces) == 0 {
		t.Logf("the last run that failed:\n%s", s.lastFail)
	}
	t.Logf("%s", s)
}

func (s *propStats) String() string {
	if s.runs == 0 {
		return "no runs"
	}
	return fmt.Sprintf("%d runs (rapid's checks, shrinking and replays), %d steps, %.1fs per run on average, %d failed",
		s.runs, s.steps, (s.total / time.Duration(s.runs)).Seconds(), s.fails)
}

// property is one check of the lock property: 2-4 clients of rec, a run of rapid's
// steps drawn from kinds, each followed by the mutual exclusion invariant, then the
// final phase.
func (e *propEnv) property(rec propRecipe, kinds []string, stats *propStats) func(*rapid.T) {
	return func(rt *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(rt, "clients")
		m := e.newRun(rt, rec, n)
		defer m.teardown()
		start := time.Now()
		defer func() {
			stats.runs++
			stats.steps += len(m.steps)
			stats.total += time.Since(start)
			if m.fail != nil {
				stats.fails++
				stats.lastFail = m.report() + "worker logs:\n" + m.workerLogs(20)
			}
			if os.Getenv("ZLC_PROP_TRACE") != "" {
				stats.traces = append(stats.traces, m.report())
			}
		}()
		actions := map[string]func(*rapid.T){
			"": func(rt *rapid.T) {
				m.setFail(m.checkExclusion())
				m.setFail(m.checkOrphans())
				reportFailure(rt, m, m.fail)
			},
		}
		// One action per kind of client step, and one for all faults, so that faults
		// come about as often as one kind of client step.
		var faults []string
		for _, kind := range kinds {
			if isFault(kind) {
				faults = append(faults, kind)
				continue
			}
			actions[kind] = func(rt *rapid.T) { e.step(rt, m, []string{kind}) }
		}
		if len(faults) > 0 {
			actions["fault"] = func(rt *rapid.T) { e.step(rt, m, faults) }
		}
		rt.Repeat(actions)
		f := m.finish()
		m.setFail(f)
		reportFailure(rt, m, f)
	}
}

func (e *propEnv) newRun(rt *rapid.T, rec propRecipe, n int) *machine {
	e.runs++
	path := fmt.Sprintf("/zlc/%s/%s/r%d", e.runID, rec.Name, e.runs)
	m, err := newMachine(e, rec, n, path, filepath.Join(e.dir, "runs", fmt.Sprintf("%s-r%d", rec.Name, e.runs)))
	if err != nil {
		rt.Fatalf("harness: %v", err)
	}
	return m
}

// step draws one of kinds that some client can take now, a client that can take
// it, and the step's duration, and applies the step; when no client can take any of
// kinds it skips the action.
func (e *propEnv) step(rt *rapid.T, m *machine, kinds []string) {
	if len(m.steps) >= propMaxSteps {
		return
	}
	slotsFor := func(kind string) []int {
		var slots []int
		for _, c := range m.clients {
			if m.possible(kind, c) {
				slots = append(slots, c.slot)
			}
		}
		return slots
	}
	var possible []string
	for _, kind := range kinds {
		if len(slotsFor(kind)) > 0 {
			possible = append(possible, kind)
		}
	}
	if len(possible) == 0 {
		rt.Skip("no client can take " + strings.Join(kinds, " or "))
	}
	kind := possible[0]
	if len(kinds) > 1 {
		kind = rapid.SampledFrom(possible).Draw(rt, "fault")
	}
	st := m.st
	s := pstep{Kind: kind}
	if kind != stepWait {
		s.Client = rapid.SampledFrom(slotsFor(kind)).Draw(rt, "client")
	}
	switch kind {
	case stepWait:
		s.D = rapid.SampledFrom([]time.Duration{time.Second, st}).Draw(rt, "wait")
	case stepAcquire:
		s.D = rapid.SampledFrom([]time.Duration{300 * time.Millisecond, 2 * time.Second, 10 * time.Second}).Draw(rt, "timeout")
	case stepTimeout:
		s.D = 300 * time.Millisecond
	case stepCut:
		s.D = rapid.SampledFrom([]time.Duration{st / 4, st / 2}).Draw(rt, "cut")
	case stepReplyLoss:
		s.D = rapid.SampledFrom([]time.Duration{st / 2, st * 17 / 20, st}).Draw(rt, "loss")
	case stepWakeLoss:
		// Shorter than the client's read timeout, TCP's retransmissions repair it.
		s.D = rapid.SampledFrom([]time.Duration{st * 17 / 20, st}).Draw(rt, "loss")
	}
	if err := m.do(s); err != nil {
		m.setFail(pfail(failHarness, "%v", err))
		reportFailure(rt, m, m.fail)
	}
}

// reportFailure fails rt with f, after logging the run step by step. Each kind fails
// from its own line: rapid tells failures apart by where they happened, so a failure
// shrinks into one of the same kind.
func reportFailure(rt *rapid.T, m *machine, f *propFailure) {
	if f == nil {
		return
	}
	for _, line := range strings.Split(strings.TrimRight(m.report(), "\n"), "\n") {
		rt.Log(line)
	}
	msg := fmt.Sprintf("%v\nschedule: %s", f, schedule{Clients: len(m.clients), Steps: m.steps})
	switch f.Kind {
	case failExclusion:
		rt.Fatal(msg)
	case failZombie:
		rt.Fatal(msg)
	case failLiveness:
		rt.Fatal(msg)
	case failOrphan:
		rt.Fatal(msg)
	case failModel:
		rt.Fatal(msg)
	default:
		rt.Fatal(msg)
	}
}

// runSchedule runs one explicit schedule of the property (steps, each followed by
// the invariants unless finalOnly, then the final phase) and returns the run and its
// failure.
func (e *propEnv) runSchedule(t *testing.T, rec propRecipe, s schedule, finalOnly bool) (*machine, *propFailure) {
	t.Helper()
	e.runs++
	path := fmt.Sprintf("/zlc/%s/%s/s%d", e.runID, rec.Name, e.runs)
	m, err := newMachine(e, rec, s.Clients, path, filepath.Join(e.dir, "runs", fmt.Sprintf("%s-s%d", rec.Name, e.runs)))
	if err != nil {
		t.Fatalf("harness: %v", err)
	}
	defer m.teardown()
	for _, st := range s.Steps {
		if err := m.do(st); err != nil {
			t.Fatalf("%v\n%s", err, m.report())
		}
		if m.fail != nil {
			return m, m.fail
		}
		for _, check := range []func() *propFailure{m.checkExclusion, m.checkOrphans} {
			if finalOnly {
				break
			}
			if f := check(); f != nil {
				m.setFail(f)
				return m, f
			}
		}
	}
	f := m.finish()
	m.setFail(f)
	return m, f
}

// setRapidDefault gives one of rapid's flags a value for this test (restored after
// it) unless the command line or the environment set it.
func setRapidDefault(t *testing.T, name, env, value string) {
	t.Helper()
	if _, ok := os.LookupEnv(env); ok {
		return
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	f := flag.Lookup(name)
	if set || f == nil {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(value); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

// expectCounterexample runs rapid.Check on prop expecting it to fail (without
// shrinking, and without writing a fail file), and returns rapid's failure message.
// It fails t if rapid finds no counterexample.
func expectCounterexample(t *testing.T, prop func(*rapid.T)) string {
	t.Helper()
	setRapidDefault(t, "rapid.shrinktime", "RAPID_SHRINKTIME", "1ms")
	setRapidDefault(t, "rapid.nofailfile", "RAPID_NOFAILFILE", "true")
	c := &catchTB{t: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		rapid.Check(c, prop)
	}()
	<-done
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.skipped != "" {
		t.Skip(c.skipped)
	}
	if !c.failed {
		t.Fatalf("rapid found no counterexample: the property passes a recipe it must catch")
	}
	return strings.Join(c.errors, "\n")
}

// catchTB is a rapid.TB that records a failure instead of failing the test; it
// passes logs through. FailNow and the skips end the goroutine, as in testing.
type catchTB struct {
	t       *testing.T
	mu      sync.Mutex
	failed  bool
	skipped string
	errors  []string
}

var _ rapid.TB = (*catchTB)(nil)

func (c *catchTB) Helper()                           {}
func (c *catchTB) Name() string                      { return c.t.Name() }
func (c *catchTB) Logf(format string, args ...any)   { c.t.Logf(format, args...) }
func (c *catchTB) Log(args ...any)                   { c.t.Log(args...) }
func (c *catchTB) Errorf(format string, args ...any) { c.Error(fmt.Sprintf(format, args...)) }
func (c *catchTB) Fatalf(format string, args ...any) { c.Errorf(format, args...); c.FailNow() }
func (c *catchTB) Fatal(args ...any)                 { c.Error(args...); c.FailNow() }
func (c *catchTB) Skipf(format string, args ...any)  { c.Skip(fmt.Sprintf(format, args...)) }
func (c *catchTB) SkipNow()                          { c.Skip("skipped") }
func (c *catchTB) Fail()                             { c.Error() }

func (c *catchTB) Error(args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failed = true
	if len(args) > 0 {
		c.errors = append(c.errors, fmt.Sprint(args...))
	}
}

func (c *catchTB) Skip(args ...any) {
	c.mu.Lock()
	c.skipped = fmt.Sprint(args...)
	c.mu.Unlock()
	runtime.Goexit()
}

func (c *catchTB) FailNow() {
	c.Error()
	runtime.Goexit()
}

func (c *catchTB) Failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed
}
