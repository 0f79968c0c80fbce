package herd

import (
	"slices"
	"sort"
	"strings"
)

// The mntr counters a sample keeps (ZooKeeper 3.8's names).
const (
	// PacketsReceived counts every request a server's clients sent it: reads,
	// writes, session pings.
	PacketsReceived = "zk_packets_received"
	// WatchCount counts the watches a server holds, data and child watches together
	// (path and session pairs).
	WatchCount = "zk_watch_count"
	// ZLCReads counts the read requests (getData, exists, getChildren) a server
	// served on paths under /zlc, where every run keeps its nodes: ZooKeeper's
	// per-namespace read summary (its namespace is a path's first component).
	ZLCReads = "zk_cnt_zlc_read_per_namespace"
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
	// DataWatches maps each session with a data watch (getData, exists) on the lock
	// node or a node under it to those paths (sorted, each once), merged from every
	// server that answered wchc. Watches elsewhere (other runs, other keys) are not
	// kept.
	DataWatches map[string][]string `json:"data_watches"`
	// Servers are what each server that answered said of itself.
	Servers []Server `json:"servers"`
	// Unanswered counts the servers that did not answer (killed, paused, cut off by
	// a fault).
	Unanswered int `json:"unanswered,omitempty"`
}

// Server is one server's part of a sample: its child watches and its request
// counters (cumulative since it started).
type Server struct {
	// ID is the server's myid.
	ID int `json:"id"`
	// ChildWatches is the server's getChildren watches: its zk_watch_count less the
	// data watches its wchc listed; -1 when the count moved too much while it was
	// read (NewServer), so it is not known.
	ChildWatches int `json:"child_watches"`
	// Packets is its PacketsReceived, Reads its ZLCReads.
	Packets int64 `json:"packets_received"`
	Reads   int64 `json:"zlc_reads"`
}

// NewServer builds server id's part of a sample from its wchc answer's watches and
// its mntr counters before (mntr) and after (again) the wchc. The child watches are
// the smaller watch count less the data watches listed, known only when the count
// moved meanwhile by at most one watch in ten (and one): with many waiters on a busy
// lock it is never still, but a count that moved a lot says the wchc in between
// describes another moment.
func NewServer(id int, watches []Watch, mntr, again map[string]int64) Server {
	s := Server{ID: id, ChildWatches: -1, Packets: again[PacketsReceived], Reads: again[ZLCReads]}
	before, ok1 := mntr[WatchCount]
	after, ok2 := again[WatchCount]
	if ok1 && ok2 && abs(after-before) <= 1+min(before, after)/10 {
		s.ChildWatches = max(0, int(min(before, after))-len(watches))
	}
	return s
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// NewSample builds a sample at t from every answering server's wchc watches and its
// part, keeping only the data watches on lock or under it.
func NewSample(t int64, lock string, watches []Watch, servers []Server, unanswered int) Sample {
	s := Sample{T: t, Lock: lock, DataWatches: map[string][]string{}, Servers: servers, Unanswered: unanswered}
	for _, w := range watches {
		if !under(w.Path, lock) {
			continue
		}
		if !slices.Contains(s.DataWatches[w.Session], w.Path) {
			s.DataWatches[w.Session] = append(s.DataWatches[w.Session], w.Path)
		}
	}
	for _, paths := range s.DataWatches {
		sort.Strings(paths)
	}
	return s
}

// under reports whether path is lock or a node below it.
func under(path, lock string) bool {
	return path == lock || strings.HasPrefix(path, lock+"/")
}

// Classified is one sample read as waiters.
type Classified struct {
	// Known is false when a server's child watches were not known: the sample does
	// not count.
	Known bool
	// Waiters is the number of waiting sessions: those with a data watch on a node
	// under the lock node, plus one per child watch.
	Waiters int
	// OnLock is how many of them watch the lock node's children.
	OnLock int
	// OnOneSibling is how many watch exactly one node under the lock node: the
	// predecessor-watch recipe.
	OnOneSibling int
	// Watches is the number of watches summed over the waiters.
	Watches int
}

// Contended says whether the sample counts and saw two waiters or more at once: the
// samples a herd verdict is drawn from.
func (c Classified) Contended() bool { return c.Known && c.Waiters >= 2 }

// Classify reads a sample. ZooKeeper 3.8 lists data watches by session and path
// (wchc) but child watches only as a count (ParseWchc), so:
//
//   - each child watch counts as one waiter watching the lock node's children (the
//     herd). A run's ensemble serves that run alone and the harness sets no watch,
//     so every child watch is a worker's; a lock recipe lists the children of its
//     lock node and of nothing else, so a child watch is on the lock node.
//   - each session with a data watch (getData, exists) on a node under the lock node
//     is a waiter watching that node: the predecessor, for a recipe without the
//     herd. One that watches more than one (an exists watch left on a predecessor
//     that was gone already stays until that path is created again) is a waiter, but
//     not on one sibling. A data watch on the lock node itself (exists) fires only
//     when the lock node is deleted: it wakes nobody on a release, and is not the
//     herd.
//
// A session that has both a child watch and data watches is counted twice, and a
// holder that still has the child watch it set while it queued (the herd recipe's
// watch stays until the next change of the queue) counts as a waiter until then.
func Classify(s Sample) Classified {
	c := Classified{Known: true}
	for _, srv := range s.Servers {
		if srv.ChildWatches < 0 {
			c.Known = false
			continue
		}
		c.OnLock += srv.ChildWatches
	}
	c.Waiters, c.Watches = c.OnLock, c.OnLock
	for _, paths := range s.DataWatches {
		c.Waiters++
		c.Watches += len(paths)
		if len(paths) == 1 && paths[0] != s.Lock {
			c.OnOneSibling++
		}
	}
	return c
}
