package models

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

// rIn is the input of a register operation for porcupine.
type rIn struct {
	write bool
	val   int64 // a write's value
	proc  int
	part  int  // the partition (key) it belongs to, for visualizations
	start bool // the synthetic op that starts a visualized window
	zero  bool // for start: the register starts at 0, else at any value
}

// rOut is the observed output of a register operation.
type rOut struct {
	val     int64 // an ok read's result
	unknown bool  // a write whose outcome is unknown
}

// regState is a register's value, or any value (the start of a window taken
// from the middle of a history, before its first read or write).
type regState struct {
	v   int64
	any bool
}

// regStep returns every state the register op can lead to from s: none if
// it cannot happen in s.
func regStep(s any, in rIn, out rOut) []any {
	if in.start {
		if _, ok := s.(unset); !ok {
			return nil
		}
		if in.zero {
			return []any{regState{}}
		}
		return []any{regState{any: true}}
	}
	st, ok := s.(regState)
	if !ok {
		return nil
	}
	switch {
	case in.write && out.unknown:
		return []any{s, regState{v: in.val}}
	case in.write:
		return []any{regState{v: in.val}}
	case st.any:
		return []any{regState{v: out.val}}
	case st.v == out.val:
		return []any{s}
	}
	return nil
}

func regHash(s regState) uint64 {
	h := fnv.New64a()
	var b [9]byte
	for i := range 8 {
		b[i] = byte(uint64(s.v) >> (8 * i))
	}
	if s.any {
		b[8] = 1
	}
	h.Write(b[:])
	return h.Sum64()
}

func describeRegOp(in rIn, out rOut) string {
	switch {
	case in.start && in.zero:
		return "window starts: register = 0"
	case in.start:
		return "window starts: register holds any value"
	case in.write && out.unknown:
		return fmt.Sprintf("p%d write(%d) → ?", in.proc, in.val)
	case in.write:
		return fmt.Sprintf("p%d write(%d) → ok", in.proc, in.val)
	}
	return fmt.Sprintf("p%d read → %d", in.proc, out.val)
}

func describeRegState(s regState) string {
	if s.any {
		return "holding any value"
	}
	return fmt.Sprintf("at %d", s.v)
}

// describeRegStates renders a state of the register's porcupine model: the
// set of values the register may hold.
func describeRegStates(s any) string {
	sts, ok := s.([]any)
	if !ok {
		return fmt.Sprint(s)
	}
	var vs []string
	for _, st := range sts {
		if rs, ok := st.(regState); ok {
			vs = append(vs, describeRegState(rs))
		}
	}
	return strings.Join(vs, " or ")
}

// registerModel is the register's porcupine model, starting at 0, at any
// value (initAny), or unset, waiting for a synthetic start op.
func registerModel(init initState) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init: func() []any {
			switch init {
			case initAny:
				return []any{regState{any: true}}
			case initUnset:
				return []any{unset{}}
			}
			return []any{regState{}}
		},
		Step:  func(s, in, out any) []any { return regStep(s, in.(rIn), out.(rOut)) },
		Equal: func(a, b any) bool { return a == b },
		Hash: func(s any) uint64 {
			if st, ok := s.(regState); ok {
				return regHash(st)
			}
			return 0
		},
		DescribeOperation: func(in, out any) string { return describeRegOp(in.(rIn), out.(rOut)) },
		DescribeState: func(s any) string {
			if st, ok := s.(regState); ok {
				return describeRegState(st)
			}
			return "not started"
		},
		DescribeOperationMetadata: describeMeta,
	}
	return nm.ToModel()
}

func describeMeta(meta any) string {
	md, ok := meta.(pMeta)
	if !ok {
		return ""
	}
	if md.comp < 0 {
		return fmt.Sprintf("index %d", md.inv)
	}
	return fmt.Sprintf("index %d to %d", md.inv, md.comp)
}

// rop is a register call as a porcupine operation.
type rop struct {
	ci    int32
	callT int64
	retT  int64 // never for a write that may take effect at any time after callT
	in    rIn
	out   rOut
}

