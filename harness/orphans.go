package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// A blocking orphan is the lowest child of the lock node when it belongs to the live
// session of a current worker that does not hold the lock and either asks for nothing
// (it is thinking between cycles) or waits with a newer node of its own. Every waiter
// queues behind that node, and it goes only when the worker's recipe deletes it or its
// session ends: a correct recipe deletes it before it answers (or, at the latest, at
// the start of its next acquire). The harness gives the recipe Config.OrphanAfter to do
// so; a node that stays longer shows the deadlock in seconds, where waiting out the
// final phase's bound would take tens of seconds (issue 7's time to detect).
//
// During the workload a shown orphan ends the workload early, like a stall, and the
// final phase judges. In the final phase, where every worker asks for the lock, an
// orphan that outlives its own worker's final acquire by OrphanAfter ends the final
// phase: the lock can never be granted again. (Half of OrphanAfter there: no fault is
// active, and every worker has asked for the lock.)

// A missed wake-up is the lowest child when it is the newest node of a worker that
// waits for the lock with it: a correct recipe is granted within a round trip of its
// node becoming the lowest. During the workload, once no fault has been on for a
// session timeout (every session a fault touched has expired or come back) and for
// the kind's Settle (every request the servers accepted has been answered), such a
// node that stays the lowest for half of Config.OrphanAfter while nobody acquires is
// a missed wake-up (a waiter that found its predecessor gone and set no watch): it is
// recorded (histories.Orphan.MissedWakeup, which makes the liveness check invalid)
// and ends the workload; the final phase watches for it the same way (a waiter left
// without a wake-up late in the workload still waits then), records it and ends.

// blockingOrphan is one observation of a blocking orphan, or of a missed wake-up.
type blockingOrphan struct {
	Node    string
	Owner   string
	Process int
	// Newer is a newer node of the same session ("" when the worker is idle).
	Newer string
	// Waiting: the node is its worker's own waiting node (a missed wake-up, if it
	// stays so), not an orphan.
	Waiting bool
	// LeftBy names the worker's release that ended unknown, when its latest did: the
	// node is most likely that lock's, left behind the session the worker kept.
	LeftBy string
	// idleSpell tells one thinking spell of the worker from the next.
	idleSpell int64
}

// record is the value of the orphan op that reports o.
func (o blockingOrphan) record() histories.Orphan {
	return histories.Orphan{Node: o.Node, Owner: o.Owner, Process: o.Process, Newer: o.Newer, MissedWakeup: o.Waiting, LeftBy: o.LeftBy}
}

// same reports whether o is the same orphan, in the same situation, as p.
func (o blockingOrphan) same(p blockingOrphan) bool {
	return o.Node == p.Node && o.Owner == p.Owner && o.Process == p.Process && o.Waiting == p.Waiting && o.LeftBy == p.LeftBy &&
		(o.Newer != "") == (p.Newer != "") && o.idleSpell == p.idleSpell
}

// describe says what the orphan is and why it blocks, for logs and witnesses.
func (o blockingOrphan) describe(held time.Duration) string {
	why := "which holds nothing and asks for nothing"
	switch {
	case o.Waiting:
		why = "which waits for the lock with it and was not granted: a missed wake-up (the recipe did not notice its node became the lowest)"
	case o.Newer != "":
		why = fmt.Sprintf("which holds nothing and waits with its newer node %s behind it", o.Newer)
	}
	if o.LeftBy != "" {
		why = "left there, most likely, by " + o.LeftBy + ": the worker kept its session, and the recipe did not remove the node"
		if o.Newer != "" {
			why += fmt.Sprintf(" (it waits with its newer node %s behind it)", o.Newer)
		}
	}
	text := fmt.Sprintf("the lowest lock node %s belongs to the live session %s of worker process %d, %s", o.Node, o.Owner, o.Process, why)
	if held > 0 {
		text += fmt.Sprintf("; it stayed so for %s, and every waiter queues behind it", held.Round(100*time.Millisecond))
	}
	return text
}

