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
	var t Pairer
	for pos := range h {
		op := &h[pos]
		if fld, msg := checkOp(op); msg != "" {
			return &ValidationError{Pos: pos, Field: fld, Msg: msg}
		}
		if len(op.Value) != 0 && !json.Valid(op.Value) {
			return &ValidationError{Pos: pos, Field: "value", Msg: "not valid JSON"}
		}
		if _, e := t.Step(op, pos); e != nil {
			return &ValidationError{Pos: pos, Field: e.Field, Msg: e.Msg}
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
