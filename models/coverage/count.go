package coverage

import (
	"sort"

	"github.com/zlockcheck/zlockcheck/histories"
)

// tally adds to the rows the table has (a row left out for the kind is skipped).
type tally map[string]*Row

func (t tally) add(id, by string, n int) {
	r, ok := t[id]
	if !ok || n == 0 {
		return
	}
	r.Count += n
	if by != "" {
		if r.By == nil {
			r.By = map[string]int{}
		}
		r.By[by] += n
	}
}

// count fills the rows from the scanned history.
func (s *scanned) count(rows tally, opt Options) {
	byKey, byProcKey, all := s.holdSpans()
	s.countCalls(rows, byKey, byProcKey)
	s.countEdges(rows)
	s.countFaults(rows, all)
	s.countHolds(rows, opt)
	s.countQueue(rows, opt)
	rows.add(RowOrphans, orphanByWatch, s.orphanOps)
	rows.add(RowOrphans, orphanByFinalListed, s.orphanList)
}

type procKey struct {
	proc int
	key  string
}

// holdSpans indexes the holds by key, by process and key, and all together.
func (s *scanned) holdSpans() (map[string]*spans, map[procKey]*spans, *spans) {
	byKey := map[string]*spans{}
	byProcKey := map[procKey]*spans{}
	all := newSpans(len(s.holds))
	for _, hd := range s.holds {
		if byKey[hd.key] == nil {
			byKey[hd.key] = newSpans(0)
		}
		pk := procKey{hd.proc, hd.key}
		if byProcKey[pk] == nil {
			byProcKey[pk] = newSpans(0)
		}
		byKey[hd.key].add(hd.start, hd.end)
		byProcKey[pk].add(hd.start, hd.end)
		all.add(hd.start, hd.end)
	}
	for _, sp := range byKey {
		sp.sort()
	}
	for _, sp := range byProcKey {
		sp.sort()
	}
	all.sort()
	return byKey, byProcKey, all
}

// countCalls counts the rows of single calls: timeouts while queued, unknown
// outcomes, lost locks, and waiters whose predecessor gave up.
func (s *scanned) countCalls(rows tally, byKey map[string]*spans, byProcKey map[procKey]*spans) {
	gaveUp := map[string][]call{} // acquires that failed or ended unknown, by key
	for _, c := range s.calls {
		if c.f == fAcquire && !c.nested && (c.out == histories.Fail || c.out == histories.Info) {
			gaveUp[c.key] = append(gaveUp[c.key], c)
		}
	}
	waits := map[string]*spans{} // first-level acquires, by key
	for _, c := range s.calls {
		if c.f == fAcquire && !c.nested {
			if waits[c.key] == nil {
				waits[c.key] = newSpans(0)
			}
			waits[c.key].add(c.start, c.end)
		}
	}
	for _, sp := range waits {
		sp.sort()
	}
	for _, g := range gaveUp {
		sort.Slice(g, func(i, j int) bool { return g[i].end < g[j].end })
	}
	for _, c := range s.calls {
		switch {
		case c.f == fAcquire && c.out == histories.Fail && !c.nested && c.end > c.start:
			// Queued: another process held the key while c waited, or was waiting
			// already when c began (c itself is one of those covering c.start).
			holders := byKey[c.key].meeting(c.start, c.end) - byProcKey[procKey{c.proc, c.key}].meeting(c.start, c.end)
			if holders > 0 || waits[c.key].covering(c.start) > 1 {
				rows.add(RowTimedOutQueued, "", 1)
			}
		case c.f == fAcquire && c.out == histories.Info:
			rows.add(RowAcquireInfo, "", 1)
		case c.f == fRelease && c.lost:
			rows.add(RowLost, "", 1)
		case c.f == fRelease && c.out == histories.Info:
			rows.add(RowReleaseInfo, "", 1)
		}
		if c.f == fAcquire && !c.nested && predecessorGaveUp(c, gaveUp[c.key]) {
			rows.add(RowPredecessorGone, "", 1)
		}
	}
}

// predecessorGaveUp reports whether an acquire of another process, invoked before c,
// failed or ended unknown while c waited. (gaveUp is sorted by end.)
func predecessorGaveUp(c call, gaveUp []call) bool {
	i := sort.Search(len(gaveUp), func(i int) bool { return gaveUp[i].end > c.start })
	for ; i < len(gaveUp) && gaveUp[i].end < c.end; i++ {
		if g := gaveUp[i]; g.start < c.start && g.proc != c.proc {
			return true
		}
	}
	return false
}

