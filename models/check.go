package models

import (
	"fmt"
	"math"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// fn is an op's function, as far as the models care.
type fn uint8

const (
	fnOther fn = iota
	fnAcquire
	fnRelease
)

// outcome is how a call ended.
type outcome uint8

const (
	outOK outcome = iota
	outFail
	outInfo
	outPending
)

// never is the end of a hold that is never released, and the return time of
// a porcupine operation that may take effect at any time after its call.
const never = math.MaxInt64

// call is one operation of a client process: an invoke and its completion.
type call struct {
	callT int64 // the invoke's time
	retT  int64 // the completion's time; callT when pending
	inv   int32 // position of the invoke in the history
	comp  int32 // position of the completion, -1 when pending
	proc  int
	key   int32
	f     fn
	out   outcome
	lost  bool // a release the harness recorded as lost
	write bool // a write (or mode-less) acquire, for rwlock
}

// parsed is a history paired into calls and partitioned by key.
type parsed struct {
	h     histories.History
	calls []call
	keys  []string
	// byKey[k] lists the calls on keys[k] in the order of their invokes,
	// which is each process's own order.
	byKey [][]int32
	// lines[k] counts the history lines (invokes and completions) on keys[k].
	lines []int
}

type procKey struct {
	proc int
	key  int32
}

type procState struct {
	open  int32 // the open call, -1 if none
	lastT int64 // time of the process's last op
	seen  bool
}

// parse pairs the client ops of h and checks the history's structure.
func parse(h histories.History, kind Kind) (*parsed, error) {
	if len(h) > math.MaxInt32 {
		return nil, fmt.Errorf("history has %d ops, more than this checker handles", len(h))
	}
	p := &parsed{h: h, calls: make([]call, 0, len(h)/2+1)}
	keyIdx := map[string]int32{}
	procs := map[int]*procState{}
	infoAt := map[procKey]int64{} // process and key -> index of the info op
	for i := range h {
		op := &h[i]
		if op.Process.Nemesis {
			continue
		}
		if !op.Type.Valid() {
			return nil, fmt.Errorf("op %d: unknown type %q", op.Index, op.Type)
		}
		id := op.Process.ID
		ps := procs[id]
		if ps == nil {
			ps = &procState{open: -1}
			procs[id] = ps
		}
		if op.Type == histories.Invoke {
			if ps.open >= 0 {
				return nil, fmt.Errorf("op %d: process %d invokes %s while its %s invoked at op %d is still open",
					op.Index, id, op.F, p.calls[ps.open].fnName(h), h[p.calls[ps.open].inv].Index)
			}
			if ps.seen && op.Time < ps.lastT {
				return nil, fmt.Errorf("op %d: process %d's time goes backwards (%d after %d)", op.Index, id, op.Time, ps.lastT)
			}
			if op.F == "" {
				return nil, fmt.Errorf("op %d: invoke without a function", op.Index)
			}
			k, ok := keyIdx[op.Key]
			if !ok {
				k = int32(len(p.keys))
				keyIdx[op.Key] = k
				p.keys = append(p.keys, op.Key)
				p.byKey = append(p.byKey, nil)
				p.lines = append(p.lines, 0)
			}
			if at, dead := infoAt[procKey{id, k}]; dead {
				return nil, fmt.Errorf("op %d: process %d is used again on %s after its op %d completed as info",
					op.Index, id, keyName(op.Key), at)
			}
			c := call{callT: op.Time, retT: op.Time, inv: int32(i), comp: -1, proc: id, key: k, out: outPending, lost: op.Lost}
			switch op.F {
			case histories.FAcquire:
				c.f = fnAcquire
			case histories.FRelease:
				c.f = fnRelease
			}
			if op.Lost && c.f != fnRelease {
				return nil, fmt.Errorf("op %d: only a release can be lost, not %s", op.Index, op.F)
			}
			if c.f == fnAcquire && kind == RWLock {
				switch op.Mode {
				case histories.ModeRead:
				case histories.ModeWrite, "":
					c.write = true
				default:
					return nil, fmt.Errorf("op %d: unknown rwlock mode %q", op.Index, op.Mode)
				}
			}
			ps.open = int32(len(p.calls))
			ps.lastT, ps.seen = op.Time, true
			p.byKey[k] = append(p.byKey[k], ps.open)
			p.lines[k]++
			p.calls = append(p.calls, c)
			continue
		}
		// A completion.
		if ps.open < 0 {
			return nil, fmt.Errorf("op %d: %s %s by process %d without an open invoke", op.Index, op.Type, op.F, id)
		}
		c := &p.calls[ps.open]
		inv := &h[c.inv]
		if op.F != "" && op.F != inv.F {
			return nil, fmt.Errorf("op %d: completion of %s by process %d, but its open invoke (op %d) is %s",
				op.Index, op.F, id, inv.Index, inv.F)
		}
		if op.Key != "" && op.Key != inv.Key {
			return nil, fmt.Errorf("op %d: completion on key %q by process %d, but its invoke (op %d) is on key %q",
				op.Index, op.Key, id, inv.Index, inv.Key)
		}
		if op.Time < c.callT {
			return nil, fmt.Errorf("op %d: completes at %d, before its invoke (op %d) at %d", op.Index, op.Time, inv.Index, c.callT)
		}
		if op.Lost && c.f != fnRelease {
			return nil, fmt.Errorf("op %d: only a release can be lost, not %s", op.Index, inv.F)
		}
		if c.f == fnAcquire && kind == RWLock && inv.Mode == "" && op.Mode != "" {
			switch op.Mode {
			case histories.ModeRead:
				c.write = false
			case histories.ModeWrite:
			default:
				return nil, fmt.Errorf("op %d: unknown rwlock mode %q", op.Index, op.Mode)
			}
		}
		c.comp = int32(i)
		c.retT = op.Time
		c.lost = c.lost || op.Lost
		switch op.Type {
		case histories.OK:
			c.out = outOK
		case histories.Fail:
			c.out = outFail
		case histories.Info:
			c.out = outInfo
			infoAt[procKey{id, c.key}] = op.Index
		}
		p.lines[c.key]++
		ps.open = -1
		ps.lastT = op.Time
	}
	return p, nil
}

func (c *call) fnName(h histories.History) string {
	return h[c.inv].F
}

// Check checks a history against cfg's lock model, each key on its own. It
// returns an error only for a bad config or a structurally bad history (the
// error names the offending op's index); a violation is a Result.
func Check(h histories.History, cfg Config) (Result, error) {
	start := time.Now()
	cfg, err := cfg.normalize()
	if err != nil {
		return Result{}, err
	}
	p, err := parse(h, cfg.Kind)
	if err != nil {
		return Result{}, err
	}
	keys := make([]KeyResult, len(p.keys))
	workers := min(runtime.GOMAXPROCS(0), len(p.keys))
	if workers <= 1 {
		for k := range p.keys {
			keys[k] = checkKey(p, int32(k), cfg)
		}
	} else {
		next := make(chan int32)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for k := range next {
					keys[k] = checkKey(p, k, cfg)
				}
			})
		}
		for k := range p.keys {
			next <- int32(k)
		}
		close(next)
		wg.Wait()
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].Key < keys[j].Key })
	res := Result{Verdict: Valid, Keys: keys}
	for _, kr := range keys {
		res.Verdict = Worse(res.Verdict, kr.Verdict)
	}
	res.Duration = time.Since(start)
	return res, nil
}

func checkKey(p *parsed, k int32, cfg Config) KeyResult {
	if cfg.Kind == KnossosMutex {
		return checkPorcupine(p, k, cfg)
	}
	return checkHolds(p, k, cfg)
}

// keyName renders a key for a witness.
func keyName(k string) string {
	if k == "" {
		return "the lock"
	}
	return fmt.Sprintf("%q", k)
}

// fmtTime renders a history time (ns since the run started).
func fmtTime(t int64) string {
	return time.Duration(t).String()
}
