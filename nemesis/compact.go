package nemesis

import (
	"context"
	"fmt"
	"math/rand/v2"
)

var (
	_ Fault = (*Compaction)(nil)
	_ fault = (*Compaction)(nil)
)

// Compactor is a service that compacts its history of revisions (etcd): everything
// before the current revision is discarded, and a watch that asks for an older
// revision fails (ErrCompacted). revision is the one it compacted at.
type Compactor interface {
	Compact(ctx context.Context) (revision int64, err error)
}

// Compaction compacts the service's history of revisions up to now (Compactor), as an
// operator's or the auto-compactor's compaction does: a lock waiter that is about to
// watch its predecessor from an older revision is told the revision is gone (etcd's
// #9715: such a waiter left its key behind). The fault is over when applied: there
// is nothing to undo.
type Compaction struct{}

// Apply compacts.
func (f Compaction) Apply(ctx context.Context, c Cluster, rng *rand.Rand) (Applied, error) {
	return run(ctx, f, c, rng)
}

func (f Compaction) plan(ctx context.Context, c Cluster, _ *rand.Rand) (plan, error) {
	v := map[string]any{"fault": string(ClassCompaction)}
	cp, ok := abilityOf[Compactor](c)
	if !ok {
		return plan{value: v}, fmt.Errorf("compaction: the service has no history of revisions to compact")
	}
	return plan{value: v, undo: noUndo, apply: func(ctx context.Context) error {
		rev, err := cp.Compact(ctx)
		if err == nil {
			v["revision"] = rev
		}
		return err
	}}, nil
}
