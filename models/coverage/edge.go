package coverage

import (
	"sort"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// edgeWindow is how close to a waiter's invoke or give-up its predecessor must leave
// for RowEdge: a few round trips, the width of the races that live there (a getChildren
// and the exists after it; a give-up and the next acquire).
const edgeWindow = int64(5 * time.Millisecond)

// maxEdgeWalk bounds the entries looked back past to find a predecessor still queued.
const maxEdgeWalk = 4096

// By values of RowEdge.
const (
	edgeAtInvoke = "at invoke"
	edgeAtGiveUp = "at give-up"
)

// queued is one first-level acquire's place in its key's queue: from its invoke until
// it left, leaving from leaveFrom (its release's invoke, or its give-up's completion)
// to leave (that release's completion; forever while it stays).
type queued struct {
	proc                    int
	start, leaveFrom, leave int64
}

// countEdges counts the waiters whose predecessor (the latest-invoked acquire of
// another process still queued) left within edgeWindow of their invoke, or, for an
// acquire that gave up, of its give-up.
func (s *scanned) countEdges(rows tally) {
	holdAt := map[procKey]map[int64]int{} // a hold by its process, key and start
	for i, hd := range s.holds {
		k := procKey{hd.proc, hd.key}
		if holdAt[k] == nil {
			holdAt[k] = map[int64]int{}
		}
		holdAt[k][hd.start] = i
	}
	queues := map[string][]queued{}
	var waits []call
	for _, c := range s.calls {
		if c.f != fAcquire || c.nested {
			continue
		}
		q := queued{proc: c.proc, start: c.start, leaveFrom: forever, leave: forever}
		switch c.out {
		case histories.OK:
			if i, ok := holdAt[procKey{c.proc, c.key}][c.end]; ok {
				q.leaveFrom, q.leave = s.holds[i].end, s.holds[i].released
			}
		case histories.Fail, histories.Info:
			q.leaveFrom, q.leave = c.end, c.end
		}
		queues[c.key] = append(queues[c.key], q)
		waits = append(waits, c)
	}
	for _, q := range queues {
		sort.SliceStable(q, func(i, j int) bool { return q[i].start < q[j].start })
	}
	for _, c := range waits {
		q := queues[c.key]
		if p, ok := predecessor(q, c.proc, c.start, c.start); ok && p.leaveFrom <= c.start+edgeWindow {
			rows.add(RowEdge, edgeAtInvoke, 1)
			continue
		}
		if c.out != histories.Fail {
			continue
		}
		if p, ok := predecessor(q, c.proc, c.start, c.end); ok && p.leaveFrom <= c.end+edgeWindow {
			rows.add(RowEdge, edgeAtGiveUp, 1)
		}
	}
}

// predecessor is the entry of q (sorted by start) that an acquire of proc invoked at
// before queued behind, as the queue stood at t: the latest invoked before it, of
// another process, still queued at t.
func predecessor(q []queued, proc int, before, t int64) (queued, bool) {
	i := sort.Search(len(q), func(i int) bool { return q[i].start >= before }) - 1
	for n := 0; i >= 0 && n < maxEdgeWalk; i, n = i-1, n+1 {
		if q[i].proc != proc && q[i].leave >= t {
			return q[i], true
		}
	}
	return queued{}, false
}