// regPops converts key k's reads and writes to porcupine operations: ok
// reads constrain the register; failed writes had no effect and are
// dropped; crashed and pending writes may take effect at any time after
// their call, or never; reads that did not complete ok say nothing.
func regPops(p *parsed, k int32) []rop {
	var ops []rop
	for _, ci := range p.byKey[k] {
		c := &p.calls[ci]
		o := rop{ci: ci, callT: c.callT, retT: c.retT, in: rIn{proc: c.proc, part: int(k)}}
		switch {
		case c.f == fnRead && c.out == outOK:
			o.out.val = c.val
		case c.f == fnWrite && c.out == outOK:
			o.in.write, o.in.val = true, c.val
		case c.f == fnWrite && c.out != outFail:
			o.in.write, o.in.val = true, c.val
			o.out.unknown, o.retT = true, never
		default:
			continue
		}
		ops = append(ops, o)
	}
	return ops
}

// regWindow returns the porcupine operations of the rops called by t: a
// write still under way at t becomes unknown, a read still under way says
// nothing and is left out.
func regWindow(p *parsed, rops []rop, t int64) []porcupine.Operation {
	var ops []porcupine.Operation
	clients := map[int]int{}
	for _, o := range rops {
		if o.callT > t {
			continue
		}
		ret, out := o.retT, o.out
		if ret > t {
			if !o.in.write {
				continue
			}
			ret, out = never, rOut{unknown: true}
		}
		cid, ok := clients[o.in.proc]
		if !ok {
			cid = len(clients)
			clients[o.in.proc] = cid
		}
		c := &p.calls[o.ci]
		md := pMeta{inv: p.h[c.inv].Index, comp: -1}
		if c.comp >= 0 && c.retT <= t {
			md.comp = p.h[c.comp].Index
		}
		ops = append(ops, porcupine.Operation{ClientId: cid, Input: o.in, Call: o.callT, Output: out, Return: ret, Metadata: md})
	}
	return ops
}

// finding is one violation found on a register key.
type finding struct {
	t        int64   // when the violation became certain
	text     string  // what happened, in terms of the harm
	calls    []int32 // the calls of its window
	final    bool    // the window includes the counter-final op
	fromZero bool    // the window starts from the register's initial 0
}

// checkRegister checks register key k: cheap scans for stale reads and lost
// updates first (each is a proof), the final value if the harness recorded
// one, and porcupine, within cfg.Timeout, when the scans find nothing.
func checkRegister(p *parsed, k int32, cfg Config) KeyResult {
	kr := KeyResult{Key: p.keys[k], Verdict: Valid, Ops: p.lines[k], FirstViolation: -1}
	hasOps := false
	for _, ci := range p.byKey[k] {
		if f := p.calls[ci].f; f == fnRead || f == fnWrite {
			hasOps = true
			break
		}
	}
	var checks []string
	if hasOps {
		checks = append(checks, CheckerRegister)
	}
	if p.final[k] >= 0 {
		checks = append(checks, CheckerFinalValue)
	}
	kr.Checker = strings.Join(checks, "+")

	var found []finding
	if hasOps {
		if f := staleReads(p, k); f != nil {
			found = append(found, *f)
		}
		if f := lostUpdates(p, k); f != nil {
			found = append(found, *f)
		}
	}
	if p.final[k] >= 0 {
		if f := finalCheck(p, k); f != nil {
			found = append(found, *f)
		}
	}
	if len(found) == 0 && hasOps {
		f, res := porcupineRegister(p, k, cfg)
		switch res {
		case porcupine.Unknown:
			kr.Verdict = Unknown
			kr.Witness = fmt.Sprintf("porcupine found no linearization and no violation of %s as a register within %v (%d operations)",
				keyName(kr.Key), cfg.Timeout, len(regPops(p, k)))
			return kr
		case porcupine.Illegal:
			found = append(found, *f)
		}
	}
	if len(found) == 0 {
		return kr
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].t < found[j].t })
	texts := make([]string, len(found))
	for i := range found {
		texts[i] = found[i].text
	}
	first := &found[0]
	kr.Verdict = Invalid
	kr.Witness = strings.Join(texts, "; ")
	kr.FirstViolation = first.t
	kr.Window = callOps(p, first.calls, first.final, k)
	kr.fromZero = first.fromZero
	return kr
}

// callOps returns the history ops of the calls (and of key k's
// counter-final op if final), in history order.
func callOps(p *parsed, calls []int32, final bool, k int32) []histories.Op {
	var pos []int32
	seen := map[int32]bool{}
	for _, ci := range calls {
		if seen[ci] {
			continue
		}
		seen[ci] = true
		c := &p.calls[ci]
		pos = append(pos, c.inv)
		if c.comp >= 0 {
			pos = append(pos, c.comp)
		}
	}
	if final && p.final[k] >= 0 {
		pos = append(pos, p.final[k])
	}
	slices.Sort(pos)
	ops := make([]histories.Op, len(pos))
	for i, at := range pos {
		ops[i] = p.h[at]
	}
	return ops
}

