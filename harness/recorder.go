package harness

import (
	"math"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// recorder stamps ops with the run's monotonic clock and appends them to the history.
type recorder struct {
	w     *histories.Writer
	start time.Time

	mu       sync.Mutex
	firstErr error
	// lastAttempt and lastGrant are the times (ns since start) of the latest acquire
	// invoked and the latest acquire granted, for the stall watchdog.
	lastAttempt, lastGrant int64
	// st tallies ops for Status.
	st status
	// lastT is each client process's latest op time, so that an op stamped with a
	// worker's own clock (recordAt) never goes before its process's previous op.
	lastT map[histories.Process]int64
}

func (r *recorder) now() int64 { return r.elapsed().Nanoseconds() }

// elapsed is the time since the run's start.
func (r *recorder) elapsed() time.Duration { return time.Since(r.start) }

// record appends op at the current time.
func (r *recorder) record(op histories.Op) { r.recordAt(op, r.now()) }

// recordAt appends op at time t (ns since start, as a worker's report mapped onto
// the run's clock), or now if t is later, or its process's previous op's time if t
// is earlier (a report's time bound may reach back past it).
func (r *recorder) recordAt(op histories.Op, t int64) {
	r.mu.Lock()
	op.Time = min(t, r.now())
	if !op.Process.Nemesis {
		if r.lastT == nil {
			r.lastT = map[histories.Process]int64{}
		}
		op.Time = max(op.Time, r.lastT[op.Process])
		r.lastT[op.Process] = op.Time
	}
	r.mu.Unlock()
	_, err := r.w.Append(op)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil && r.firstErr == nil {
		r.firstErr = err
	}
	r.st.observe(op)
	if !op.Process.Nemesis && op.F == histories.FAcquire {
		switch op.Type {
		case histories.Invoke:
			r.lastAttempt = max(r.lastAttempt, op.Time)
		case histories.OK:
			r.lastGrant = max(r.lastGrant, op.Time)
		}
	}
}

// attempted notes an acquire under way from t that is not recorded yet (a v3
// worker reports its invoke with its completion), for the stall watchdog.
func (r *recorder) attempted(t int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastAttempt = max(r.lastAttempt, t)
}

// sinceGrant says how long ago the lock was last granted (or the run started), and
// whether an acquire was attempted since.
func (r *recorder) sinceGrant() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return time.Duration(r.now() - r.lastGrant), r.lastAttempt > r.lastGrant
}

// faultsQuiet says how long no fault has been on: zero while one is, forever when
// none ever was.
func (r *recorder) faultsQuiet() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case len(r.st.faults) > 0:
		return 0
	case !r.st.anyFault:
		return math.MaxInt64
	}
	return time.Duration(r.now() - r.st.lastFault)
}

func (r *recorder) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firstErr
}