// orphanTracker turns observations into a proof: a blocking orphan at every
// observation for at least `after`. In the final phase it must be the same orphan in
// the same situation throughout (its own worker's acquire had `after` to remove it).
// During the workload, where waiters time out and a broken recipe may delete other
// workers' nodes, the orphan may change as long as there is one at every observation
// (the caller also asks that nobody acquired meanwhile).
type orphanTracker struct {
	after time.Duration
	// anyOrphan lets the orphan change between observations.
	anyOrphan bool
	cur       *blockingOrphan
	since     time.Time
}

// observe takes one observation (nil: none) made at now and returns how long
// orphans have been seen, and whether that is long enough.
func (t *orphanTracker) observe(o *blockingOrphan, now time.Time) (time.Duration, bool) {
	if o == nil {
		t.cur = nil
		return 0, false
	}
	if t.cur == nil || (!t.anyOrphan && !t.cur.same(*o)) {
		t.since = now
	}
	t.cur = o
	held := now.Sub(t.since)
	return held, held >= t.after
}

// lockChild is a child of the lock node with its owner session.
// findBlockingOrphan reads the lock's entries (fresh, so the read is not stale) and
// returns the blocking orphan, nil if there is none.
func (r *runner) findBlockingOrphan(lock lockservice.LockReader) (*blockingOrphan, error) {
	ref := r.lock()
	names, err := lock.Entries(ref, true)
	if err != nil {
		return nil, err
	}
	lowest, lowestOwner := "", ""
	for i, name := range names {
		owner, ok, err := lock.Owner(ref, name)
		if err != nil {
			return nil, err
		}
		if ok {
			lowest, lowestOwner, names = name, owner, names[i+1:]
			break
		}
	}
	if lowestOwner == "" || lowestOwner == lockservice.PersistentOwner {
		return nil, nil // no child, or a persistent one: not a session's orphan
	}
	process, known := r.sessionOwners()[lowestOwner]
	if !known {
		return nil, nil // a session no current worker reported: it ends on its own
	}
	view, current := r.workerViews()[process]
	if !current || view.state == workloads.Holding {
		return nil, nil
	}
	o := &blockingOrphan{Node: lowest, Owner: lowestOwner, Process: process, LeftBy: view.unknownRelease}
	if view.state == workloads.Thinking {
		o.idleSpell = view.idleSpell
		return o, nil
	}
	for _, name := range names {
		owner, ok, err := lock.Owner(ref, name)
		if err != nil {
			return nil, err
		}
		if ok && owner == lowestOwner {
			o.Newer = name
			return o, nil
		}
	}
	// A worker whose latest release ended unknown and that has no newer node is not
	// waiting with this one: its recipe refuses to lock again (zk.Lock's "trying to
	// acquire a lock twice") or waits behind it without a node of its own.
	o.Waiting = o.LeftBy == ""
	return o, nil
}

// watchOrphans reads the lowest lock node every quarter second until ctx ends, and
// hands look each observation (nil: no blocking orphan or waiting node, or a failed
// read, which forgets what was seen: a proof needs every observation), until look
// says it has its proof.
func (r *runner) watchOrphans(ctx context.Context, look func(o *blockingOrphan, now time.Time) (done bool)) error {
	inspector, ok := r.svc.(lockInspector)
	if !ok {
		r.logf("orphan watch: the service cannot list the lock's entries: not watching")
		return nil
	}
	lock, err := inspector.OpenLock(ctx, r.cfg.SessionTimeout)
	if err != nil {
		r.logf("orphan watch: no session (%v): not watching", err)
		return nil
	}
	defer lock.Close()
	return everyQuarterSecond(ctx, func() bool {
		o, err := r.findBlockingOrphan(lock)
		if err != nil {
			o = nil
		}
		return look(o, time.Now())
	})
}