// callRef renders where a call is in the history: "index 10, ok at index 11
// at 5ms".
func callRef(p *parsed, ci int32) string {
	c := &p.calls[ci]
	h := p.h
	if c.comp < 0 {
		return fmt.Sprintf("index %d at %s, never completed", h[c.inv].Index, fmtTime(c.callT))
	}
	return fmt.Sprintf("index %d, %s at index %d at %s", h[c.inv].Index, h[c.comp].Type, h[c.comp].Index, fmtTime(c.retT))
}

func increments(n int64) string {
	if n == 1 {
		return "one increment"
	}
	return fmt.Sprintf("%d increments", n)
}

// staleReads finds the ok reads that no order of the writes explains, by
// two rules that each prove the register not linearizable:
//
//   - phantom read: a read of x != 0 with no write of x invoked by the time
//     the read returned;
//   - stale read: a read of x invoked after some ok write w of another
//     value had returned, where every write of x invoked by the time the
//     read returned had itself returned before w was invoked (and, for x ==
//     0, the initial value is such a write): the read comes after w, and
//     no write of x can come between them.
//
// It returns the earliest (by the read's return) with the number found.
func staleReads(p *parsed, k int32) *finding {
	var reads, okWrites []int32
	byVal := map[int64][]int32{} // non-failed writes by value
	for _, ci := range p.byKey[k] {
		c := &p.calls[ci]
		switch {
		case c.f == fnRead && c.out == outOK:
			reads = append(reads, ci)
		case c.f == fnWrite && c.out != outFail:
			byVal[c.val] = append(byVal[c.val], ci)
			if c.out == outOK {
				okWrites = append(okWrites, ci)
			}
		}
	}
	if len(reads) == 0 {
		return nil
	}
	ret := func(ci int32) int64 { // when a write certainly took effect, if ever
		if c := &p.calls[ci]; c.out == outOK {
			return c.retT
		}
		return never
	}
	// For each value: its writes by call time, and the running maximum of
	// their returns.
	prefMax := map[int64][]int64{}
	for v, ws := range byVal {
		sort.Slice(ws, func(i, j int) bool { return p.calls[ws[i]].callT < p.calls[ws[j]].callT })
		m := make([]int64, len(ws))
		for i, ci := range ws {
			m[i] = ret(ci)
			if i > 0 {
				m[i] = max(m[i], m[i-1])
			}
		}
		prefMax[v] = m
	}
	sort.Slice(okWrites, func(i, j int) bool { return p.calls[okWrites[i]].retT < p.calls[okWrites[j]].retT })
	sort.Slice(reads, func(i, j int) bool { return p.calls[reads[i]].callT < p.calls[reads[j]].callT })

	// Among the ok writes returned so far: best has the latest call; second
	// the latest call among those whose value differs from best's.
	best, second := int32(-1), int32(-1)
	add := func(ci int32) {
		c := &p.calls[ci]
		switch {
		case best < 0:
			best = ci
		case c.callT > p.calls[best].callT:
			if c.val != p.calls[best].val {
				second = best
			}
			best = ci
		case c.val != p.calls[best].val && (second < 0 || c.callT > p.calls[second].callT):
			second = ci
		}
	}
	var first *finding
	count := 0
	wi := 0
	for _, ri := range reads {
		r := &p.calls[ri]
		for wi < len(okWrites) && p.calls[okWrites[wi]].retT < r.callT {
			add(okWrites[wi])
			wi++
		}
		x := r.val
		ws := byVal[x]
		n := sort.Search(len(ws), func(i int) bool { return p.calls[ws[i]].callT > r.retT })
		var f *finding
		switch {
		case n == 0 && x != 0:
			f = &finding{t: r.retT, calls: []int32{ri}, fromZero: true,
				text: fmt.Sprintf("phantom read: process %d read %d (%s), a value no write had written by then (the register starts at 0)",
					r.proc, x, callRef(p, ri))}
		default:
			latest := int64(math.MinInt64) // the initial 0 returned before everything
			if n > 0 {
				latest = prefMax[x][n-1]
			}
			w := best
			if w >= 0 && p.calls[w].val == x {
				w = second
			}
			if w < 0 || latest >= p.calls[w].callT {
				continue
			}
			f = staleRead(p, k, ri, w, ws[:n])
		}
		count++
		if first == nil || f.t < first.t {
			first = f
		}
	}
	if first != nil && count > 1 {
		first.text += fmt.Sprintf(" (%d reads no order of the writes explains, in all)", count)
	}
	return first
}

