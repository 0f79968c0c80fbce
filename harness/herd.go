package harness

import (
	"context"
	"encoding/json"
	"os"
	"sync"
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
	if r.ens.external {
		r.logf("herd: not measured on an existing ensemble (its watch count includes other clients' watches)")
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
		s := r.herdSample(ctx)
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

// herdSample asks every server, in parallel, for its watches and counters.
func (r *runner) herdSample(ctx context.Context) herd.Sample {
	at := time.Since(r.rec.start).Nanoseconds()
	type answer struct {
		watches []herd.Watch
		server  *herd.Server
	}
	answers := make([]answer, len(r.ens.Servers))
	var wg sync.WaitGroup
	for i, s := range r.ens.Servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].watches, answers[i].server = r.herdServer(ctx, s)
		}()
	}
	wg.Wait()
	var watches []herd.Watch
	var servers []herd.Server
	unanswered := 0
	for _, a := range answers {
		if a.server == nil {
			unanswered++
			continue
		}
		watches = append(watches, a.watches...)
		servers = append(servers, *a.server)
	}
	return herd.NewSample(at, r.lockPath, watches, servers, unanswered)
}

// herdServer asks server s for mntr, wchc and mntr again, up to three times until
// its watch count stood still enough in between (herd.NewServer); a try's closing
// mntr opens the next try, which asks for wchc right after it. nil when s did not
// answer, or answered without counters (paused: an empty answer at the deadline; not
// serving: a sentence).
func (r *runner) herdServer(ctx context.Context, s *Server) ([]herd.Watch, *herd.Server) {
	var srv herd.Server
	var watches []herd.Watch
	before, ok := r.herdCounters(ctx, s)
	if !ok {
		return nil, nil
	}
	for range 3 {
		text, err := r.ens.fourLetter(ctx, s, "wchc")
		if err != nil {
			return nil, nil
		}
		if watches, err = herd.ParseWchc(text); err != nil {
			r.logf("herd: server %d: %v", s.ID, err)
			return nil, nil
		}
		after, ok := r.herdCounters(ctx, s)
		if !ok {
			return nil, nil
		}
		srv = herd.NewServer(s.ID, watches, before, after)
		if srv.ChildWatches >= 0 {
			break
		}
		before = after
	}
	return watches, &srv
}

// herdCounters asks server s for mntr; false when it did not answer with its
// counters.
func (r *runner) herdCounters(ctx context.Context, s *Server) (map[string]int64, bool) {
	text, err := r.ens.fourLetter(ctx, s, "mntr")
	if err != nil {
		return nil, false
	}
	m := herd.ParseMntr(text)
	_, ok := m[herd.WatchCount]
	return m, ok
}
