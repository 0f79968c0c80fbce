package models

import (
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/anishathalye/porcupine"
)

// pIn is the input of a porcupine operation.
type pIn struct {
	f     fn
	proc  int
	write bool // a write acquire of a rwlock
	rw    bool // a rwlock acquire, read or write
	part  int  // the partition (key) it belongs to, for visualizations
	start bool // the synthetic op that starts a visualized window
}

// pOut is the observed output of a porcupine operation.
type pOut uint8

const (
	// pOK: the op took effect.
	pOK pOut = iota
	// pUnknown: the op took effect or did not.
	pUnknown
	// pFreed: a failed or lost release; it frees the lock if its process
	// holds it (under knossos-mutex: if anyone holds it; under reentrant:
	// every level of the hold) and does nothing otherwise.
	pFreed
	// pStartFree and pStartAny are the outputs of the synthetic first op of a
	// visualized window: the lock starts free, or in any state.
	pStartFree
	pStartAny
)

// pMeta is attached to porcupine operations to find them in the history.
type pMeta struct {
	inv, comp int64 // op indexes; comp is -1 for none
}

// noOwner is the owner of a free mutex or rwlock's writer slot.
const noOwner = math.MinInt

// unset is the state before the synthetic first op of a visualized window.
type unset struct{}

// lockModel is a lock kind's sequential specification.
type lockModel struct {
	kind    Kind
	permits int
	// free is the initial state; any lists every state a window may start
	// in (nil if the kind has no such finite list).
	free any
	any  []any
	// effect is the state after in takes effect in s, and whether it can.
	effect func(s any, in pIn) (any, bool)
	// lose, when set, is the state after proc's whole hold is lost in s
	// (reentrant: a failed, lost, crashed or pending release ends every
	// level of the hold). Without it a lost hold is one release.
	lose     func(s any, proc int) any
	equal    func(a, b any) bool
	hash     func(s any) uint64
	describe func(s any) string
}

// semState is a semaphore's holders, sorted.
type semState []int

// reState is a re-entrant mutex's owner (noOwner if free) and how many
// times the owner holds it.
type reState struct {
	owner, depth int
}

// rwState is a rwlock's writer (noOwner if none) and readers, sorted.
type rwState struct {
	writer  int
	readers []int
}

