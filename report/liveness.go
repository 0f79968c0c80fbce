package report

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
)

// LivenessKey names the liveness check among the per-key checks: the name of the
// history's liveness op.
const LivenessKey = histories.FLiveness

// maxChildrenShown bounds the lock node's children listed in a liveness witness.
const maxChildrenShown = 10

// LivenessCheck finds the run's final-phase verdict in the history (a nemesis op with
// f histories.FLiveness) and turns it into a check; ok is false when the history has none.
func LivenessCheck(h histories.History) (Check, bool, error) {
	for i := len(h) - 1; i >= 0; i-- {
		op := h[i]
		if !op.Process.Nemesis || op.F != histories.FLiveness {
			continue
		}
		var v histories.Liveness
		if err := json.Unmarshal(op.Value, &v); err != nil {
			return Check{}, false, fmt.Errorf("op %d: field \"value\": liveness value: %v", op.Index, err)
		}
		c := Check{Key: LivenessKey, Verdict: models.Valid, Checker: "final phase", Ops: len(v.Finals)}
		missed, hasMissed := findMissedWakeup(h[:i])
		if v.OK && !hasMissed {
			return c, true, nil
		}
		c.Verdict = models.Invalid
		t := float64(op.Time) / 1e9
		if hasMissed {
			t = float64(missed.Time) / 1e9
		}
		c.FirstViolationSeconds = &t
		var b strings.Builder
		if stall, ok := findStall(h[:i]); ok {
			fmt.Fprintf(&b, "the workload was ended early at %.1fs: %s\n", float64(stall.Time)/1e9, stall.Error)
		}
		if hasMissed {
			fmt.Fprintf(&b, "a missed wake-up at %.1fs: %s\n", float64(missed.Time)/1e9, missed.Error)
		}
		switch {
		case v.OK:
			b.WriteString("the final phase then granted every worker the lock (the waiter had given up, or its session changed): a missed wake-up holds the lock up only until then\n")
			c.Witness = strings.TrimRight(b.String(), "\n")
			return c, true, nil
		case v.MissedWakeup:
			b.WriteString("the final phase was ended early on it (the waiter would have waited out its bound):\n")
		case v.Proof != "":
			fmt.Fprintf(&b, "after every fault was healed, the lock could never be granted again: %s\n", v.Proof)
		default:
			fmt.Fprintf(&b, "after every fault was healed, not every worker could acquire the lock within %.1fs:\n", float64(v.Bound)/1e9)
		}
		for _, ch := range v.Children {
			if ch.MissedWakeup {
				fmt.Fprintf(&b, "a missed wake-up, not an orphan: the lowest lock node %s belongs to worker process %d, which was waiting for the lock with it and was never granted\n", ch.Node, ch.Process)
			}
		}
		for _, f := range v.Finals {
			if !f.Acquired() {
				fmt.Fprintf(&b, "  slot %d, process %d: %s after %.1fs (%s)\n", f.Slot, f.Process, f.Reply, float64(f.WaitedMS)/1e3, f.Error)
			}
		}
		if len(v.Children) > 0 {
			b.WriteString("children of the lock node:\n")
		}
		for i, ch := range v.Children {
			if i == maxChildrenShown {
				orphans := 0
				for _, rest := range v.Children[i:] {
					if rest.Orphan {
						orphans++
					}
				}
				fmt.Fprintf(&b, "  ... %d more (%d of them orphans; the history's liveness op lists all)\n", len(v.Children)-i, orphans)
				break
			}
			owner := "no known worker"
			if ch.Process >= 0 {
				owner = fmt.Sprintf("worker process %d", ch.Process)
			}
			alive := "session expired"
			if ch.SessionAlive {
				alive = "session alive"
			}
			tag := ""
			switch {
			case ch.Orphan:
				tag = "ORPHAN: "
			case ch.MissedWakeup:
				tag = "MISSED WAKE-UP: "
			}
			fmt.Fprintf(&b, "  %s%s owner %s (%s, %s)", tag, ch.Node, ch.EphemeralOwner, owner, alive)
			if ch.Note != "" {
				fmt.Fprintf(&b, ": %s", ch.Note)
			}
			b.WriteString("\n")
		}
		if v.Error != "" {
			fmt.Fprintf(&b, "(listing the lock node failed: %s)\n", v.Error)
		}
		c.Witness = strings.TrimRight(b.String(), "\n")
		c.Cause = blockedCause(h, v)
		return c, true, nil
	}
	return Check{}, false, nil
}

// findStall returns the harness's op that ended the workload early, if any: a stall
// (nobody acquired the lock for too long while workers tried) or an orphan (a lock
// node blocked every waiter). A missed wake-up's is findMissedWakeup's.
func findStall(h histories.History) (histories.Op, bool) {
	for _, op := range h {
		if op.Process.Nemesis && (op.F == histories.FStall || op.F == histories.FOrphan) && !missedWakeup(op) {
			return op, true
		}
	}
	return histories.Op{}, false
}

// missedWakeup reports whether op is an orphan op that reports a missed wake-up.
func missedWakeup(op histories.Op) bool {
	var o histories.Orphan
	return op.Process.Nemesis && op.F == histories.FOrphan && json.Unmarshal(op.Value, &o) == nil && o.MissedWakeup
}

// findMissedWakeup returns the harness's op that saw a missed wake-up during the
// workload (an orphan op whose value says missed_wakeup), if any.
func findMissedWakeup(h histories.History) (histories.Op, bool) {
	for _, op := range h {
		if missedWakeup(op) {
			return op, true
		}
	}
	return histories.Op{}, false
}

// blockedCause is why the lock stayed blocked, when the history says
// (cause.ClassifyBlocked over the lock's entries), or why workers could not be started
// (cause.ClassifyStarved), else nil.
func blockedCause(h histories.History, v histories.Liveness) *cause.Finding {
	for _, op := range h {
		if !op.Process.Nemesis && op.F == histories.FAcquire {
			if f, ok := cause.ClassifyBlocked(h, op.Key, v.Children); ok {
				return &f
			}
			break // the lock's key: its first acquire's
		}
	}
	if f, ok := cause.ClassifyStarved(h, v.Finals); ok {
		return &f
	}
	return nil
}
