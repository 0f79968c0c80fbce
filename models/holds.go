package models

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/zlockcheck/zlockcheck/histories"
)

// hold is the certain part of one hold: from its acquire's ok (start) to its
// release's invoke (end), or forever. Under reentrant, acq is the outermost
// acquire and rel the release that may have ended the whole hold.
type hold struct {
	acq, rel   int32 // calls; rel is -1 when never released
	start, end int64 // end is never when never released
	proc       int
	write      bool
	maxDepth   int // reentrant: the deepest nesting reached (1 if none)
	endDepth   int // reentrant: the depth when rel was invoked
}

// event kinds of the sweep; at equal times ends sort before starts, so holds
// that only touch do not overlap.
const (
	evEndRead uint8 = iota
	evEndWrite
	evStartRead
	evStartWrite
)

type event struct {
	t    int64
	kind uint8
}

// checkHolds runs the holds checker on key k.
func checkHolds(p *parsed, k int32, cfg Config) KeyResult {
	kr := KeyResult{Key: p.keys[k], Verdict: Valid, Checker: CheckerHolds, Ops: p.lines[k], FirstViolation: -1}
	ids := p.byKey[k]
	holds := make([]hold, 0, len(ids)/2)
	open := map[int][]int32{} // process -> its open holds, most recent last
	depth := map[int]int{}    // reentrant: process -> the depth of its open hold
	reentrant := cfg.Kind == Reentrant
	bad := int32(-1) // the earliest release that completed ok without a hold
	for _, ci := range ids {
		c := &p.calls[ci]
		switch c.f {
		case fnAcquire:
			if c.out != outOK {
				break
			}
			if st := open[c.proc]; reentrant && len(st) > 0 {
				// Nested: the hold goes on, one level deeper.
				depth[c.proc]++
				hd := &holds[st[len(st)-1]]
				hd.maxDepth = max(hd.maxDepth, depth[c.proc])
				break
			}
			depth[c.proc] = 1
			open[c.proc] = append(open[c.proc], int32(len(holds)))
			holds = append(holds, hold{acq: ci, rel: -1, start: c.retT, end: never, proc: c.proc, write: c.write, maxDepth: 1})
		case fnRelease:
			if st := open[c.proc]; len(st) > 0 {
				if reentrant && c.out == outOK && !c.lost && depth[c.proc] > 1 {
					// An inner release: the hold goes on, one level up.
					depth[c.proc]--
					break
				}
				// The release that ends the hold, or (failed, lost,
				// crashed or pending) may end all of it at its invoke.
				hi := st[len(st)-1]
				open[c.proc] = st[:len(st)-1]
				holds[hi].rel = ci
				holds[hi].end = c.callT
				holds[hi].endDepth = depth[c.proc]
				depth[c.proc] = 0
			} else if c.out == outOK && !c.lost {
				if bad < 0 || c.retT < p.calls[bad].retT {
					bad = ci
				}
			}
		}
	}

	vt, ok := sweep(holds, cfg)
	switch {
	case ok && bad < 0:
		return kr
	case !ok && (bad < 0 || vt <= p.calls[bad].retT):
		explainOverlap(p, &kr, holds, vt, cfg)
	default:
		explainBadRelease(p, &kr, holds, bad)
	}
	kr.Verdict = Invalid
	return kr
}

// sweep returns the first instant at which the certain holds break cfg's
// lock rule, and false; or true when they never do.
func sweep(holds []hold, cfg Config) (int64, bool) {
	evs := make([]event, 0, 2*len(holds))
	for i := range holds {
		hd := &holds[i]
		if hd.end <= hd.start {
			continue // an empty hold overlaps nothing
		}
		var w uint8
		if hd.write {
			w = 1
		}
		evs = append(evs, event{hd.start, evStartRead + w})
		if hd.end != never {
			evs = append(evs, event{hd.end, evEndRead + w})
		}
	}
	slices.SortFunc(evs, func(a, b event) int {
		if a.t != b.t {
			if a.t < b.t {
				return -1
			}
			return 1
		}
		return int(a.kind) - int(b.kind)
	})
	var readers, writers int
	for _, e := range evs {
		switch e.kind {
		case evEndRead:
			readers--
		case evEndWrite:
			writers--
		case evStartRead:
			readers++
		case evStartWrite:
			writers++
		}
		if e.kind < evStartRead {
			continue
		}
		if violates(readers, writers, cfg) {
			return e.t, false
		}
	}
	return -1, true
}