func newLockModel(kind Kind, permits int) lockModel {
	switch kind {
	case Semaphore:
		return lockModel{kind: kind, permits: permits, free: semState(nil),
			effect: func(s any, in pIn) (any, bool) {
				st := s.(semState)
				if in.f == fnAcquire {
					if len(st) >= permits {
						return s, false
					}
					return semState(insertSorted(st, in.proc)), true
				}
				i, ok := slices.BinarySearch(st, in.proc)
				if !ok {
					return s, false
				}
				return semState(slices.Delete(slices.Clone(st), i, i+1)), true
			},
			equal: func(a, b any) bool { return slices.Equal(a.(semState), b.(semState)) },
			hash:  func(s any) uint64 { return hashInts(noOwner, s.(semState)) },
			describe: func(s any) string {
				st := s.(semState)
				return fmt.Sprintf("held by %s (%d of %d permits free)", procList(st), permits-len(st), permits)
			},
		}
	case RWLock:
		return lockModel{kind: kind, free: rwState{writer: noOwner},
			effect: func(s any, in pIn) (any, bool) {
				st := s.(rwState)
				switch {
				case in.f == fnAcquire && in.write:
					if st.writer != noOwner || len(st.readers) > 0 {
						return s, false
					}
					return rwState{writer: in.proc}, true
				case in.f == fnAcquire:
					if st.writer != noOwner {
						return s, false
					}
					return rwState{writer: noOwner, readers: insertSorted(st.readers, in.proc)}, true
				case st.writer == in.proc:
					return rwState{writer: noOwner, readers: st.readers}, true
				}
				i, ok := slices.BinarySearch(st.readers, in.proc)
				if !ok {
					return s, false
				}
				return rwState{writer: st.writer, readers: slices.Delete(slices.Clone(st.readers), i, i+1)}, true
			},
			equal: func(a, b any) bool {
				x, y := a.(rwState), b.(rwState)
				return x.writer == y.writer && slices.Equal(x.readers, y.readers)
			},
			hash: func(s any) uint64 { st := s.(rwState); return hashInts(st.writer, st.readers) },
			describe: func(s any) string {
				st := s.(rwState)
				switch {
				case st.writer != noOwner:
					return fmt.Sprintf("written by p%d", st.writer)
				case len(st.readers) > 0:
					return "read by " + procList(st.readers)
				}
				return "free"
			},
		}
	case Reentrant:
		free := reState{owner: noOwner}
		return lockModel{kind: kind, free: free,
			effect: func(s any, in pIn) (any, bool) {
				st := s.(reState)
				if in.f == fnAcquire {
					if st.owner != noOwner && st.owner != in.proc {
						return s, false
					}
					return reState{owner: in.proc, depth: st.depth + 1}, true
				}
				switch {
				case st.owner != in.proc:
					return s, false
				case st.depth == 1:
					return free, true
				}
				return reState{owner: in.proc, depth: st.depth - 1}, true
			},
			lose: func(s any, proc int) any {
				if s.(reState).owner == proc {
					return free
				}
				return s
			},
			equal: func(a, b any) bool { return a == b },
			hash: func(s any) uint64 {
				st := s.(reState)
				return hashInts(st.owner, []int{st.depth})
			},
			describe: func(s any) string {
				st := s.(reState)
				if st.owner == noOwner {
					return "free"
				}
				return fmt.Sprintf("held by p%d at depth %d", st.owner, st.depth)
			},
		}
	case KnossosMutex:
		return lockModel{kind: kind, free: false, any: []any{false, true},
			effect: func(s any, in pIn) (any, bool) {
				locked := s.(bool)
				if in.f == fnAcquire {
					return true, !locked
				}
				return false, locked
			},
			equal: func(a, b any) bool { return a == b },
			hash: func(s any) uint64 {
				if s.(bool) {
					return 1
				}
				return 2
			},
			describe: func(s any) string {
				if s.(bool) {
					return "locked"
				}
				return "free"
			},
		}
	}
	return lockModel{kind: Mutex, free: noOwner,
		effect: func(s any, in pIn) (any, bool) {
			owner := s.(int)
			if in.f == fnAcquire {
				return in.proc, owner == noOwner
			}
			return noOwner, owner == in.proc
		},
		equal: func(a, b any) bool { return a == b },
		hash:  func(s any) uint64 { return uint64(s.(int)) },
		describe: func(s any) string {
			if s.(int) == noOwner {
				return "free"
			}
			return fmt.Sprintf("held by p%d", s.(int))
		},
	}
}

func insertSorted(st []int, v int) []int {
	i, _ := slices.BinarySearch(st, v)
	return slices.Insert(slices.Clone(st), i, v)
}

func hashInts(first int, xs []int) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for _, x := range append([]int{first}, xs...) {
		u := uint64(x)
		for i := range b {
			b[i] = byte(u >> (8 * i))
		}
		h.Write(b[:])
	}
	return h.Sum64()
}

func procList(ps []int) string {
	if len(ps) == 0 {
		return "nobody"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = "p" + strconv.Itoa(p)
	}
	return strings.Join(s, ", ")
}

// step returns every state the op can lead to from s: none if it cannot
// happen in s.
func (m lockModel) step(s any, in pIn, out pOut) []any {
	if in.start {
		if _, ok := s.(unset); !ok {
			return nil
		}
		if out == pStartAny && m.any != nil {
			return m.any
		}
		return []any{m.free}
	}
	if _, ok := s.(unset); ok {
		return nil
	}
	next, legal := m.effect(s, in)
	switch out {
	case pOK:
		if legal {
			return []any{next}
		}
		return nil
	case pUnknown:
		states := []any{s}
		if legal {
			states = append(states, next)
		}
		if m.lose != nil && in.f == fnRelease {
			// A crashed or pending release is its process's last op on
			// the key: whatever it did, the rest of the hold ends when the
			// lock is lost (its session expires), or never.
			states = append(states, m.lose(s, in.proc))
		}
		return states
	case pFreed:
		if in.f != fnRelease {
			return []any{s}
		}
		if m.lose != nil {
			return []any{m.lose(s, in.proc)}
		}
		if legal {
			return []any{next}
		}
		return []any{s}
	}
	return nil
}

