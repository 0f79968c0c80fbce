package harness

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// finalResult is how one slot's end-of-run lock cycle went.
type finalResult = histories.FinalCycle

// Liveness is the verdict of the final phase (see histories.Liveness, its schema in
// the history); Proof is set when a blocking orphan (orphans.go) outlived its own
// worker's final acquire.
type Liveness histories.Liveness

// ChildInfo is one child of the lock node at the end of a run.
type ChildInfo = histories.LockChild

// watchStall ends the workload (errEndWorkload) when workers have kept trying and
// nobody acquired the lock for Config.StallAfter: the final phase then heals
// everything and judges liveness at once. The stall is recorded as a nemesis op.
func (r *runner) watchStall(ctx context.Context) error {
	return everyQuarterSecond(ctx, func() bool {
		since, tried := r.rec.sinceGrant()
		if !tried || since < r.cfg.StallAfter {
			return false
		}
		r.rec.record(histories.NemesisOp(histories.Stall{SinceGrant: since, StallAfter: r.cfg.StallAfter},
			fmt.Sprintf("no worker acquired the lock for %s while workers tried: ending the workload for the final phase", since.Round(time.Millisecond))))
		r.logf("STALL: no worker acquired the lock for %s: ending the workload early, the final phase judges", since.Round(time.Millisecond))
		return true
	})
}

// everyQuarterSecond calls look four times a second until it returns true
// (errEndWorkload) or ctx ends (nil): the pace of the harness's watches (stall,
// orphans, overlaps).
func everyQuarterSecond(ctx context.Context, look func() (done bool)) error {
	return every(ctx, 250*time.Millisecond, look)
}

// every calls look every period until it returns true (errEndWorkload) or ctx ends
// (nil).
func every(ctx context.Context, period time.Duration, look func() (done bool)) error {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		if look() {
			return errEndWorkload
		}
	}
}

// pause waits d, unless the run ends hard first (false).
func (s *session) pause(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.env.hard:
		return false
	}
}

// finalRetryPause is how long a worker whose final acquire was refused waits before it
// asks again.
const finalRetryPause = 250 * time.Millisecond

// finalCycle acquires the lock within the final bound and releases it at once. A
// refusal (fail) that leaves time in the bound is retried, as an application would:
// a worker between two sessions (its old one expired under a fault) may refuse at once
// and be granted a moment later. Liveness asks that every worker acquire once within
// the bound, not at its first try.
func (s *session) finalCycle() finalResult {
	bound := s.env.finalBound
	res := finalResult{Slot: s.w.slot + 1, Process: s.w.Process()}
	defer func() {
		s.cycle = nil
		s.publish()
	}()
	start := time.Now()
	var reply workloads.Message
	var answered bool
	for {
		left := bound - time.Since(start)
		s.cycle = s.env.workload.FinalCycle(max(left, time.Millisecond))
		acquire, _ := s.cycle.Next()
		s.publish()
		reply, answered = s.do(acquire, s.env.bounds.ReplyLimit(left))
		if !answered || reply.Type != workloads.ReplyFail || time.Since(start)+finalRetryPause >= bound || !s.pause(finalRetryPause) {
			break
		}
	}
	res.Reply, res.WaitedMS = reply.Type, time.Since(start).Milliseconds()
	switch {
	case !answered:
		res.Reply, res.Error = histories.FinalCrashed, "worker died or did not answer"
	case reply.Type != workloads.ReplyOK:
		res.Error = "did not acquire within the final bound"
	default:
		if release, more := s.cycle.Next(); more {
			s.publish()
			s.do(release, bound)
		}
	}
	return res
}

// judgeLiveness turns the final turns' results into a Liveness (a slot with none is
// still waiting) and, when it failed, lists the lock node's children.
func (r *runner) judgeLiveness(ctx context.Context, finals []finalResult) Liveness {
	// A turn cut short before it took a slot's session (the run ended hard) has no
	// slot: its slot is listed below from the workers, like one still waiting.
	finals = slices.DeleteFunc(slices.Clone(finals), func(f finalResult) bool { return f.Slot == 0 })
	reported := len(finals)
	for process, w := range r.workerViews() {
		if !slices.ContainsFunc(finals, func(f finalResult) bool { return f.Slot == w.slot+1 }) {
			finals = append(finals, finalResult{Slot: w.slot + 1, Process: process, Reply: histories.FinalWaiting, Error: "no answer when the final phase was judged"})
		}
	}
	sort.Slice(finals, func(i, j int) bool { return finals[i].Slot < finals[j].Slot })
	l := Liveness{OK: reported == r.cfg.Workers, Bound: r.cfg.FinalBound(), Finals: finals}
	for _, f := range finals {
		l.OK = l.OK && f.Acquired()
	}
	if !l.OK {
		children, err := r.lockChildren(ctx)
		l.Children = children
		if err != nil {
			l.Error = err.Error()
		}
	}
	return l
}

