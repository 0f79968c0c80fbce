package zksim

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/simsched"
	"pgregory.net/rapid"
)

// RunInfo is what one run of the lock property did.
type RunInfo struct {
	// Schedule is the run's clients and steps (not those of the liveness phase).
	Schedule Schedule
	// Failure is the property the run broke; nil when it passed.
	Failure *Failure

	run *lockRun
}

// Trace tells the run: each step and what it did, the recipe's log lines, the
// liveness phase.
func (ri RunInfo) Trace() []string {
	if ri.run == nil {
		return nil
	}
	return ri.run.Trace()
}

// CheckLock checks the lock property of cfg.Recipe with rapid: each check is one run
// of a schedule rapid draws (clients, then steps: client steps and faults), checked
// after every step for mutual exclusion, then driven to the end with faults off for
// liveness, checked for orphaned lock nodes, and its history checked by models'
// mutex checker. A failure is shrunk to a short schedule, which t's log shows step by
// step. The number of checks is rapid's -rapid.checks (100 by default).
//
// rapid's shrunk schedule, and the shortest others that failed as it shrank, are
// then minimized further (simsched's CheckMinimized, for at most
// simsched.MinimizeBudget), and t's log shows the shortest schedule found too.
func CheckLock(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) {
	t.Helper()
	property(cfg).CheckMinimized(t, onRun...)
}

// LockProperty returns the lock property of CheckLock, for rapid.Check and its
// relatives. Each run takes place in a synctest bubble of t. onRun, if given, is
// called after every run; after a failed rapid.Check, the last call is the shrunk
// counterexample's replay.
//
// The first run that fails is replayed twice before rapid may shrink it, and the
// replays' traces compared with its own: if they differ, the recipe (or its client
// library) is not deterministic under the simulator, and t fails saying so and
// where they diverged, rather than let rapid shrink noise.
func LockProperty(t *testing.T, cfg LockConfig, onRun ...func(RunInfo)) func(*rapid.T) {
	return property(cfg).Check(t, onRun...)
}

// ReplayLock runs one explicit schedule of the lock property in a synctest bubble of
// t: the steps, each checked for mutual exclusion, then the liveness phase and the
// final checks, exactly as a run of CheckLock. It returns an error when a step is not
// possible at its turn.
func ReplayLock(t *testing.T, cfg LockConfig, s Schedule) (RunInfo, error) {
	t.Helper()
	return property(cfg).Replay(t, s.Clients, s.Steps)
}

// property is the lock property of cfg: runs drawn with 2 to 5 clients (or
// cfg.Clients), their failures and traces read with protected names' GUIDs masked.
func property(cfg LockConfig) simsched.Property[StepKind, *lockRun, RunInfo] {
	return simsched.Property[StepKind, *lockRun, RunInfo]{
		Recipe:     cfg.Recipe.Name,
		Clients:    cfg.Clients,
		MaxClients: 5,
		Kinds:      StepKinds(),
		Optional:   OptionalKinds(),
		Start: func(n int, leftOut map[StepKind]bool, logf func(string, ...any)) (*lockRun, error) {
			run, err := newLockRun(cfg, n, logf)
			run.leftOut = leftOut
			return run, err
		},
		Info:   runInfo,
		Bubble: bubble(),
		Same:   func(line string) string { return watchesLast(maskGUIDs(line)) },
	}
}

// bubble is how a run's bubble is set up: as it is, its failures masked.
func bubble() simsched.Bubble { return simsched.Bubble{Mask: maskGUIDs} }

// runInfo is what run did, and its failure.
func runInfo(run *lockRun, fail *Failure) RunInfo {
	info := RunInfo{Failure: fail, run: run}
	if run != nil {
		info.Schedule = Schedule{Clients: len(run.Slots), Steps: run.steps}
	}
	return info
}

// inBubble runs f in a new synctest bubble of t and returns its failure. A *Failure
// that f panics with is returned too; any other panic is raised again outside the
// bubble (a runtime error with the stack where it happened).
func inBubble(t *testing.T, f func() error) *Failure { return bubble().Run(t, f) }

// divergence replays a failed run's schedule twice and returns where a replay's
// trace first differs from the run's (GUIDs masked), or "" when both agree.
func divergence(t *testing.T, cfg LockConfig, ri RunInfo) string {
	return property(cfg).Divergence(t, ri.Trace(), ri.Schedule.Clients, ri.Schedule.Steps)
}

// watchesLast is a trace line with its setWatches requests moved to its end, in their
// order. go-zookeeper re-sends a reconnected session's watches from a goroutine of its
// own (conn.go's sendSetWatches), racing the requests its client queued meanwhile: where
// the setWatches lands among them is the library's scheduling, not the recipe's, and
// was the one divergence seen in replays (TestWireRaceMutantsAreCaught under make
// test's load, 2026-11-29). Every other order still counts.
func watchesLast(line string) string {
	head, body, ok := strings.Cut(line, ": ")
	if !ok || !strings.Contains(body, "setWatches ") {
		return line
	}
	var rest, watches []string
	for _, req := range strings.Split(body, "; ") {
		if strings.HasPrefix(req, "setWatches ") {
			watches = append(watches, req)
		} else {
			rest = append(rest, req)
		}
	}
	return head + ": " + strings.Join(append(rest, watches...), "; ")
}
