package redsim

import (
	"runtime"
	"testing"
	"testing/cryptotest"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"pgregory.net/rapid"
)

// RunInfo is what one run of the lock property did.
type RunInfo struct {
	// Schedule is the run's clients, instances and steps (not the liveness phase's).
	Schedule Schedule
	// Failure is the property the run broke; nil when it passed.
	Failure *Failure
	// Trace tells the run: each step, the requests it served and their replies,
	// the recipe's log lines, the liveness phase.
	Trace []string
}

// CheckLock checks the lock property of cfg.Recipe with rapid: each check is one
// run of a schedule rapid draws, checked after every step for mutual exclusion,
// then driven with faults off for liveness, and checked for an orphaned key. A
// failure is shrunk to a short schedule, which t's log shows step by step. The
// number of checks is rapid's -rapid.checks (100 by default).
//
// rapid's shrunk schedule, and the shortest others that failed as it shrank, are
// then minimized further (simsched's CheckMinimized, for at most
// simsched.MinimizeBudget), and t's log shows the shortest schedule found too.
func CheckLock(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) {
	t.Helper()
	property(cfg).CheckMinimized(t, onRun...)
}

// LockProperty returns the lock property of CheckLock, for rapid.Check and its
// relatives. Each run takes place in a synctest bubble of t, with crypto/rand made
// deterministic (testing/cryptotest, the same seed in every run: so t and its
// ancestors must not be parallel). onRun, if given, is called after every run.
//
// The first run that fails is replayed twice before rapid may shrink it, and the
// replays' traces compared with its own: if they differ, the recipe is not
// deterministic under the simulator, and t fails saying where, rather than let
// rapid shrink noise.
func LockProperty(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) func(*rapid.T) {
	return property(cfg).Check(t, onRun...)
}

func runInfo(run *lockRun, fail *Failure) RunInfo {
	info := RunInfo{Failure: fail}
	if run != nil {
		info.Schedule = Schedule{Clients: len(run.Slots), Instances: run.cfg.Instances, Steps: run.steps}
		info.Trace = run.trace
	}
	return info
}

// OptionalKinds lists the kinds a random run may leave out altogether (swarm
// testing): a run without releases builds contention, one whose only fault is a
// clock jump jumps often.
func OptionalKinds() []StepKind {
	return []StepKind{StepRelease, StepTimeout, StepLoseReply, StepDrop, StepDelay, StepCrash, StepJump, StepRestart}
}

// ReplayLock runs one explicit schedule of the lock property in a synctest bubble
// of t, exactly as a run of CheckLock: the steps, each checked for mutual
// exclusion, then the liveness phase and the orphan check. cfg.Instances is taken
// from the schedule. It returns an error when a step is not possible at its turn.
func ReplayLock(t *testing.T, cfg LockConfig, s Schedule) (RunInfo, error) {
	t.Helper()
	cfg.Instances = s.Instances
	return property(cfg).Replay(t, s.Clients, s.Steps)
}

// property is the lock property of cfg: runs drawn with 2 to 4 clients (or
// cfg.Clients), in bubbles whose crypto/rand is seeded.
func property(cfg LockConfig) simsched.Property[StepKind, *lockRun, RunInfo] {
	return simsched.Property[StepKind, *lockRun, RunInfo]{
		Recipe:     cfg.Recipe.Name,
		Clients:    cfg.Clients,
		MaxClients: 4,
		Kinds:      StepKinds(),
		Optional:   OptionalKinds(),
		Start: func(n int, leftOut map[StepKind]bool, logf func(string, ...any)) (*lockRun, error) {
			run, err := newLockRun(cfg, n, logf)
			if err != nil {
				run.Teardown()
				return run, err
			}
			if leftOut != nil {
				run.leftOut = leftOut
			}
			return run, nil
		},
		Info:   runInfo,
		Bubble: simsched.Bubble{Before: emptyPools, Setup: func(bt *testing.T) { cryptotest.SetGlobalRandom(bt, seed) }},
	}
}

// seed is crypto/rand's seed in every run: random lock values and backoffs are the
// same in every replay.
const seed = 43

// emptyPools empties every sync.Pool before a run's bubble is made. go-redis keeps
// the timers of its pool's semaphore in a sync.Pool (internal/semaphore.go's
// semTimers): one made in the last run's bubble, taken in this one, is a channel of
// another bubble, which the runtime refuses ("select on synctest channel from
// outside bubble"). Two collections empty every sync.Pool.
func emptyPools() {
	runtime.GC()
	runtime.GC()
}

// divergence replays a failed run's schedule twice and returns where a replay's
// trace first differs from the run's, or "" when both agree.
func divergence(t *testing.T, cfg LockConfig, ri RunInfo) string {
	return property(cfg).Divergence(t, ri.Trace, ri.Schedule.Clients, ri.Schedule.Steps)
}
