package models

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/anishathalye/porcupine"

	"github.com/zlockcheck/zlockcheck/histories"
)

// ErrNothingToVisualize is returned by WriteVisualization when no key of the
// result is invalid with a window.
var ErrNothingToVisualize = errors.New("models: no invalid key with a window to visualize")

// WriteVisualization writes porcupine's HTML visualization of the window of
// every invalid key of r, one partition per key, with the witness as an
// annotation at the violation. Only the windows are checked again, which is
// cheap. cfg must be the config r was checked with.
func WriteVisualization(w io.Writer, r Result, cfg Config) error {
	cfg, err := cfg.normalize()
	if err != nil {
		return err
	}
	m := newLockModel(cfg.Kind, cfg.Permits)
	var all []porcupine.Operation
	var notes []porcupine.Annotation
	for i, kr := range r.Keys {
		if kr.Verdict != Invalid || len(kr.Window) == 0 {
			continue
		}
		ops, err := windowForVisualization(kr, i, m, cfg)
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
	_, info := porcupine.CheckOperationsVerbose(m.porcupineModel(initUnset), all, cfg.Timeout)
	info.AddAnnotations(notes)
	return porcupine.Visualize(m.porcupineModel(initUnset), info, w)
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
