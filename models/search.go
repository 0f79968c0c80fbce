package models

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

// checkPorcupine checks key k with porcupine alone.
func checkPorcupine(p *parsed, k int32, cfg Config) KeyResult {
	kr := KeyResult{Key: p.keys[k], Verdict: Valid, Checker: CheckerPorcupine, Ops: p.lines[k], FirstViolation: -1}
	m := newLockModel(cfg.Kind, cfg.Permits)
	pops := toPops(p, k, cfg.Kind)
	all := window(p, pops, math.MinInt64, math.MaxInt64, false)
	switch porcupine.CheckOperationsTimeout(m.porcupineModel(initFree), all, cfg.Timeout) {
	case porcupine.Ok:
		return kr
	case porcupine.Unknown:
		kr.Verdict = Unknown
		kr.Witness = fmt.Sprintf("porcupine found no linearization and no violation of %s within %v (%d operations)",
			keyName(kr.Key), cfg.Timeout, len(all))
		return kr
	}
	kr.Verdict = Invalid
	// Finding and explaining a short window share a second budget.
	deadline := time.Now().Add(cfg.Timeout)
	w := shrink(p, pops, m, deadline)
	kr.FirstViolation = w.t
	if w.t == math.MaxInt64 {
		kr.FirstViolation = -1
	}
	kr.Window = w.ops(p, pops)
	kr.Witness = explainWindow(p, kr.Key, m, w, pops, deadline)
	return kr
}

// win is a window of a key's history: the pops called by t and not returned
// before s; relaxed when the lock may be in any state at s and the ops
// called before s may or may not have taken effect.
type win struct {
	s, t  int64
	relax bool
}

func (w win) porcupineOps(p *parsed, pops []pop) []porcupine.Operation {
	return window(p, pops, w.s, w.t, w.relax)
}