// quiet is how long faults must have been off before a waiting lowest node counts as
// a missed wake-up: a session timeout (every session a fault touched has expired or
// come back), or the kind's Settle if longer (a request the servers still owe).
func (r *runner) quiet() time.Duration {
	return max(r.cfg.SessionTimeout, kind.Of(r.cfg.Service).Settle)
}

// split is an observation as the orphan tracker and the missed wake-up tracker see
// it: a waiting node counts for the latter only when faults have been quiet for
// r.quiet().
func (r *runner) split(o *blockingOrphan) (orphan, waiting *blockingOrphan) {
	switch {
	case o == nil:
	case !o.Waiting:
		orphan = o
	case kind.Of(r.cfg.Service).Queue && r.rec.faultsQuiet() >= r.quiet():
		// Only a queue of nodes grants its lowest: a key or a session lock's owner
		// may be acquiring (a RedLock short of a majority, a nested acquire).
		waiting = o
	}
	return orphan, waiting
}

// endOnOrphan is the workload's orphan watch: blocking orphans seen for
// Config.OrphanAfter while nobody acquired the lock are recorded as a nemesis op
// (histories.FOrphan) and end the workload (errEndWorkload) for the final phase to judge.
func (r *runner) endOnOrphan(ctx context.Context) error {
	noGrant := func(held time.Duration) bool {
		since, _ := r.rec.sinceGrant()
		return since >= held
	}
	orphans := orphanTracker{after: r.cfg.OrphanAfter, anyOrphan: true}
	wakeups := orphanTracker{after: r.cfg.OrphanAfter / 2}
	return r.watchOrphans(ctx, func(o *blockingOrphan, now time.Time) bool {
		orphan, waiting := r.split(o)
		if held, ok := orphans.observe(orphan, now); ok && noGrant(held) {
			msg := fmt.Sprintf("for %s nobody acquired the lock and the lowest lock node was a blocking orphan; the latest: %s: ending the workload for the final phase",
				held.Round(100*time.Millisecond), orphan.describe(0))
			r.rec.record(histories.NemesisOp(orphan.record(), msg))
			r.logf("ORPHAN: %s", msg)
			return true
		}
		if held, ok := wakeups.observe(waiting, now); ok && noGrant(held) {
			msg := fmt.Sprintf("with no fault on for at least %s, %s: ending the workload", r.quiet(), waiting.describe(held))
			r.rec.record(histories.NemesisOp(waiting.record(), msg))
			r.logf("MISSED WAKE-UP: %s", msg)
			return true
		}
		return false
	})
}

// finalOrphan is the final phase's orphan watch: one orphan that outlives its own
// worker's final acquire by half of Config.OrphanAfter (no fault is active then: a
// recipe that cleans up a stale node at the start of its acquire needs a round trip)
// shows the lock can never be granted. It also watches for a missed wake-up as the
// workload did (a waiter left without one late in the workload still waits, and the
// final phase's own acquires race too): one is recorded as its orphan op, and found.
func (r *runner) finalOrphan(ctx context.Context, found func(finalProof)) {
	orphans := orphanTracker{after: r.cfg.OrphanAfter / 2}
	wakeups := orphanTracker{after: r.cfg.OrphanAfter / 2}
	_ = r.watchOrphans(ctx, func(o *blockingOrphan, now time.Time) bool {
		orphan, waiting := r.split(o)
		if held, ok := wakeups.observe(waiting, now); ok {
			msg := fmt.Sprintf("in the final phase, with no fault on for at least %s, %s", r.quiet(), waiting.describe(held))
			r.rec.record(histories.NemesisOp(waiting.record(), msg))
			r.logf("MISSED WAKE-UP: %s", msg)
			found(finalProof{text: msg, missedWakeup: true})
			return true
		}
		held, ok := orphans.observe(orphan, now)
		if ok {
			found(finalProof{text: orphan.describe(held)})
		}
		return ok
	})
}
