package simsched

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// MinimizeBudget bounds the minimizing pass CheckMinimized runs after a failure.
const MinimizeBudget = 30 * time.Second

// Minimize removes steps from a failing schedule (clients clients, steps) while
// its replay still fails with a failure of kind: chunks of half the steps, then
// of a quarter, and so on down to single steps, each size tried again while it
// removes something (delta debugging's ddmin, removals only). It returns the
// shortest failing schedule found, one-minimal unless budget ran out (done says
// which). Each try is one Replay, exact because the simulator is: a step that is
// no longer possible at its turn makes a try pass.
//
// rapid's shrinker, which works on the draws behind a schedule, often stops at
// dozens of steps where a handful fail the same way; this pass, on the schedule
// itself, takes what rapid leaves.
func (p Property[K, R, I]) Minimize(t *testing.T, clients int, steps []Step[K], kind FailureKind, budget time.Duration) (shortest []Step[K], done bool) {
	t.Helper()
	deadline := time.Now().Add(budget)
	fails := func(s []Step[K]) bool {
		_, fail, bad := p.replay(t, clients, s)
		return bad == nil && fail != nil && fail.Kind == kind
	}
	steps = slices.Clone(steps)
	for n := max(len(steps)/2, 1); n >= 1 && len(steps) > 0; {
		removed := false
		for i := 0; i+n <= len(steps); {
			if time.Now().After(deadline) {
				return steps, false
			}
			if try := slices.Concat(steps[:i], steps[i+n:]); fails(try) {
				steps, removed = try, true
				continue
			}
			i += n
		}
		if !removed {
			n /= 2
		}
		n = min(n, max(len(steps)/2, 1))
	}
	return steps, true
}

// Candidate is a failing schedule to minimize: its clients, its steps and the
// kind of its failure.
type Candidate[K Kind] struct {
	Clients int
	Steps   []Step[K]
	Kind    FailureKind
}

// MaxCandidates is how many failing schedules Candidates keeps.
const MaxCandidates = 8

// Candidates keeps the shortest failing schedules of a check (at most
// MaxCandidates, shortest first, each once) for MinimizeBest: rapid's final
// counterexample is one of them, but another it tried while shrinking may
// minimize further (removals alone reach a one-minimal schedule, not the
// shortest).
type Candidates[K Kind] []Candidate[K]

// Add keeps c if it is among the shortest.
func (cs *Candidates[K]) Add(c Candidate[K]) {
	i := 0
	for ; i < len(*cs); i++ {
		o := (*cs)[i]
		if o.Clients == c.Clients && o.Kind == c.Kind && slices.Equal(o.Steps, c.Steps) {
			return
		}
		if len(o.Steps) > len(c.Steps) {
			break
		}
	}
	if i == MaxCandidates {
		return
	}
	c.Steps = slices.Clone(c.Steps)
	*cs = slices.Insert(*cs, i, c)
	if len(*cs) > MaxCandidates {
		*cs = (*cs)[:MaxCandidates]
	}
}

// MinimizeBest minimizes each candidate whose failure is of kind, shortest
// first, all within budget, and returns the shortest schedule found; done is
// false when the budget ran out first. found is false when no candidate is of
// kind.
func (p Property[K, R, I]) MinimizeBest(t *testing.T, cs Candidates[K], kind FailureKind, budget time.Duration) (best Candidate[K], found, done bool) {
	t.Helper()
	deadline := time.Now().Add(budget)
	done = true
	for _, c := range cs {
		if c.Kind != kind {
			continue
		}
		left := time.Until(deadline)
		if left <= 0 {
			return best, found, false
		}
		steps, ok := p.Minimize(t, c.Clients, c.Steps, kind, left)
		done = done && ok
		if !found || len(steps) < len(best.Steps) {
			best, found = Candidate[K]{c.Clients, steps, kind}, true
		}
	}
	return best, found, done
}

// minimizedReport is what CheckMinimized logs of a minimized counterexample:
// rapid's steps and the minimized ones, the schedule's text (for ParseSchedule and
// ReplayLock), the failure and the trace of its replay.
func minimizedReport(rapidSteps, steps int, done bool, schedule string, fail *Failure, trace []string) string {
	how := "one-minimal: no single step can go"
	if !done {
		how = fmt.Sprintf("cut short after %s", MinimizeBudget)
	}
	return fmt.Sprintf("rapid's counterexample of %d steps minimized to %d (%s); replay it with ParseSchedule and ReplayLock:\n%s\n%v\n%s",
		rapidSteps, steps, how, schedule, fail, strings.Join(trace, "\n"))
}
