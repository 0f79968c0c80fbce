package harness

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// The herd watch samples the servers' watch tables and request counters with
// herdInterval between samples until it has herdContendedWanted samples with two
// waiters or more (enough for the verdict), then with herdSlowInterval to the
// workload's end (the reads per grant need only the first and last sample). Often
// enough at first to see a queue of waiters whose holds last tens of milliseconds many
// times in a short run; rarely after, for each sample (mntr, wchc, mntr per server)
// costs the servers the run measures about a tenth of their CPU per lock cycle at
// 400 ms (BENCHMARKS.md, issue 15).
const (
	herdInterval        = 400 * time.Millisecond
	herdSlowInterval    = 4 * time.Second
	herdContendedWanted = 20
)

// herdPace is the wait before the next herd sample, after contended samples with two
// waiters or more.
func herdPace(contended int) time.Duration {
	if contended < herdContendedWanted {
		return herdInterval
	}
	return herdSlowInterval
}

// watchHerd samples every server's watches (wchc) and request counters (mntr) at
// herdPace until ctx ends, appending each sample to the run's herd.jsonl (package
// herd reads them). A server that does not answer is counted, not an error: a fault
// may have killed or cut it off. Only a file that cannot be written fails the run.
//
// An existing ensemble's (run --connect) is not sampled: its watch count includes
// other clients' watches, which the child watches are counted from, so the run has no
// herd.jsonl and no herd record.
func (r *runner) watchHerd(ctx context.Context) error {
	if !r.svc.Managed() {
		r.logf("herd: not measured on an existing ensemble (its watch count includes other clients' watches)")
		return nil
	}
	sampler, ok := r.svc.(herdSampler)
	if !ok {
		r.logf("herd: not measured (the service has no watches to sample)")
		return nil
	}
	f, err := os.Create(r.dir.File(rundir.Herd))
	if err != nil {
		return r.fail(err, "herd samples")
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	t := time.NewTicker(herdInterval)
	defer t.Stop()
	contended := 0
	for {
		s := sampler.HerdSample(ctx, time.Since(r.rec.start).Nanoseconds(), r.lockPath, r.logf)
		if ctx.Err() != nil {
			return nil // cut short by the workload's end: the servers may not have answered
		}
		if err := enc.Encode(s); err != nil {
			return r.fail(err, "herd samples")
		}
		if herd.Classify(s).Contended() {
			contended++
		}
		t.Reset(herdPace(contended))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