// record writes the liveness verdict into the history as a nemesis op, so that a
// later check of the history file alone sees it.
func (l Liveness) record(rec *recorder) {
	rec.record(histories.NemesisOp(histories.Liveness(l), ""))
}

// sessionFreeEntries is a lock reader some of whose entries stay when their owner's
// session ends (PostgreSQL's lock table's row).
type sessionFreeEntries interface {
	OutlivesSession(entry string) bool
}

// lockChildren lists the lock's entries with their owners.
func (r *runner) lockChildren(ctx context.Context) ([]ChildInfo, error) {
	inspector, ok := r.svc.(lockInspector)
	if !ok {
		return nil, errors.New("the service cannot list the lock's entries")
	}
	lock, err := inspector.OpenLock(ctx, r.cfg.SessionTimeout)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	ref := r.lock()
	if u, ok := lock.(lockservice.UnreadPlaces); ok {
		for _, place := range u.Unread(ref) {
			r.logf("lock entries: the %s a worker's acquire named is not read (its layout is the worker's own): the listing below, the orphan watch and the liveness cause do not see it", place)
		}
	}
	children, err := lock.Entries(ref, false)
	if err != nil {
		return nil, err
	}
	alive := inspector.LiveSessions(ctx)
	owners := r.sessionOwners()
	var out []ChildInfo
	for _, c := range children {
		owner, ok, err := lock.Owner(ref, c)
		if err != nil || !ok {
			continue
		}
		info := ChildInfo{Node: c, EphemeralOwner: owner, Process: -1, SessionAlive: alive[owner]}
		if o, ok := lock.(sessionFreeEntries); ok {
			info.OutlivesSession = o.OutlivesSession(c)
		}
		if p, ok := owners[owner]; ok {
			info.Process = p
		}
		out = append(out, info)
	}
	views := r.workerViews()
	view := func(process int) workerView { return views[process] }
	return classifyChildren(out, view, r.cfg.Workload.Kind.QueuesBehindLowest()), nil
}

// classifyChildren labels the lock node's children (sorted, lowest first) by who
// waits on them: view says where a process stands (state Between when it is no
// current worker) and whether its latest release ended unknown. A node of a live
// session that nobody waits with is an orphan: no current worker owns it, or its
// worker is not acquiring with it (it holds nothing and asks for nothing, it waits
// with a newer node of its own, or its latest release ended unknown and it has no
// other node: that release's node, which its recipe refuses to lock past or waits
// behind). The node a current worker waits with is no orphan; when it is the lowest
// and waiters queue behind the lowest (queues), its owner should have been granted:
// a missed wake-up.
func classifyChildren(out []ChildInfo, view func(process int) workerView, queues bool) []ChildInfo {
	newest := map[string]string{}
	for _, c := range out {
		newest[c.EphemeralOwner] = c.Node
	}
	for i := range out {
		c := &out[i]
		v := workerView{state: workloads.Between}
		if c.Process >= 0 {
			v = view(c.Process)
		}
		st := v.state
		waitsWithIt := st == workloads.Acquiring && newest[c.EphemeralOwner] == c.Node && v.unknownRelease == ""
		switch {
		case c.EphemeralOwner == lockservice.PersistentOwner:
			c.Orphan, c.Note = true, "persistent node: nothing will ever delete it"
		case !c.SessionAlive:
		case c.Process < 0:
			c.Orphan, c.Note = true, "owned by a live session no current worker reported"
		case newest[c.EphemeralOwner] != c.Node:
			c.Orphan, c.Note = true, "an older node of a session that has a newer one: the recipe lost track of it (a create whose reply was lost, a node made behind its back)"
		case st == workloads.Holding:
		case waitsWithIt && i == 0 && queues:
			c.MissedWakeup = true
			c.Note = fmt.Sprintf("the lowest node: worker process %d waits for the lock with it and was never granted, a missed wake-up (the recipe did not notice its node became the lowest)", c.Process)
		case waitsWithIt:
			c.Note = fmt.Sprintf("worker process %d waits for the lock with it", c.Process)
		case v.unknownRelease != "":
			c.Orphan = true
			c.Note = fmt.Sprintf("left there, most likely, by %s: worker process %d kept its session, and the recipe did not remove the node", v.unknownRelease, c.Process)
		default:
			c.Orphan = true
			c.Note = fmt.Sprintf("its session is alive, and its worker process %d neither holds the lock nor waits with it (or is gone: killed, or its host vanished)", c.Process)
		}
	}
	return out
}