// staleRead describes read ri, which cannot follow ok write wi, with xs the
// writes of the value it read; if its process then wrote ok, that write
// overwrote wi's value.
func staleRead(p *parsed, k int32, ri, wi int32, xs []int32) *finding {
	r, w := &p.calls[ri], &p.calls[wi]
	f := &finding{t: r.retT, calls: append([]int32{ri, wi}, xs...)}
	why := fmt.Sprintf("and nothing wrote %d after it", r.val)
	if len(xs) > 0 {
		why = fmt.Sprintf("and every write of %d had returned before that write was invoked", r.val)
	}
	f.text = fmt.Sprintf("stale read: process %d read %d (%s), but process %d's write of %d had returned before that read was invoked (%s), %s",
		r.proc, r.val, callRef(p, ri), w.proc, w.val, callRef(p, wi), why)
	// The reading process's next call on the key.
	ids := p.byKey[k]
	at := slices.Index(ids, ri)
	for _, ci := range ids[at+1:] {
		c := &p.calls[ci]
		if c.proc != r.proc {
			continue
		}
		if c.f == fnWrite && c.out == outOK {
			f.calls = append(f.calls, ci)
			f.text += fmt.Sprintf("; process %d then wrote %d (%s), overwriting process %d's %d",
				c.proc, c.val, callRef(p, ci), w.proc, w.val)
			if c.val == r.val+1 && w.val >= c.val {
				f.text += fmt.Sprintf(": at least %s lost", increments(w.val-c.val+1))
			}
		}
		break
	}
	return f
}

// lostUpdates finds acknowledged increments that read the same value, on a
// key whose every write is an increment (its process's previous op on the
// key is an ok read of the value minus one). Two ok increments that read
// the same value both wrote the same value: whichever came second
// overwrote the other's increment. The register alone allows that (both
// reads may precede both writes); the counter lost an increment.
func lostUpdates(p *parsed, k int32) *finding {
	readOf := map[int32]int32{} // write -> the read it incremented
	last := map[int]int32{}     // process -> its previous call on the key
	byVal := map[int64][]int32{}
	for _, ci := range p.byKey[k] {
		c := &p.calls[ci]
		prev, had := last[c.proc]
		last[c.proc] = ci
		if c.f != fnWrite {
			continue
		}
		if !had {
			return nil
		}
		r := &p.calls[prev]
		if r.f != fnRead || r.out != outOK || r.val != c.val-1 {
			return nil // not a counter: this write is not an increment
		}
		readOf[ci] = prev
		if c.out == outOK {
			byVal[c.val] = append(byVal[c.val], ci)
		}
	}
	var pair []int32
	lost := 0
	for _, ws := range byVal {
		if len(ws) < 2 {
			continue
		}
		lost += len(ws) - 1
		sort.Slice(ws, func(i, j int) bool { return p.calls[ws[i]].retT < p.calls[ws[j]].retT })
		if pair == nil || p.calls[ws[1]].retT < p.calls[pair[1]].retT {
			pair = ws[:2]
		}
	}
	if pair == nil {
		return nil
	}
	a, b := &p.calls[pair[0]], &p.calls[pair[1]]
	ra, rb := readOf[pair[0]], readOf[pair[1]]
	text := fmt.Sprintf("lost update: process %d read %d (%s) and wrote %d (%s), process %d read %d too (%s) and wrote %d (%s): one increment lost",
		a.proc, p.calls[ra].val, callRef(p, ra), a.val, callRef(p, pair[0]),
		b.proc, p.calls[rb].val, callRef(p, rb), b.val, callRef(p, pair[1]))
	if lost > 1 {
		text += fmt.Sprintf(" (%d acknowledged increments lost this way in all)", lost)
	}
	return &finding{t: b.retT, text: text, calls: []int32{ra, pair[0], rb, pair[1]}}
}

