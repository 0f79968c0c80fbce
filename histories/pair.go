package histories

import (
	"fmt"
	"slices"
)

// Pairing: which completion ends which invoke. This file is the one place that
// follows the open op of every process; reading, writing and validating a history,
// the models and the report's pictures all pair through it.

// Rule names a pairing rule of a history (see Pairer).
type Rule uint8

// The pairing rules, in the order Pairer checks them.
const (
	// RuleDeadAfterInfo: a process that completed an op with info is never used
	// again on that op's key.
	RuleDeadAfterInfo Rule = iota + 1
	// RuleOneOpen: a process has at most one open op; an invoke needs none open.
	RuleOneOpen
	// RuleOpenInvoke: a completion needs an open invoke of its process.
	RuleOpenInvoke
	// RuleSameF: a completion has the same f as its invoke.
	RuleSameF
	// RuleSameKey: a completion has the same key as its invoke.
	RuleSameKey
)

// PairError is an op that breaks a pairing rule.
type PairError struct {
	// Rule is the rule broken.
	Rule Rule
	// At is the place (as the caller named it) of the earlier op the rule refers to:
	// the open invoke, or the info completion for RuleDeadAfterInfo; -1 for
	// RuleOpenInvoke.
	At int
	// OpenF and OpenKey are the f and key of the open invoke, if any.
	OpenF, OpenKey string
	// Field is the op's offending field ("process", "f" or "key").
	Field string
	// Msg says what is wrong, naming places in the Pairer's unit.
	Msg string
}

// Error renders the error as field "name": message.
func (e *PairError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Msg) }

// Pairer pairs the client ops of a history as they come, under the pairing rules: a
// completion (ok, fail, info) matches the open invoke of its process and has the
// same f and key; a process has at most one open op; a process that completed an op
// with info is never used again on that op's key. Nemesis ops are never paired.
//
// The caller names each op by a place (its position in a history, its line in a
// file, its index); Step gives back the place of the invoke a completion ends, and
// errors name places. The zero Pairer is ready, and its messages call places "op".
type Pairer struct {
	unit   string // what places are, in messages: "op" (""), "line" or "index"
	dense  []procState
	sparse map[int]*procState
	// dead maps a process and a key on which it completed an op with info to where.
	dead map[deadKey]int
}

// deadKey is a process and a key it may not use again.
type deadKey struct {
	id  int
	key string
}

// procState is what a Pairer knows of one client process.
type procState struct {
	state uint8 // idle or open
	at    int   // the place of the open invoke
	f     string
	key   string
	// dead: the process completed an op with info (Pairer.dead says on which keys).
	dead bool
}

const (
	idle uint8 = iota
	open
)

// denseProcs is how many process ids a Pairer keeps in a slice rather than a map.
const denseProcs = 1 << 16

func (t *Pairer) get(id int) *procState {
	if id >= 0 && id < denseProcs {
		if id >= len(t.dense) {
			n := max(2*len(t.dense), id+1, 16)
			t.dense = append(t.dense, make([]procState, min(n, denseProcs)-len(t.dense))...)
		}
		return &t.dense[id]
	}
	if t.sparse == nil {
		t.sparse = make(map[int]*procState)
	}
	s := t.sparse[id]
	if s == nil {
		s = new(procState)
		t.sparse[id] = s
	}
	return s
}

// Check reports the rule op, at place at, would break, without recording it; nil
// when it breaks none.
func (t *Pairer) Check(op *Op, at int) *PairError {
	if op.Process.Nemesis {
		return nil
	}
	unit := t.unit
	if unit == "" {
		unit = "op"
	}
	id := op.Process.ID
	s := t.get(id)
	e := func(r Rule, at int, fld, format string, args ...any) *PairError {
		return &PairError{Rule: r, At: at, OpenF: s.f, OpenKey: s.key, Field: fld, Msg: fmt.Sprintf(format, args...)}
	}
	if s.dead {
		if dead, ok := t.dead[deadKey{id, op.Key}]; ok {
			return e(RuleDeadAfterInfo, dead, "process", "process %d was used again after its info completion on %s %d", id, unit, dead)
		}
	}
	switch {
	case op.Type == Invoke && s.state == open:
		return e(RuleOneOpen, s.at, "process", "process %d invokes %q while its %q invoked on %s %d is still open", id, op.F, s.f, unit, s.at)
	case op.Type != Invoke && s.state != open:
		return &PairError{Rule: RuleOpenInvoke, At: -1, Field: "process", Msg: fmt.Sprintf("process %d completes %q (%s) with no open invoke", id, op.F, op.Type)}
	case op.Type != Invoke && s.f != op.F:
		return e(RuleSameF, s.at, "f", "completion of %q does not match the open invoke of %q on %s %d", op.F, s.f, unit, s.at)
	case op.Type != Invoke && s.key != op.Key:
		return e(RuleSameKey, s.at, "key", "completion on key %q does not match the open invoke on key %q on %s %d", op.Key, s.key, unit, s.at)
	}
	return nil
}

// Step checks op, at place at, against the pairing rules and records it when it
// breaks none. For a completion it returns the place of the invoke it ends; for an
// invoke or a nemesis op, -1.
func (t *Pairer) Step(op *Op, at int) (invokedAt int, err *PairError) {
	if err = t.Check(op, at); err != nil {
		return -1, err
	}
	if op.Process.Nemesis {
		return -1, nil
	}
	s := t.get(op.Process.ID)
	switch op.Type {
	case Invoke:
		s.state, s.at, s.f, s.key = open, at, op.F, op.Key
		return -1, nil
	case Info:
		if t.dead == nil {
			t.dead = map[deadKey]int{}
		}
		t.dead[deadKey{op.Process.ID, op.Key}] = at
		s.dead = true
	}
	s.state = idle
	return s.at, nil
}

// Open returns the places of the invokes still open, in increasing order.
func (t *Pairer) Open() []int {
	var at []int
	for i := range t.dense {
		if t.dense[i].state == open {
			at = append(at, t.dense[i].at)
		}
	}
	for _, s := range t.sparse {
		if s.state == open {
			at = append(at, s.at)
		}
	}
	slices.Sort(at)
	return at
}

// Pair is one client operation of a history: where its invoke and its completion are.
type Pair struct {
	// Invoke is the position of the invoke in the history.
	Invoke int
	// Completion is the position of the completion, -1 if the op never completed.
	Completion int
}

// Pairs pairs the client ops of h with a Pairer: the completed ops in the order of
// their completions, then those never completed in the order of their invokes. An
// op that breaks a pairing rule is left out (Validate names the first), so that a
// picture can still be drawn of a broken history.
func Pairs(h History) []Pair {
	var t Pairer
	pairs := make([]Pair, 0, len(h)/2+1)
	for pos := range h {
		op := &h[pos]
		if op.Process.Nemesis {
			continue
		}
		if inv, err := t.Step(op, pos); err == nil && op.Type != Invoke {
			pairs = append(pairs, Pair{Invoke: inv, Completion: pos})
		}
	}
	for _, inv := range t.Open() {
		pairs = append(pairs, Pair{Invoke: inv, Completion: -1})
	}
	return pairs
}
