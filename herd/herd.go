package herd

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Sample is one look at every server during the workload: one line of the run
// directory's herd.jsonl, appended by the harness as it is taken.
type Sample struct {
	// T is when the sample was taken, in nanoseconds since the run started (the
	// history's clock).
	T int64 `json:"t_ns"`
	// Lock is the run's lock node (/zlc/<run>/<key>): the node whose children are the
	// waiters' queue.
	Lock string `json:"lock"`
	// Watches maps each session that watches the lock node or a node under it to the
	// paths it watches there (sorted, each once), merged from every server that
	// answered wchc. Watches elsewhere (other runs, other keys) are not kept.
	Watches map[string][]string `json:"watches"`
	// Servers are the request counters of every server that answered mntr.
	Servers []Counters `json:"servers"`
	// Unanswered counts the servers whose counters are missing: they did not answer
	// mntr (killed, paused, cut off by a fault).
	Unanswered int `json:"unanswered,omitempty"`
}

// PacketsReceived is the mntr counter of the requests a server received.
const PacketsReceived = "zk_packets_received"

// Counters are one server's request counters from mntr, cumulative since it started.
type Counters struct {
	// ID is the server's myid.
	ID int `json:"id"`
	// Packets is zk_packets_received: every request the server's clients sent it
	// (reads, writes, watches set, session pings).
	Packets int64 `json:"packets_received"`
}

// NewSample builds a sample at t from the wchc answers' watches and the mntr
// counters, keeping only the watches on lock or under it.
func NewSample(t int64, lock string, watches []Watch, servers []Counters, unanswered int) Sample {
	s := Sample{T: t, Lock: lock, Watches: map[string][]string{}, Servers: servers, Unanswered: unanswered}
	for _, w := range watches {
		if !under(w.Path, lock) {
			continue
		}
		if !slices.Contains(s.Watches[w.Session], w.Path) {
			s.Watches[w.Session] = append(s.Watches[w.Session], w.Path)
		}
	}
	for _, paths := range s.Watches {
		sort.Strings(paths)
	}
	return s
}

// under reports whether path is lock or a node below it.
func under(path, lock string) bool {
	return path == lock || strings.HasPrefix(path, lock+"/")
}

// Classified is one sample read as waiters: every session with a watch on the lock
// node or under it is a waiter.
type Classified struct {
	// Waiters is the number of sessions watching the lock node or nodes under it.
	Waiters int
	// OnLock is how many of them watch the lock node itself.
	OnLock int
	// OnOneSibling is how many watch exactly one node under the lock node and not the
	// lock node: the predecessor-watch recipe.
	OnOneSibling int
	// Watches is the number of watched paths summed over the waiters.
	Watches int
}

// Classify reads a sample. A watch on the lock node's own path counts as a watch on
// its children: wchc does not say whether a path's watch is a data or a child watch
// (ParseWchc), and a lock recipe has no reason to watch its lock node's data, while
// getChildren with a watch (the herd) lists exactly that path. A watch on a path
// under the lock node is a data or exists watch on one contender's node (a recipe has
// no reason to list a queue node's children). A waiter may watch more than one node
// (an exists watch left on a predecessor that was already gone stays registered until
// that path is created again): those count as waiters, not on one sibling.
func Classify(s Sample) Classified {
	var c Classified
	for _, paths := range s.Watches {
		c.Waiters++
		c.Watches += len(paths)
		switch {
		case slices.Contains(paths, s.Lock):
			c.OnLock++
		case len(paths) == 1:
			c.OnOneSibling++
		}
	}
	return c
}

// Verdict is the herd check's outcome.
type Verdict string

// The verdicts.
const (
	// Herd: in some sample at least two waiters watched the lock node itself, so one
	// release woke them all.
	Herd Verdict = "herd"
	// NoHerd: there were at least two waiters at once, and never two watching the
	// lock node.
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
	// Samples is how many samples were taken; Contended how many saw two waiters or
	// more.
	Samples   int `json:"samples"`
	Contended int `json:"contended_samples"`
	// MaxWaiters is the most waiters one sample saw; MeanWaiters the mean over the
	// contended samples.
	MaxWaiters  int     `json:"max_waiters"`
	MeanWaiters float64 `json:"mean_waiters"`
	// OnLock is the most waiters one sample saw watching the lock node itself, and
	// OnLockOf the number of waiters in that sample.
	OnLock   int `json:"waiters_on_lock_node"`
	OnLockOf int `json:"waiters_on_lock_node_of"`
	// OnLockShare is the share of the waiters, over the contended samples, that
	// watched the lock node (0: none ever did; 1: all always did).
	OnLockShare float64 `json:"waiters_on_lock_node_share"`
	// WatchesPerWaiter is the mean number of watched paths per waiter over the
	// contended samples (about 1 for both recipes: the difference is what is watched).
	WatchesPerWaiter float64 `json:"watches_per_waiter"`
	// Requests is the requests the servers received from the first sample to the
	// last (a restarted server's counter counted from its restart), Grants the
	// acquires granted meanwhile, RequestsPerGrant the one over the other (0 when no
	// grant).
	Requests         int64   `json:"requests"`
	Grants           int     `json:"grants"`
	RequestsPerGrant float64 `json:"requests_per_grant"`
}

// Analyze turns a run's samples (in time order) and the times of its grants (the
// acquires completed ok, in the history's clock) into its Report.
func Analyze(samples []Sample, grants []int64) Report {
	r := Report{Samples: len(samples)}
	var waiters, onLock, watches int
	for _, s := range samples {
		r.Lock = s.Lock
		c := Classify(s)
		r.MaxWaiters = max(r.MaxWaiters, c.Waiters)
		if c.OnLock > r.OnLock || (c.OnLock == r.OnLock && c.OnLock > 0 && c.Waiters > r.OnLockOf) {
			r.OnLock, r.OnLockOf = c.OnLock, c.Waiters
		}
		if c.Waiters >= 2 {
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
	r.Requests = Requests(samples)
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
	}
	r.Verdict, r.Line = r.verdict()
	return r
}

// verdict is the report's verdict and its plain line.
func (r Report) verdict() (Verdict, string) {
	switch {
	case r.OnLock >= 2:
		return Herd, fmt.Sprintf("herd: %d of %d waiters watch %s", r.OnLock, r.OnLockOf, r.Lock)
	case r.Contended == 0:
		why := "never two waiters at once"
		if r.Samples == 0 {
			why = "no sample of the servers' watches"
		}
		return NotExercised, "herd: not exercised (" + why + ")"
	default:
		return NoHerd, "no herd: each waiter watches its predecessor"
	}
}

// Requests sums, over the servers, the growth of their request counters from the
// first sample to the last. A counter that went down belongs to a server that
// restarted: what it counted since then is added.
func Requests(samples []Sample) int64 {
	last := map[int]int64{}
	var n int64
	for _, s := range samples {
		for _, c := range s.Servers {
			prev, seen := last[c.ID]
			switch {
			case !seen:
			case c.Packets >= prev:
				n += c.Packets - prev
			default:
				n += c.Packets
			}
			last[c.ID] = c.Packets
		}
	}
	return n
}