// ops returns the history ops of the window: the invokes of its calls and
// the completions recorded by t.
func (w win) ops(p *parsed, pops []pop) []histories.Op {
	var pos []int32
	for _, o := range pops {
		if o.callT > w.t || o.retT < w.s {
			continue
		}
		c := &p.calls[o.ci]
		pos = append(pos, c.inv)
		if c.comp >= 0 && c.retT <= w.t {
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

// shrink searches, until deadline, for a short window of a non-linearizable
// history that is not linearizable either: first the shortest prefix, then
// the latest start. Either search is monotone: a window that is not
// linearizable stays so when it is widened.
func shrink(p *parsed, pops []pop, m lockModel, deadline time.Time) win {
	illegal := func(w win) bool {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		init := initFree
		if w.relax {
			init = initAny
		}
		return porcupine.CheckOperationsTimeout(m.porcupineModel(init), w.porcupineOps(p, pops), left) == porcupine.Illegal
	}
	var rets []int64
	for _, o := range pops {
		if o.retT != never {
			rets = append(rets, o.retT)
		}
	}
	slices.Sort(rets)
	rets = slices.Compact(rets)
	best := win{s: math.MinInt64, t: math.MaxInt64}
	if len(rets) == 0 {
		return best
	}
	// The whole history is not linearizable, and neither is its prefix up to
	// the last return: what follows can only be ops that need not happen.
	lo, hi := 0, len(rets)-1
	for lo < hi {
		mid := (lo + hi) / 2
		if illegal(win{s: math.MinInt64, t: rets[mid]}) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	best.t = rets[hi]
	if m.any == nil {
		return best
	}
	// Starts: the beginning of the history, or the return of an op (the
	// window then keeps the ops that return at or after it).
	starts := []int64{math.MinInt64}
	for _, r := range rets {
		if r <= best.t {
			starts = append(starts, r)
		}
	}
	lo, hi = 0, len(starts)-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if illegal(win{s: starts[mid], t: best.t, relax: true}) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	if lo > 0 {
		best.s, best.relax = starts[lo], true
	}
	return best
}

// explainWindow describes why window w cannot be linearized.
func explainWindow(p *parsed, key string, m lockModel, w win, pops []pop, deadline time.Time) string {
	ops := w.porcupineOps(p, pops)
	var b strings.Builder
	fmt.Fprintf(&b, "no linearization of %s under %s", keyName(key), modelName(m.kind))
	for _, o := range pops {
		if o.retT == w.t {
			c := &p.calls[o.ci]
			fmt.Fprintf(&b, " once %s by process %d completes %s at index %d (%s)",
				p.h[c.inv].F, c.proc, p.h[c.comp].Type, p.h[c.comp].Index, fmtTime(w.t))
			break
		}
	}
	if len(ops) > 0 {
		fmt.Fprintf(&b, "; the shortest failing window found has %d operation%s from index %d to index %d",
			len(ops), plural(len(ops)), ops[0].Metadata.(pMeta).inv, lastIndex(ops))
		if w.relax {
			fmt.Fprintf(&b, " (starting at %s in any lock state; ops already under way then may or may not have taken effect)", fmtTime(w.s))
		}
	}
	left := time.Until(deadline)
	if left <= 0 || len(ops) == 0 {
		return b.String()
	}
	init := initFree
	if w.relax {
		init = initAny
	}
	model := m.porcupineModel(init)
	longest, state, next, ok := stuck(model, ops, left, describeOp)
	if !ok {
		return b.String()
	}
	fmt.Fprintf(&b, ": the longest linearizable part has %d of them and leaves the lock %s, where none of the operations that could come next can: %s",
		longest, model.DescribeState(state), strings.Join(next, ", "))
	return b.String()
}

// stuck runs porcupine on ops and, when they cannot be linearized, says where the
// search got stuck: the length of the longest linearizable prefix, the model state it
// leaves, and (at most four of) the operations that could have come next but cannot.
// ok is false when porcupine found no violation within left.
func stuck(model porcupine.Model, ops []porcupine.Operation, left time.Duration, describe func(in, out any) string) (longest int, state any, next []string, ok bool) {
	res, info := porcupine.CheckOperationsVerbose(model, ops, left)
	if res != porcupine.Illegal {
		return 0, nil, nil, false
	}
	parts := info.PartialLinearizationsOperations()
	if len(parts) == 0 {
		return 0, nil, nil, false
	}
	var seq []porcupine.Operation
	for _, p := range parts[0] {
		if len(p) > len(seq) {
			seq = p
		}
	}
	state = model.Init()
	done := map[pMeta]bool{}
	for _, op := range seq {
		_, state = model.Step(state, op.Input, op.Output)
		done[op.Metadata.(pMeta)] = true
	}
	// The ops that could be linearized next: those not done whose call is not after
	// the earliest return among them.
	first := int64(math.MaxInt64)
	for _, op := range ops {
		if !done[op.Metadata.(pMeta)] && op.Return < first {
			first = op.Return
		}
	}
	for _, op := range ops {
		if done[op.Metadata.(pMeta)] || op.Call > first {
			continue
		}
		if len(next) == 4 {
			next = append(next, "...")
			break
		}
		next = append(next, fmt.Sprintf("%s (%s)", describe(op.Input, op.Output), model.DescribeOperationMetadata(op.Metadata)))
	}
	return len(seq), state, next, true
}

func lastIndex(ops []porcupine.Operation) int64 {
	var last int64
	for _, op := range ops {
		md := op.Metadata.(pMeta)
		last = max(last, md.inv, md.comp)
	}
	return last
}

func modelName(k Kind) string {
	switch k {
	case KnossosMutex:
		return "Knossos's owner-less mutex"
	case Semaphore:
		return "an owner-aware semaphore"
	case RWLock:
		return "an owner-aware rwlock"
	case Reentrant:
		return "an owner-aware re-entrant mutex"
	}
	return "an owner-aware mutex"
}
