package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// Progress is a snapshot of a run in progress, for a live status line.
type Progress struct {
	// Elapsed is the time since the workload started; Total the workload's duration.
	Elapsed, Total time.Duration
	// OK, Fail and Info count completed client ops by outcome.
	OK, Fail, Info int
	// Faults are the nemesis faults on now.
	Faults []string
	// LastEvent is the latest event that matters to the verdict (a lost lock, an
	// op with an unknown outcome, a stall, the final phase), empty if none yet.
	LastEvent string
}

// status tallies what the recorder sees, for Progress.
type status struct {
	ok, fail, info int
	faults         map[string]int
	// lastFault is when a fault last started or stopped (ns since the start);
	// anyFault says one ever did.
	lastFault int64
	anyFault  bool
	lastEvent string
}

// observe updates the tally with an op just recorded; the recorder's lock is held.
func (s *status) observe(op histories.Op) {
	if op.Process.Nemesis {
		var v histories.Fault
		switch op.F {
		case histories.FStart:
			s.lastFault, s.anyFault = op.Time, true
			_ = json.Unmarshal(op.Value, &v)
			if s.faults == nil {
				s.faults = map[string]int{}
			}
			s.faults[v.Class]++
		case histories.FStop:
			s.lastFault, s.anyFault = op.Time, true
			_ = json.Unmarshal(op.Value, &v)
			if s.faults[v.Class]--; s.faults[v.Class] <= 0 {
				delete(s.faults, v.Class)
			}
		case histories.FStall, histories.FOrphan, histories.FOverlap, histories.FLiveness:
			s.lastEvent = fmt.Sprintf("%s at %.1fs", op.F, float64(op.Time)/1e9)
		}
		return
	}
	switch op.Type {
	case histories.OK:
		s.ok++
		if op.Lost {
			s.lastEvent = fmt.Sprintf("process %d lost %s at %.1fs", op.Process.ID, op.Key, float64(op.Time)/1e9)
		}
	case histories.Fail:
		s.fail++
	case histories.Info:
		s.info++
		s.lastEvent = fmt.Sprintf("process %d: %s %s unknown at %.1fs", op.Process.ID, op.F, op.Key, float64(op.Time)/1e9)
	}
}

// snapshot returns the current Progress.
func (r *recorder) snapshot(total time.Duration) Progress {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := Progress{Elapsed: time.Since(r.start), Total: total, OK: r.st.ok, Fail: r.st.fail, Info: r.st.info, LastEvent: r.st.lastEvent}
	for f := range r.st.faults {
		st.Faults = append(st.Faults, f)
	}
	sort.Strings(st.Faults)
	return st
}

// reportProgress calls cfg.Progress every second until ctx ends, and once more then.
func (r *runner) reportProgress(ctx context.Context) {
	if r.cfg.Progress == nil {
		return
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			r.cfg.Progress(r.rec.snapshot(r.cfg.Duration))
			return
		case <-tick.C:
			r.cfg.Progress(r.rec.snapshot(r.cfg.Duration))
		}
	}
}