// finalCheck compares key k's final value, as the harness read it after the
// run, with its writes: each ok write wrote its read plus one, so without
// lost updates the final value is at least the number of ok writes and at
// most that plus the writes of unknown outcome.
func finalCheck(p *parsed, k int32) *finding {
	var ok, unknown int64
	lastOK := int32(-1)
	for _, ci := range p.byKey[k] {
		c := &p.calls[ci]
		if c.f != fnWrite {
			continue
		}
		switch c.out {
		case outOK:
			ok++
			if lastOK < 0 || c.retT > p.calls[lastOK].retT {
				lastOK = ci
			}
		case outInfo, outPending:
			unknown++
		}
	}
	fo := &p.h[p.final[k]]
	n := p.finalVal[k]
	f := &finding{t: fo.Time, final: true}
	switch {
	case n < ok:
		f.text = fmt.Sprintf("final value: %s ended at %d (op %d), but %d writes were acknowledged (ok), each adding one: %d acknowledged increment%s lost",
			keyName(p.keys[k]), n, fo.Index, ok, ok-n, plural(int(ok-n)))
	case n > ok+unknown:
		f.text = fmt.Sprintf("final value: %s ended at %d (op %d), more than its %d acknowledged writes plus %d of unknown outcome: %d increment%s no recorded write made (phantom writes)",
			keyName(p.keys[k]), n, fo.Index, ok, unknown, n-ok-unknown, plural(int(n-ok-unknown)))
	default:
		return nil
	}
	if lastOK >= 0 {
		// The last acknowledged write, and the read it incremented.
		f.calls = append(f.calls, lastOK)
		ids := p.byKey[k]
		at := slices.Index(ids, lastOK)
		for j := at - 1; j >= 0; j-- {
			if c := &p.calls[ids[j]]; c.proc == p.calls[lastOK].proc {
				if c.f == fnRead {
					f.calls = append(f.calls, ids[j])
				}
				break
			}
		}
	}
	return f
}

// porcupineRegister checks key k's reads and writes with porcupine, from
// the initial 0, within cfg.Timeout. When they are not linearizable it
// finds, within as much again, the shortest failing prefix and the read
// no order explains.
func porcupineRegister(p *parsed, k int32, cfg Config) (*finding, porcupine.CheckResult) {
	rops := regPops(p, k)
	m := registerModel(initFree)
	res := porcupine.CheckOperationsTimeout(m, regWindow(p, rops, math.MaxInt64), cfg.Timeout)
	if res != porcupine.Illegal {
		return nil, res
	}
	deadline := time.Now().Add(cfg.Timeout)
	illegal := func(t int64) bool {
		left := time.Until(deadline)
		return left > 0 && porcupine.CheckOperationsTimeout(m, regWindow(p, rops, t), left) == porcupine.Illegal
	}
	var rets []int64
	for _, o := range rops {
		if o.retT != never {
			rets = append(rets, o.retT)
		}
	}
	slices.Sort(rets)
	rets = slices.Compact(rets)
	t := int64(math.MaxInt64)
	if len(rets) > 0 {
		lo, hi := 0, len(rets)-1
		for lo < hi {
			mid := (lo + hi) / 2
			if illegal(rets[mid]) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		if illegal(rets[hi]) {
			t = rets[hi]
		}
	}
	f := &finding{t: t, fromZero: true}
	for _, o := range rops {
		if o.callT <= t {
			f.calls = append(f.calls, o.ci)
		}
	}
	if t == math.MaxInt64 {
		f.t = -1
		if len(rets) > 0 {
			f.t = rets[len(rets)-1]
		}
	}
	f.text = explainRegister(p, k, rops, t, m, deadline)
	return f, porcupine.Illegal
}

// explainRegister describes why the ops called by t cannot be linearized:
// the read that completes at t, and what the longest linearizable part
// leaves in the register.
func explainRegister(p *parsed, k int32, rops []rop, t int64, m porcupine.Model, deadline time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "no order of the reads and writes of %s", keyName(p.keys[k]))
	for _, o := range rops {
		if o.retT == t {
			c := &p.calls[o.ci]
			fmt.Fprintf(&b, " up to process %d's %s of %d (%s)", c.proc, p.h[c.inv].F, c.val, callRef(p, o.ci))
			break
		}
	}
	b.WriteString(" explains what the reads returned (the register starts at 0)")
	ops := regWindow(p, rops, t)
	left := time.Until(deadline)
	if left <= 0 || len(ops) == 0 {
		return b.String()
	}
	longest, state, next, ok := stuck(m, ops, left, m.DescribeOperation)
	if !ok {
		return b.String()
	}
	fmt.Fprintf(&b, "; the longest linearizable part has %d of the %d operations and leaves the register %s, where none of the operations that could come next can: %s",
		longest, len(ops), describeRegStates(state), strings.Join(next, ", "))
	return b.String()
}
