package harness

import (
	"context"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/models/herd"
)

// What a run asks of its lock service beyond lockservice.Service, each declared here
// where it is used. A service without one runs without the watch or record that needs
// it and says so in the run's log; it is never given a wrong number.

// rootMaker makes the root a run on a deployment it does not manage writes under
// (--connect's chroot), and returns how to remove it.
type rootMaker interface {
	PrepareRoot(ctx context.Context, sessionTimeout time.Duration, root string) (undo func(ctx context.Context, within time.Duration) error, err error)
}

// lockInspector reads the lock's entries and which sessions live: the liveness
// verdict and the orphan watch attribute each entry to a worker.
type lockInspector interface {
	OpenLock(ctx context.Context, sessionTimeout time.Duration) (lockservice.LockReader, error)
	LiveSessions(ctx context.Context) map[string]bool
}

// counterStore keeps the counter workload's shared value.
type counterStore interface {
	MakeCounter(ctx context.Context, sessionTimeout time.Duration, path string) error
	ReadCounter(ctx context.Context, sessionTimeout time.Duration, path string) (int64, error)
}

// herdSampler samples the servers' watches and counters for the herd verdict.
type herdSampler interface {
	HerdSample(ctx context.Context, at int64, lockPath string, logf func(string, ...any)) herd.Sample
}

// yardstick runs the plain client loop a run's overhead is measured against
// (--baseline, and its warm-up).
type yardstick interface {
	PlainLoops(ctx context.Context, path string, n int, d, sessionTimeout time.Duration, hold func(int) time.Duration) (lockservice.Baseline, error)
}

var (
	_ yardstick     = (*lockservice.Ensemble)(nil)
	_ rootMaker     = (*lockservice.Ensemble)(nil)
	_ lockInspector = (*lockservice.Ensemble)(nil)
	_ counterStore  = (*lockservice.Ensemble)(nil)
	_ herdSampler   = (*lockservice.Ensemble)(nil)
)