// porcupineModel returns the kind's porcupine model; its initial state is
// the free lock, every state (startAny, when the kind has a list of them),
// or unset, waiting for a synthetic start op (startOp).
func (m lockModel) porcupineModel(init initState) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init: func() []any {
			switch {
			case init == initUnset:
				return []any{unset{}}
			case init == initAny && m.any != nil:
				return m.any
			}
			return []any{m.free}
		},
		Step: func(s, in, out any) []any { return m.step(s, in.(pIn), out.(pOut)) },
		Equal: func(a, b any) bool {
			_, ua := a.(unset)
			_, ub := b.(unset)
			if ua || ub {
				return ua == ub
			}
			return m.equal(a, b)
		},
		Hash: func(s any) uint64 {
			if _, ok := s.(unset); ok {
				return 0
			}
			return m.hash(s)
		},
		DescribeOperation: describeOp,
		DescribeState: func(s any) string {
			if _, ok := s.(unset); ok {
				return "not started"
			}
			return m.describe(s)
		},
		DescribeOperationMetadata: describeMeta,
	}
	return nm.ToModel()
}

type initState uint8

const (
	initFree initState = iota
	initAny
	initUnset
)

func partitionByKey(ops []porcupine.Operation) [][]porcupine.Operation {
	var parts [][]porcupine.Operation
	idx := map[int]int{}
	for _, op := range ops {
		var k int
		switch in := op.Input.(type) {
		case pIn:
			k = in.part
		case rIn:
			k = in.part
		}
		i, ok := idx[k]
		if !ok {
			i = len(parts)
			idx[k] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], op)
	}
	return parts
}

func describeOp(in, out any) string {
	i, o := in.(pIn), out.(pOut)
	if i.start {
		if o == pStartAny {
			return "window starts: lock in any state"
		}
		return "window starts: lock free"
	}
	name := "release"
	switch {
	case i.f == fnAcquire && i.rw && i.write:
		name = "acquire(write)"
	case i.f == fnAcquire && i.rw:
		name = "acquire(read)"
	case i.f == fnAcquire:
		name = "acquire"
	}
	res := "ok"
	switch o {
	case pUnknown:
		res = "?"
	case pFreed:
		res = "failed or lost"
	}
	return fmt.Sprintf("p%d %s → %s", i.proc, name, res)
}

// pop is a call as a porcupine operation.
type pop struct {
	ci    int32
	callT int64
	retT  int64 // never when the op may take effect at any time after callT
	in    pIn
	out   pOut
}

// toPops converts key k's calls to porcupine operations: failed acquires,
// and under knossos-mutex every failed op, are dropped; info and pending ops
// may take effect at any time after their call, or never.
func toPops(p *parsed, k int32, kind Kind) []pop {
	var ops []pop
	for _, ci := range p.byKey[k] {
		c := &p.calls[ci]
		if c.f != fnAcquire && c.f != fnRelease {
			continue
		}
		in := pIn{f: c.f, proc: c.proc, write: c.write, rw: kind == RWLock && c.f == fnAcquire, part: int(k)}
		o := pop{ci: ci, callT: c.callT, retT: c.retT, in: in}
		switch {
		case c.out == outFail && (c.f == fnAcquire || kind == KnossosMutex):
			continue
		case c.out == outFail:
			o.out = pFreed
		case c.out == outOK && c.lost:
			o.out = pFreed
		case c.out == outOK:
			o.out = pOK
		default:
			o.out, o.retT = pUnknown, never
		}
		ops = append(ops, o)
	}
	return ops
}

// window returns the operations of the pops that could matter between s and
// t: those called by t and not returned before s. An op still under way at t
// becomes unknown; when relax is set, so does an op called before s (it may
// have taken effect before the window).
func window(p *parsed, pops []pop, s, t int64, relax bool) []porcupine.Operation {
	var ops []porcupine.Operation
	clients := map[int]int{}
	for _, o := range pops {
		if o.callT > t || o.retT < s {
			continue
		}
		ret, out := o.retT, o.out
		if ret > t {
			ret, out = never, pUnknown
		} else if relax && o.callT < s {
			out = pUnknown
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
