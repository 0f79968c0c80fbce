package harness

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// overlapWatch reports whether the run ends its workload at the first overlap it
// sees (Config.EndOnOverlap): only for locks whose holders the harness can count
// (mutex, reentrant, semaphore; not a read-write lock, whose readers share it, nor
// the counter, whose lock only guards the data that decides its verdict).
func (r *runner) overlapWatch() bool {
	switch r.cfg.Workload.Kind {
	case workloads.Mutex, workloads.Reentrant, workloads.Semaphore:
		return r.cfg.EndOnOverlap && r.cfg.FinalPhase
	}
	return false
}

// endOnOverlap is the workload's overlap watch: when more workers hold the lock at
// once than it admits (each was told ok and has not begun its release), it records
// a nemesis op (f "overlap") and, overlapGrace later, ends the workload; the run
// skips its final phase and ends the holds still running. It decides nothing: the
// checker finds the violation in the history; the watch only spares the rest of a
// run whose verdict is already in. The grace is what the cause of the overlap needs
// to be told: whether the earlier holder learned it had lost the lock within
// LostBound (models/cause), or went on holding.
func (r *runner) endOnOverlap(ctx context.Context) error {
	err := r.watchOverlap(ctx)
	if err == nil {
		return nil
	}
	t := time.NewTimer(r.overlapGrace())
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	return err
}

// overlapGrace is how long the workload goes on after the overlap watch saw one:
// the cause's LostBound (a session timeout and a second) and a quarter second more.
func (r *runner) overlapGrace() time.Duration {
	return r.cfg.SessionTimeout + time.Second + 250*time.Millisecond
}

// watchOverlap waits for an overlap and records it; errEndWorkload when it saw one.
// An overlap in which a holder cannot know yet that it lost the lock (blindNow: the
// nemesis paused it or ended its session, a session timeout and a second ago at
// most) does not end the run: no recipe prevents it (an honest unfenced overlap),
// and the overlap that matters, a holder that goes on once it could know, comes
// after it. The watch looks again a quarter second later.
func (r *runner) watchOverlap(ctx context.Context) error {
	return everyQuarterSecond(ctx, func() bool {
		var holders []int
		excused := false
		for process, v := range r.workerViews() {
			if v.state == workloads.Holding {
				holders = append(holders, process)
				excused = excused || r.blindNow(process)
			}
		}
		if len(holders) <= r.cfg.Workload.Permits || excused {
			return false
		}
		sort.Ints(holders)
		msg := fmt.Sprintf("processes %v held the lock at once (it admits %d): ending the run in %s", holders, r.cfg.Workload.Permits, r.overlapGrace())
		r.rec.record(histories.NemesisOp(histories.Overlap{Holders: holders, Permits: r.cfg.Workload.Permits}, msg))
		r.logf("OVERLAP: %s", msg)
		return true
	})
}

// blindFaults are the client faults after which a holder cannot know at once that it
// lost the lock: its process stopped, or its session ended by the servers.
var blindFaults = map[nemesis.Class]bool{nemesis.ClassClientPause: true, nemesis.ClassSessionExpire: true, nemesis.ClassConnectionKill: true}

// noteBlind keeps, from the nemesis's events, which processes cannot know yet that
// they lost the lock: from a blind fault's start until a session timeout and a
// second after its stop (models/cause's LostBound: how soon a holder must learn).
func (r *runner) noteBlind(ev nemesis.Event) {
	p, ok := ev.Value["process"].(int)
	if !ok || !blindFaults[ev.Fault] || ev.Err != "" && ev.Phase == nemesis.PhaseStart {
		return
	}
	until := time.Now().Add(24 * time.Hour) // while the fault is on
	if ev.Phase == nemesis.PhaseStop {
		until = time.Now().Add(r.cfg.SessionTimeout + time.Second)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.blind == nil {
		r.blind = map[int]time.Time{}
	}
	r.blind[p] = until
}

// blindNow reports whether process p cannot know yet that it lost the lock.
func (r *runner) blindNow(p int) bool { return r.blindWithin(p, 0) }

// blindWithin reports whether process p could not know it had lost the lock at
// some moment of the last d.
func (r *runner) blindWithin(p int, d time.Duration) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Now().Add(-d).Before(r.blind[p])
}
