package herd

import "fmt"

// Verdict is the herd check's outcome.
type Verdict string

// The verdicts.
const (
	// Herd: over the samples with two waiters or more, at least half of the waiters
	// watched the lock node's children, so a release woke them all.
	Herd Verdict = "herd"
	// NoHerd: there were two waiters or more at once, and most watched one node.
	NoHerd Verdict = "no herd"
	// NotExercised: never two waiters at once (or no sample at all): a herd could not
	// have shown.
	NotExercised Verdict = "not exercised"
)

// Report is a run's herd record (results.json's "herd").
type Report struct {
	Verdict Verdict `json:"verdict"`
	// Line is the plain verdict line, e.g. "herd: 4 of 4 waiters watch /zlc/ab12/l0".
	Line string `json:"line"`
	// Lock is the lock node the samples looked at.
	Lock string `json:"lock"`
	// Samples is how many samples were taken, Unknown how many of them did not count
	// (a server's child watches moved while it was read), Contended how many of the
	// rest saw two waiters or more.
	Samples   int `json:"samples"`
	Unknown   int `json:"unknown_samples"`
	Contended int `json:"contended_samples"`
	// MaxWaiters is the most waiters one sample saw; MeanWaiters the mean over the
	// contended samples.
	MaxWaiters  int     `json:"max_waiters"`
	MeanWaiters float64 `json:"mean_waiters"`
	// OnLock is the most waiters one sample saw watching the lock node's children,
	// and OnLockOf the number of waiters in that sample.
	OnLock   int `json:"waiters_on_lock_node"`
	OnLockOf int `json:"waiters_on_lock_node_of"`
	// OnLockShare is the share of the waiters, over the contended samples, that
	// watched the lock node's children (0: none ever did; 1: all always did).
	OnLockShare float64 `json:"waiters_on_lock_node_share"`
	// WatchesPerWaiter is the mean number of watches per waiter over the contended
	// samples (about 1 with or without the herd: what differs is what is watched).
	WatchesPerWaiter float64 `json:"watches_per_waiter"`
	// Grants is the acquires granted from the first sample to the last; Requests and
	// Reads are what the servers received meanwhile (every request; the reads under
	// /zlc), a restarted server's counters counted from its restart; the per-grant
	// figures divide them by Grants (0 when none).
	Grants           int     `json:"grants"`
	Requests         int64   `json:"requests"`
	Reads            int64   `json:"reads"`
	RequestsPerGrant float64 `json:"requests_per_grant"`
	ReadsPerGrant    float64 `json:"reads_per_grant"`
}

// Analyze turns a run's samples (in time order) and the times of its grants (the
// acquires completed ok, in the history's clock) into its Report.
func Analyze(samples []Sample, grants []int64) Report {
	r := Report{Samples: len(samples)}
	var waiters, onLock, watches int
	for _, s := range samples {
		r.Lock = s.Lock
		c := Classify(s)
		if !c.Known {
			r.Unknown++
			continue
		}
		r.MaxWaiters = max(r.MaxWaiters, c.Waiters)
		if c.OnLock > r.OnLock || (c.OnLock == r.OnLock && c.OnLock > 0 && c.Waiters > r.OnLockOf) {
			r.OnLock, r.OnLockOf = c.OnLock, c.Waiters
		}
		if c.Contended() {
			r.Contended++
			waiters += c.Waiters
			onLock += c.OnLock
			watches += c.Watches
		}
	}
	if r.Contended > 0 {
		r.MeanWaiters = float64(waiters) / float64(r.Contended)
		r.OnLockShare = float64(onLock) / float64(waiters)
		r.WatchesPerWaiter = float64(watches) / float64(waiters)
	}
	r.Requests, r.Reads = growth(samples)
	if len(samples) > 0 {
		first, last := samples[0].T, samples[len(samples)-1].T
		for _, t := range grants {
			if t >= first && t <= last {
				r.Grants++
			}
		}
	}
	if r.Grants > 0 {
		r.RequestsPerGrant = float64(r.Requests) / float64(r.Grants)
		r.ReadsPerGrant = float64(r.Reads) / float64(r.Grants)
	}
	r.Verdict, r.Line = r.verdict()
	return r
}

// verdict is the report's verdict and its plain line.
func (r Report) verdict() (Verdict, string) {
	switch {
	case r.Contended == 0:
		why := "never two waiters at once"
		if r.Samples == r.Unknown {
			why = "no usable sample of the servers' watches"
		}
		return NotExercised, "herd: not exercised (" + why + ")"
	case r.OnLockShare >= 0.5 && r.OnLock >= 2:
		return Herd, fmt.Sprintf("herd: %d of %d waiters watch %s", r.OnLock, r.OnLockOf, r.Lock)
	default:
		return NoHerd, "no herd: each waiter watches its predecessor"
	}
}

// growth sums, over the servers, the growth of their request and read counters from
// the first sample to the last. A counter that went down belongs to a server that
// restarted: what it counted since then is added.
func growth(samples []Sample) (requests, reads int64) {
	type last struct{ packets, reads int64 }
	prev := map[int]last{}
	add := func(n *int64, before, now int64) {
		if now >= before {
			*n += now - before
		} else {
			*n += now
		}
	}
	for _, s := range samples {
		for _, c := range s.Servers {
			if p, seen := prev[c.ID]; seen {
				add(&requests, p.packets, c.Packets)
				add(&reads, p.reads, c.Reads)
			}
			prev[c.ID] = last{c.Packets, c.Reads}
		}
	}
	return requests, reads
}

// Figures is the report's figures in one line, for the summary under the verdict
// line.
func (r Report) Figures() string {
	return fmt.Sprintf("%d samples (%d with 2+ waiters): waiters %.1f mean, %d max; on the lock node %.0f%%; %.2f watches per waiter; %.1f reads and %.1f requests per grant (%d grants)",
		r.Samples, r.Contended, r.MeanWaiters, r.MaxWaiters, 100*r.OnLockShare, r.WatchesPerWaiter, r.ReadsPerGrant, r.RequestsPerGrant, r.Grants)
}
