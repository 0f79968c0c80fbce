package histories

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ParseError is a malformed line of a history file (JSON Lines or EDN).
type ParseError struct {
	// File is the name the file was read under.
	File string
	// Line is the 1-based line of the problem.
	Line int
	// Field is the key being decoded ("type", or ":type" in EDN), or "" if none.
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error renders the error as file:line: field "name": message.
func (e *ParseError) Error() string {
	switch {
	case e.Field == "":
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	case strings.HasPrefix(e.Field, ":"):
		return fmt.Sprintf("%s:%d: field %s: %s", e.File, e.Line, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s:%d: field %q: %s", e.File, e.Line, e.Field, e.Msg)
}

// ValidationError is an op of an in-memory history that breaks the rules of a history.
type ValidationError struct {
	// Pos is the op's position in the history, from 0.
	Pos int
	// Field is the name of the offending field, as in the file ("type", "process").
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error renders the error as op N: field "name": message.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("op %d: field %q: %s", e.Pos, e.Field, e.Msg)
}

// Validate checks a history built in memory against the rules a history file obeys:
// every op has a known type, a non-empty f and a time >= 0, a valid JSON Value if any;
// a completion (ok, fail, info) matches the open invoke of its process and has the
// same f and key; a process has at most one open op; a process that completed an op
// with info is never used again on that op's key. (The one use of a process after an
// info on another key: a worker that crashed in the middle of the counter workload's
// read or write while holding the lock gets its lock released, invoke then info, on
// the lock's key.) Nemesis ops are exempt from the pairing rules. The first
// violation is returned as a *ValidationError.
func Validate(h History) error {
	var t tracker
	t.unit = "op"
	for pos := range h {
		op := &h[pos]
		if fld, msg := checkOp(op); msg != "" {
			return &ValidationError{Pos: pos, Field: fld, Msg: msg}
		}
		if len(op.Value) != 0 && !json.Valid(op.Value) {
			return &ValidationError{Pos: pos, Field: "value", Msg: "not valid JSON"}
		}
		if fld, msg := t.step(op, pos); msg != "" {
			return &ValidationError{Pos: pos, Field: fld, Msg: msg}
		}
	}
	return nil
}

// checkOp checks the fields of one op, except Value, and returns the offending field
// and what is wrong with it.
func checkOp(op *Op) (fld, msg string) {
	switch {
	case !op.Type.Valid():
		return "type", fmt.Sprintf("unknown type %q", string(op.Type))
	case op.F == "":
		return "f", "missing or empty"
	case op.Time < 0:
		return "time", fmt.Sprintf("must be >= 0, got %d", op.Time)
	case op.Index < 0:
		return "index", fmt.Sprintf("must be >= 0, got %d", op.Index)
	}
	return "", ""
}

// procState is what a tracker knows of one client process.
type procState struct {
	state uint8 // idle or open
	at    int   // where the open invoke is
	f     string
	key   string
	// deadKeys maps the keys on which the process completed an op with info to where.
	deadKeys map[string]int
}

const (
	idle uint8 = iota
	open
)

// denseProcs is how many process ids a tracker keeps in a slice rather than a map.
const denseProcs = 1 << 16

// tracker follows the open op of every process to enforce the pairing rules.
type tracker struct {
	unit   string // what positions are: "line" or "op"
	dense  []procState
	sparse map[int]*procState
}

func (t *tracker) get(id int) *procState {
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

// check reports how op, found at position at, would break the pairing rules, without
// recording it.
func (t *tracker) check(op *Op, at int) (fld, msg string) {
	if op.Process.Nemesis {
		return "", ""
	}
	id := op.Process.ID
	s := t.get(id)
	if at, ok := s.deadKeys[op.Key]; ok {
		return "process", fmt.Sprintf("process %d was used again after its info completion on %s %d", id, t.unit, at)
	}
	switch {
	case op.Type == Invoke && s.state == open:
		return "process", fmt.Sprintf("process %d invokes %q while its %q invoked on %s %d is still open", id, op.F, s.f, t.unit, s.at)
	case op.Type != Invoke && s.state != open:
		return "process", fmt.Sprintf("process %d completes %q (%s) with no open invoke", id, op.F, op.Type)
	case op.Type != Invoke && s.f != op.F:
		return "f", fmt.Sprintf("completion of %q does not match the open invoke of %q on %s %d", op.F, s.f, t.unit, s.at)
	case op.Type != Invoke && s.key != op.Key:
		return "key", fmt.Sprintf("completion on key %q does not match the open invoke on key %q on %s %d", op.Key, s.key, t.unit, s.at)
	}
	return "", ""
}

// step checks op, found at position at, against the pairing rules and records it if
// it is fine.
func (t *tracker) step(op *Op, at int) (fld, msg string) {
	if fld, msg = t.check(op, at); msg != "" || op.Process.Nemesis {
		return fld, msg
	}
	s := t.get(op.Process.ID)
	switch op.Type {
	case Invoke:
		s.state, s.at, s.f, s.key = open, at, op.F, op.Key
	case Info:
		s.state = idle
		if s.deadKeys == nil {
			s.deadKeys = map[string]int{}
		}
		s.deadKeys[op.Key] = at
	default:
		s.state = idle
	}
	return "", ""
}
