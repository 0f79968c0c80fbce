package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models/cause"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// bugWatch reports whether the run ends its workload at the first settled overlap
// that models/cause calls a recipe bug (Config.EndOnRecipeBug): for the locks whose
// overlaps the cause rule sorts (a mutex, a reentrant lock), in a run with a final
// phase and a session timeout, that does not end at every overlap already.
func (r *runner) bugWatch() bool {
	switch r.cfg.Workload.Kind {
	case workloads.Mutex, workloads.Reentrant:
		return r.cfg.EndOnRecipeBug && !r.cfg.EndOnOverlap && r.cfg.FinalPhase && r.cfg.SessionTimeout > 0
	}
	return false
}

// bugLookEvery is how often the recipe-bug watch reads the history written so far.
const bugLookEvery = time.Second

// flushMargin covers the history writer's flush: an op reaches the file the watch
// reads up to half a second after it was recorded.
const flushMargin = time.Second

// settleAfter is how long after the next holder's grant an overlap's class is
// settled: the cause rule's LostBound (how soon the earlier holder must learn it
// lost the lock), and the flush margin.
func settleAfter(p cause.Params) time.Duration { return p.LostBound() + flushMargin }

// watchRecipeBug ends the workload (errEndWorkload) once the history written so far
// has an overlap that models/cause calls a recipe bug, settled: its next holder was
// granted settleAfter ago or more, and neither holder was blind within the flush
// margin (a pause or a session's end whose LostBound had not run out: what it did
// next may still make the overlap honest, and may not be in the file yet). It
// records the overlap op, with its cause, and ends the run at once: the earlier
// holder's chance to learn is behind it. It decides nothing: the checker reads the
// whole history, and an overlap it judged too soon costs only the rest of the round.
// A 20 s round's history is read in milliseconds, once a second.
func (r *runner) watchRecipeBug(ctx context.Context) error {
	p := r.cfg.reportConfig().CauseParams(r.cfg.Service)
	blind := func(process int) bool { return r.blindWithin(process, flushMargin) }
	return every(ctx, bugLookEvery, func() bool {
		h, _, err := histories.Load(r.out.History)
		if err != nil {
			return false // a read that failed is the next look's to do again
		}
		f, ok := settledBug(h, p, r.rec.now(), blind)
		if ok {
			msg := fmt.Sprintf("processes %d and %d held the lock at once, a recipe bug: %s; ending the run", f.Holder, f.Next, f.Why)
			r.rec.record(histories.NemesisOp(histories.Overlap{Holders: []int{f.Holder, f.Next},
				Permits: r.cfg.Workload.Permits, Cause: string(f.Class)}, msg))
			r.logf("OVERLAP: %s", msg)
		}
		return ok
	})
}

// settledBug is the first recipe bug among h's overlaps of any key, when settled at
// now (ns since the run's start) with the processes blind says cannot know yet.
func settledBug(h histories.History, p cause.Params, now int64, blind func(process int) bool) (cause.Finding, bool) {
	for _, key := range lockKeys(h) {
		f, ok := cause.Classify(h, key, p)
		if !ok || f.Class != cause.RecipeBug {
			continue
		}
		if now-f.At >= settleAfter(p).Nanoseconds() && !blind(f.Holder) && !blind(f.Next) {
			return f, true
		}
	}
	return cause.Finding{}, false
}

// lockKeys are the keys h's clients acquired, in the order first seen.
func lockKeys(h histories.History) []string {
	seen := map[string]bool{}
	var keys []string
	for _, op := range h {
		if op.Process.Nemesis || op.F != histories.FAcquire || seen[op.Key] {
			continue
		}
		seen[op.Key] = true
		keys = append(keys, op.Key)
	}
	return keys
}