func violates(readers, writers int, cfg Config) bool {
	switch cfg.Kind {
	case RWLock:
		return writers > 0 && readers+writers > 1
	case Semaphore:
		return readers+writers > cfg.Permits
	}
	return readers+writers > 1
}

// capacity is how many holds the kind allows at once, in words.
func capacity(cfg Config) string {
	switch cfg.Kind {
	case RWLock:
		return "a rwlock allows one writer or any number of readers"
	case Semaphore:
		return fmt.Sprintf("a semaphore with %d permit%s allows %d", cfg.Permits, plural(cfg.Permits), cfg.Permits)
	case Reentrant:
		return "a re-entrant mutex allows 1 (who may nest)"
	}
	return "a mutex allows 1"
}

// explainOverlap fills kr with the holds that break the rule at vt.
func explainOverlap(p *parsed, kr *KeyResult, holds []hold, vt int64, cfg Config) {
	var active []int
	for i := range holds {
		if hd := &holds[i]; hd.start <= vt && vt < hd.end && hd.start < hd.end {
			active = append(active, i)
		}
	}
	sort.SliceStable(active, func(i, j int) bool { return holds[active[i]].start < holds[active[j]].start })
	// The smallest set of active holds that breaks the rule: the one that
	// started at vt and as few others as needed.
	newest := -1
	for _, i := range active {
		if holds[i].start == vt && (newest < 0 || holds[i].write) {
			newest = i
		}
	}
	chosen := []int{newest}
	need := 1
	if cfg.Kind == Semaphore {
		need = cfg.Permits
	}
	for j := len(active) - 1; j >= 0 && len(chosen) <= need; j-- {
		i := active[j]
		if i == newest {
			continue
		}
		if cfg.Kind == RWLock && !holds[newest].write && !holds[i].write {
			continue // a reader conflicts only with a writer
		}
		chosen = append(chosen, i)
	}
	sort.Slice(chosen, func(a, b int) bool { return holds[chosen[a]].start < holds[chosen[b]].start })

	var parts []string
	sameProc := true
	for n, i := range chosen {
		parts = append(parts, describeHold(p, &holds[i], n == 0, cfg.Kind))
		sameProc = sameProc && holds[i].proc == holds[chosen[0]].proc
	}
	var what string
	switch {
	case cfg.Kind == RWLock:
		what = fmt.Sprintf("at %s a write hold overlapped another hold (%d holds at once: %d write, %d read); %s",
			fmtTime(vt), len(active), countWrites(holds, active), len(active)-countWrites(holds, active), capacity(cfg))
	case sameProc:
		what = fmt.Sprintf("at %s process %d acquired %s again while still holding it: %d holds at once, %s",
			fmtTime(vt), holds[chosen[0]].proc, keyName(kr.Key), len(active), capacity(cfg))
	default:
		what = fmt.Sprintf("at %s %d holders at once, %s", fmtTime(vt), len(active), capacity(cfg))
	}
	kr.Witness = strings.Join(parts, "; ") + ": " + what
	kr.FirstViolation = vt

	var calls []int32
	for _, i := range chosen {
		calls = append(calls, holds[i].acq)
		if holds[i].rel >= 0 {
			calls = append(calls, holds[i].rel)
		}
	}
	kr.Window = windowOps(p, kr.Key, holds, calls, vt)
}

func countWrites(holds []hold, idx []int) int {
	n := 0
	for _, i := range idx {
		if holds[i].write {
			n++
		}
	}
	return n
}

