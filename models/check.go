package models

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sort"
	"strconv"
	"strings"
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
	fnRead  // a register read; an ok read's value is what it returned
	fnWrite // a register write of its value
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
	lost  bool  // a release the harness recorded as lost
	write bool  // a write (or mode-less) acquire, for rwlock
	val   int64 // a write's value, an ok read's result
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
	// reg[k] marks a register key: one with reads, writes or a
	// counter-final op (the others are lock keys).
	reg []bool
	// final[k] is the position in h of keys[k]'s counter-final op, -1 if
	// none; finalVal[k] is the value it recorded.
	final    []int32
	finalVal []int64
}

// keyClass remembers the first lock op, register op and other op of a key,
// to reject a key that mixes lock and register ops, or has other ops on a
// register.
type keyClass struct {
	lockAt, regAt, otherAt int64 // op indexes, -1 if none
	otherF                 string
}

// parse pairs the client ops of h (histories.Pairer) and checks the history's
// structure.
func parse(h histories.History, kind Kind) (*parsed, error) {
	if len(h) > math.MaxInt32 {
		return nil, fmt.Errorf("history has %d ops, more than this checker handles", len(h))
	}
	p := &parsed{h: h, calls: make([]call, 0, len(h)/2+1)}
	keyIdx := map[string]int32{}
	var classes []keyClass
	keyOf := func(name string) int32 {
		k, ok := keyIdx[name]
		if !ok {
			k = int32(len(p.keys))
			keyIdx[name] = k
			p.keys = append(p.keys, name)
			p.byKey = append(p.byKey, nil)
			p.lines = append(p.lines, 0)
			p.reg = append(p.reg, false)
			p.final = append(p.final, -1)
			p.finalVal = append(p.finalVal, 0)
			classes = append(classes, keyClass{lockAt: -1, regAt: -1, otherAt: -1})
		}
		return k
	}
	// classify records that op (at index idx), whose function is what, is
	// a lock op, a register op or another op of key k, and rejects a key
	// with both lock and register ops, or a register key with other ops
	// (which might change the register).
	classify := func(k int32, cls fn, idx int64, what string) error {
		cl := &classes[k]
		switch {
		case cls == fnRead && cl.lockAt >= 0:
			return fmt.Errorf("op %d: %s on %s, which has lock ops (acquire/release, the first at op %d): a key is a lock or a register, not both",
				idx, what, keyName(p.keys[k]), cl.lockAt)
		case cls == fnRead && cl.otherAt >= 0:
			return fmt.Errorf("op %d: %s on %s, which has op %d (%s): a register key has only read and write ops",
				idx, what, keyName(p.keys[k]), cl.otherAt, cl.otherF)
		case cls != fnRead && cl.regAt >= 0:
			kind := "lock ops are"
			if cls == fnOther {
				kind = "other ops are"
			}
			return fmt.Errorf("op %d: %s on %s, which has register ops (read, write or counter-final, the first at op %d): %s not allowed on a register key",
				idx, what, keyName(p.keys[k]), cl.regAt, kind)
		case cls == fnRead && cl.regAt < 0:
			cl.regAt = idx
			p.reg[k] = true
		case cls == fnAcquire && cl.lockAt < 0:
			cl.lockAt = idx
		case cls == fnOther && cl.otherAt < 0:
			cl.otherAt, cl.otherF = idx, what
		}
		return nil
	}
	var pairs histories.Pairer
	lastT := map[int]int64{} // process -> the time of its last op
	for i := range h {
		op := &h[i]
		if op.Process.Nemesis {
			if op.F != histories.FCounterFinal {
				continue
			}
			k := keyOf(op.Key)
			if err := classify(k, fnRead, op.Index, histories.FCounterFinal); err != nil {
				return nil, err
			}
			if p.final[k] >= 0 {
				return nil, fmt.Errorf("op %d: a second counter-final on %s (the first is op %d)", op.Index, keyName(op.Key), h[p.final[k]].Index)
			}
			v, err := finalValue(op.Value)
			if err != nil {
				return nil, fmt.Errorf("op %d: counter-final value: %v", op.Index, err)
			}
			p.final[k], p.finalVal[k] = int32(i), v
			p.lines[k]++
			continue
		}
		if !op.Type.Valid() {
			return nil, fmt.Errorf("op %d: unknown type %q", op.Index, op.Type)
		}
		id := op.Process.ID
		if op.Type == histories.Invoke && op.F == "" {
			return nil, fmt.Errorf("op %d: invoke without a function", op.Index)
		}
		invAt, perr := pairs.Step(op, i)
		if perr != nil {
			return nil, pairError(h, op, perr)
		}
		last, seen := lastT[id]
		lastT[id] = op.Time
		if op.Type == histories.Invoke {
			if seen && op.Time < last {
				return nil, fmt.Errorf("op %d: process %d's time goes backwards (%d after %d)", op.Index, id, op.Time, last)
			}
			k := keyOf(op.Key)
			c := call{callT: op.Time, retT: op.Time, inv: int32(i), comp: -1, proc: id, key: k, out: outPending, lost: op.Lost}
			switch op.F {
			case histories.FAcquire:
				c.f = fnAcquire
			case histories.FRelease:
				c.f = fnRelease
			case histories.FRead:
				c.f = fnRead
			case histories.FWrite:
				c.f = fnWrite
			}
			cls := c.f // the key's class: fnAcquire (lock), fnRead (register) or fnOther
			switch c.f {
			case fnRelease:
				cls = fnAcquire
			case fnWrite:
				cls = fnRead
			}
			if err := classify(k, cls, op.Index, op.F); err != nil {
				return nil, err
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
			if c.f == fnWrite {
				v, err := intValue(op.Value)
				if err != nil {
					return nil, fmt.Errorf("op %d: write value: %v", op.Index, err)
				}
				c.val = v
			}
			p.byKey[k] = append(p.byKey[k], int32(len(p.calls)))
			p.lines[k]++
			p.calls = append(p.calls, c)
			continue
		}
		// A completion: calls are in the order of their invokes.
		c := &p.calls[sort.Search(len(p.calls), func(j int) bool { return p.calls[j].inv >= int32(invAt) })]
		inv := &h[c.inv]
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
		if c.f == fnRead && op.Type == histories.OK {
			v, err := intValue(op.Value)
			if err != nil {
				return nil, fmt.Errorf("op %d: read result: %v", op.Index, err)
			}
			c.val = v
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
		}
		p.lines[c.key]++
	}
	return p, nil
}

// pairError words a broken pairing rule the models' way, naming ops by their index.
func pairError(h histories.History, op *histories.Op, e *histories.PairError) error {
	id := op.Process.ID
	switch e.Rule {
	case histories.RuleDeadAfterInfo:
		return fmt.Errorf("op %d: process %d is used again on %s after its op %d completed as info",
			op.Index, id, keyName(op.Key), h[e.At].Index)
	case histories.RuleOneOpen:
		return fmt.Errorf("op %d: process %d invokes %s while its %s invoked at op %d is still open",
			op.Index, id, op.F, e.OpenF, h[e.At].Index)
	case histories.RuleOpenInvoke:
		return fmt.Errorf("op %d: %s %s by process %d without an open invoke", op.Index, op.Type, op.F, id)
	case histories.RuleSameF:
		return fmt.Errorf("op %d: completion of %s by process %d, but its open invoke (op %d) is %s",
			op.Index, op.F, id, h[e.At].Index, e.OpenF)
	}
	return fmt.Errorf("op %d: completion on key %q by process %d, but its invoke (op %d) is on key %q",
		op.Index, op.Key, id, h[e.At].Index, e.OpenKey)
}

// intValue decodes an op's value that must be a JSON integer.
func intValue(raw json.RawMessage) (int64, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return 0, errors.New("missing, want an integer")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s is not an integer", s)
	}
	return v, nil
}

// finalValue decodes a counter-final op's value: {"value":N}, or N.
func finalValue(raw json.RawMessage) (int64, error) {
	s := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(s, "{") {
		return intValue(raw)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return 0, err
	}
	v, ok := obj["value"]
	if !ok {
		return 0, fmt.Errorf(`%s has no "value"`, s)
	}
	return intValue(v)
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
	if p.reg[k] {
		return checkRegister(p, k, cfg)
	}
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
