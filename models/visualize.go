package models

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

// ErrNothingToVisualize is returned by WriteVisualization when no key of the
// result is invalid with a window.
var ErrNothingToVisualize = errors.New("models: no invalid key with a window to visualize")

// WriteVisualization writes porcupine's HTML visualization of the window of
// every invalid key of r, one partition per key, with the witness as an
// annotation at the violation. Only the windows are checked again, which is
// cheap. cfg must be the config r was checked with. A register key's window
// is shown against the register model; a lost update or a wrong final
// value may be linearizable as a register, and the annotation says what
// was lost.
func WriteVisualization(w io.Writer, r Result, cfg Config) error {
	cfg, err := cfg.normalize()
	if err != nil {
		return err
	}
	m := newLockModel(cfg.Kind, cfg.Permits)
	var all []porcupine.Operation
	var notes []porcupine.Annotation
	for i, kr := range r.Keys {
		reg := isRegisterResult(kr)
		if kr.Verdict != Invalid || (len(kr.Window) == 0 && !reg) {
			continue
		}
		var ops []porcupine.Operation
		if reg {
			ops, err = registerWindowForVisualization(kr, i)
		} else {
			ops, err = windowForVisualization(kr, i, m, cfg)
		}
		if err != nil {
			return fmt.Errorf("key %s: %w", keyName(kr.Key), err)
		}
		all = append(all, ops...)
		at := kr.FirstViolation
		if at < 0 {
			at = ops[0].Call
		}
		notes = append(notes, porcupine.Annotation{
			Tag:             "violation: " + keyName(kr.Key),
			Start:           at,
			Description:     "violation of " + keyName(kr.Key),
			Details:         kr.Witness,
			BackgroundColor: "#f8c4c4",
		})
	}
	if len(all) == 0 {
		return ErrNothingToVisualize
	}
	model := visModel(m)
	_, info := porcupine.CheckOperationsVerbose(model, all, cfg.Timeout)
	info.AddAnnotations(notes)
	return porcupine.Visualize(model, info, w)
}

// isRegisterResult reports whether kr is a register key's result.
func isRegisterResult(kr KeyResult) bool {
	for _, c := range strings.Split(kr.Checker, "+") {
		if c == CheckerRegister || c == CheckerFinalValue {
			return true
		}
	}
	return false
}

// visModel is the model of a visualization: each partition is a lock of
// m's kind or a register, and starts unset, waiting for its synthetic
// start op.
func visModel(m lockModel) porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{unset{}} },
		Step: func(s, in, out any) []any {
			if ri, ok := in.(rIn); ok {
				return regStep(s, ri, out.(rOut))
			}
			if _, ok := s.(regState); ok {
				return nil
			}
			return m.step(s, in.(pIn), out.(pOut))
		},
		Equal: func(a, b any) bool {
			_, ua := a.(unset)
			_, ub := b.(unset)
			ra, isRa := a.(regState)
			rb, isRb := b.(regState)
			switch {
			case ua || ub:
				return ua == ub
			case isRa || isRb:
				return isRa && isRb && ra == rb
			}
			return m.equal(a, b)
		},
		Hash: func(s any) uint64 {
			switch st := s.(type) {
			case unset:
				return 0
			case regState:
				return regHash(st)
			}
			return m.hash(s)
		},
		DescribeOperation: func(in, out any) string {
			if ri, ok := in.(rIn); ok {
				return describeRegOp(ri, out.(rOut))
			}
			return describeOp(in, out)
		},
		DescribeState: func(s any) string {
			switch st := s.(type) {
			case unset:
				return "not started"
			case regState:
				return "register " + describeRegState(st)
			}
			return m.describe(s)
		},
		DescribeOperationMetadata: describeMeta,
	}
	return nm.ToModel()
}

// windowForVisualization converts a key's window to porcupine operations in
// partition part, led by a synthetic op that sets the lock's initial state.
// A porcupine window is relaxed (any initial state, ops under way at its
// start optional) when that is what made it fail, as in Check.
func windowForVisualization(kr KeyResult, part int, m lockModel, cfg Config) ([]porcupine.Operation, error) {
	h := make(histories.History, len(kr.Window))
	copy(h, kr.Window)
	for i := range h {
		h[i].Key = kr.Key
	}
	p, err := parse(h, cfg.Kind)
	if err != nil {
		return nil, err
	}
	if len(p.keys) != 1 {
		return nil, errors.New("empty window")
	}
	pops := toPops(p, 0, cfg.Kind)
	for i := range pops {
		pops[i].in.part = part
	}
	ops := window(p, pops, math.MinInt64, math.MaxInt64, false)
	start := pStartFree
	if kr.Checker == CheckerPorcupine && m.any != nil {
		s := int64(math.MaxInt64)
		for _, c := range p.calls {
			if c.out == outOK {
				s = min(s, c.retT)
			}
		}
		relaxed := window(p, pops, s, math.MaxInt64, true)
		if porcupine.CheckOperationsTimeout(m.porcupineModel(initAny), relaxed, cfg.Timeout) == porcupine.Illegal {
			ops, start = relaxed, pStartAny
		}
	}
	if len(ops) == 0 {
		return nil, errors.New("empty window")
	}
	first := ops[0].Call
	clients := 0
	for _, op := range ops {
		first = min(first, op.Call)
		clients = max(clients, op.ClientId+1)
	}
	lead := porcupine.Operation{ClientId: clients, Input: pIn{start: true, part: part}, Call: first - 1, Output: start, Return: first - 1}
	return append([]porcupine.Operation{lead}, ops...), nil
}

// registerWindowForVisualization converts a register key's window to
// porcupine operations in partition part, led by a synthetic op that starts
// the register at 0 or at any value, as the window was found.
func registerWindowForVisualization(kr KeyResult, part int) ([]porcupine.Operation, error) {
	h := make(histories.History, len(kr.Window))
	copy(h, kr.Window)
	for i := range h {
		h[i].Key = kr.Key
	}
	p, err := parse(h, Mutex)
	if err != nil {
		return nil, err
	}
	var ops []porcupine.Operation
	if len(p.keys) == 1 {
		rops := regPops(p, 0)
		for i := range rops {
			rops[i].in.part = part
		}
		ops = regWindow(p, rops, math.MaxInt64)
	}
	first := max(kr.FirstViolation, 0)
	clients := 0
	for _, op := range ops {
		first = min(first, op.Call)
		clients = max(clients, op.ClientId+1)
	}
	lead := porcupine.Operation{ClientId: clients, Input: rIn{start: true, zero: kr.fromZero, part: part},
		Call: first - 1, Output: rOut{}, Return: first - 1}
	return append([]porcupine.Operation{lead}, ops...), nil
}