// explainBadRelease fills kr for a release that completed ok without a hold.
func explainBadRelease(p *parsed, kr *KeyResult, holds []hold, bad int32) {
	c := &p.calls[bad]
	h := p.h
	var prev *hold
	for i := range holds {
		if hd := &holds[i]; hd.proc == c.proc && hd.rel >= 0 && hd.rel < bad {
			if prev == nil || hd.rel > prev.rel {
				prev = hd
			}
		}
	}
	w := fmt.Sprintf("process %d released %s at index %d (invoked at %s, ok at index %d at %s) but did not hold it",
		c.proc, keyName(kr.Key), h[c.inv].Index, fmtTime(c.callT), h[c.comp].Index, fmtTime(c.retT))
	calls := []int32{bad}
	if prev != nil {
		w += fmt.Sprintf(": its last hold ended with the release at index %d (invoked at %s)",
			h[p.calls[prev.rel].inv].Index, fmtTime(prev.end))
		calls = append(calls, prev.acq, prev.rel)
	} else {
		w += ": it never acquired it"
	}
	kr.Witness = w
	kr.FirstViolation = c.retT
	kr.Window = windowOps(p, kr.Key, holds, calls, c.retT)
}

// describeHold renders one hold for a witness.
func describeHold(p *parsed, hd *hold, first bool, kind Kind) string {
	h := p.h
	a := &p.calls[hd.acq]
	mode := ""
	switch {
	case kind == RWLock && hd.write:
		mode = "for writing "
	case kind == RWLock:
		mode = "for reading "
	case kind == Reentrant && hd.maxDepth > 1:
		mode = fmt.Sprintf("(nested %d deep) ", hd.maxDepth)
	}
	subject := fmt.Sprintf("process %d held %s %s", hd.proc, keyName(h[a.inv].Key), mode)
	if !first {
		subject = fmt.Sprintf("process %d held it %s", hd.proc, mode)
	}
	s := fmt.Sprintf("%sfrom index %d (acquire invoked at %s, ok at index %d at %s)",
		subject, h[a.inv].Index, fmtTime(a.callT), h[a.comp].Index, fmtTime(a.retT))
	if hd.rel < 0 {
		return s + " and never released it"
	}
	r := &p.calls[hd.rel]
	var how string
	switch {
	case r.lost && r.out == outOK:
		how = "recorded as lost"
	case r.out == outOK:
		how = "ok"
	case r.out == outFail:
		how = "failed"
	case r.out == outInfo:
		how = "outcome unknown"
	default:
		how = "never completed"
	}
	if kind == Reentrant && hd.endDepth > 1 {
		how += fmt.Sprintf(" at depth %d, which ends the whole hold", hd.endDepth)
		if r.out == outInfo || r.out == outPending {
			how = strings.Replace(how, "which ends", "which may end", 1)
		}
	}
	return s + fmt.Sprintf(" to index %d (release invoked at %s, %s)", h[r.inv].Index, fmtTime(r.callT), how)
}

// windowOps returns the ops of the given calls, each widened to its whole
// hold, plus those of the calls of holds under way at instant t: an acquire
// that was yet to complete ok, or a release (widened to its acquire). Failed
// and crashed acquires and releases without a hold have no effect and are
// left out. The ops come in history order.
func windowOps(p *parsed, key string, holds []hold, calls []int32, t int64) []histories.Op {
	k := int32(-1)
	for i, name := range p.keys {
		if name == key {
			k = int32(i)
		}
	}
	holdOf := map[int32]int{}
	for i := range holds {
		holdOf[holds[i].acq] = i
		if holds[i].rel >= 0 {
			holdOf[holds[i].rel] = i
		}
	}
	set := map[int32]bool{}
	for _, ci := range calls {
		set[ci] = true
		if hi, ok := holdOf[ci]; ok {
			set[holds[hi].acq] = true
			if holds[hi].rel >= 0 {
				set[holds[hi].rel] = true
			}
		}
	}
	for _, ci := range p.byKey[k] {
		c := &p.calls[ci]
		hi, inHold := holdOf[ci]
		if !inHold || c.out == outPending || c.callT > t || t > c.retT {
			continue
		}
		set[ci] = true
		set[holds[hi].acq] = true
	}
	var pos []int32
	for ci := range set {
		c := &p.calls[ci]
		pos = append(pos, c.inv)
		if c.comp >= 0 {
			pos = append(pos, c.comp)
		}
	}
	slices.Sort(pos)
	ops := make([]histories.Op, len(pos))
	for i, at := range pos {
		ops[i] = p.h[at]
	}
	return ops
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