// countFaults counts client faults by their target's state when the fault landed,
// and as releasing, too, when the target sent a release while the fault was in force
// (a delete lost mid-release needs only that; a lost event's release is no release
// sent: a holder cut off mid-hold that reports lost is a fault on a holder); and
// server faults that started while someone held the lock (a partition that cut off an
// observer apart from the others).
func (s *scanned) countFaults(rows tally, all *spans) {
	for _, f := range s.faults {
		if f.target < 0 {
			if all.covering(f.t) > 0 {
				by := f.class
				if f.observer {
					by += " of an observer"
				}
				rows.add(RowServerFaultHeld, by, 1)
			}
			continue
		}
		state := s.stateAt(f.target, f.t)
		row := map[string]string{
			stateHolding: RowFaultHolding, stateAcquiring: RowFaultAcquiring,
			stateReleasing: RowFaultReleasing, stateIdle: RowFaultIdle,
		}[state]
		rows.add(row, f.class, 1)
		if state != stateReleasing && s.releasedDuring(f.target, f.t, f.end) {
			rows.add(RowFaultReleasing, f.class, 1)
		}
	}
}

// releasedDuring reports whether process p sent a release in [from, to) (not a
// lost event's).
func (s *scanned) releasedDuring(p int, from, to int64) bool {
	for _, i := range s.procCalls[p] {
		if c := s.calls[i]; c.f == fRelease && !c.lost && from <= c.start && c.start < to {
			return true
		}
	}
	return false
}

// stateAt says where process p stood in its lock cycle at time t: releasing (its
// release in flight), holding, acquiring (its first acquire in flight) or idle
// (between ops, before its first or after its last).
func (s *scanned) stateAt(p int, t int64) string {
	inFlight := ""
	for _, i := range s.procCalls[p] {
		if c := s.calls[i]; c.start <= t && t < c.end {
			inFlight = c.f
		}
	}
	if inFlight == fRelease {
		return stateReleasing
	}
	for _, i := range s.procHolds[p] {
		if hd := s.holds[i]; hd.start <= t && t < hd.end {
			return stateHolding
		}
	}
	if inFlight == fAcquire {
		return stateAcquiring
	}
	return stateIdle
}

// countHolds counts long holds and grants to another after a hold ended by a lost or
// unknown release.
func (s *scanned) countHolds(rows tally, opt Options) {
	grants := map[string][]grant{}
	for _, c := range s.calls {
		if c.f == fAcquire && c.out == histories.OK && !c.nested {
			grants[c.key] = append(grants[c.key], grant{proc: c.proc, t: c.end})
		}
	}
	for _, g := range grants {
		sort.Slice(g, func(i, j int) bool { return g[i].t < g[j].t })
	}
	for _, hd := range s.holds {
		end := min(hd.end, s.lastT)
		if end-hd.start > opt.SessionTimeout.Nanoseconds() {
			rows.add(RowLongHold, "", 1)
		}
		if hd.ended == "" {
			continue
		}
		g := grants[hd.key]
		for i := sort.Search(len(g), func(i int) bool { return g[i].t > hd.start }); i < len(g); i++ {
			if g[i].proc != hd.proc {
				rows.add(RowGrantAfterLoss, hd.ended, 1)
				break
			}
		}
	}
}

// edge is a change on one key's queue: a hold or a first-level acquire beginning or
// ending.
type edge struct {
	t     int64
	delta int
	hold  bool
	read  bool
}

// countQueue sweeps each key's holds and waits: the most waiters behind a holder,
// grants that filled a semaphore, read grants among readers, nested grants.
func (s *scanned) countQueue(rows tally, opt Options) {
	edges := map[string][]edge{}
	for _, hd := range s.holds {
		edges[hd.key] = append(edges[hd.key], edge{t: hd.start, delta: 1, hold: true, read: hd.read}, edge{t: hd.end, delta: -1, hold: true, read: hd.read})
	}
	for _, c := range s.calls {
		if c.f == fAcquire && c.nested && c.out == histories.OK {
			rows.add(RowNested, "", 1)
		}
		if c.f == fAcquire && !c.nested {
			edges[c.key] = append(edges[c.key], edge{t: c.start, delta: 1}, edge{t: c.end, delta: -1})
		}
	}
	most := 0
	for _, es := range edges {
		// Ends before starts at one moment: an acquire's ok ends its wait as its hold begins.
		sort.Slice(es, func(i, j int) bool {
			if es[i].t != es[j].t {
				return es[i].t < es[j].t
			}
			return es[i].delta < es[j].delta
		})
		holders, readers, waiters := 0, 0, 0
		for _, e := range es {
			switch {
			case !e.hold:
				waiters += e.delta
			case e.delta > 0:
				if e.read && readers > 0 {
					rows.add(RowReadersTogether, "", 1)
				}
				holders++
				if e.read {
					readers++
				}
				if holders >= opt.Permits {
					rows.add(RowSemaphoreFull, "", 1)
				}
			default:
				holders--
				if e.read {
					readers--
				}
			}
			if holders > 0 {
				most = max(most, waiters)
			}
		}
	}
	rows.add(RowContention, "", most)
}

func sortedKeys(m map[string]int) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
