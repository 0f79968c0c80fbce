// Package histories owns the history file: the durable, append-only record of every
// operation a run performed, written while the run goes and read back by the checker.
//
// A history is JSON Lines, one Op per line (see README.md in this directory for the
// format). It is the contract between running and checking: nothing else is needed to
// check a run again. Writer appends to one as a run goes; Load reads one back, Validate
// checks one built in memory, and ReadEDN and WriteEDN convert from and to Jepsen's EDN.
//
// It also owns the history's vocabulary (vocab.go): the names of the ops (F...) and the
// typed values of the nemesis's and the harness's own ops (Fault, Stall, Orphan,
// Liveness, CounterFinal), and the one pairing of invokes with their completions
// (Pairer, Pairs in pair.go), which everything that reads a history uses.
package histories

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// Type says how an operation ended, or that it began.
type Type string

// The four op types, as in Jepsen.
const (
	// Invoke starts an operation.
	Invoke Type = "invoke"
	// OK completes an operation that certainly took effect.
	OK Type = "ok"
	// Fail completes an operation that certainly did not take effect.
	Fail Type = "fail"
	// Info completes an operation whose effect is unknown; its process is never used again.
	Info Type = "info"
)

// Valid reports whether t is one of the four known types.
func (t Type) Valid() bool {
	switch t {
	case Invoke, OK, Fail, Info:
		return true
	}
	return false
}

// Lock modes of read-write lock operations.
const (
	// ModeRead is the shared mode of a read-write lock.
	ModeRead = "read"
	// ModeWrite is the exclusive mode of a read-write lock.
	ModeWrite = "write"
)

// Process identifies who performed an operation: a client process (an integer that is
// never reused once it completed an op with Info) or the nemesis.
type Process struct {
	// ID is the client process number; meaningless when Nemesis is set.
	ID int
	// Nemesis marks operations of the fault injector; models ignore them.
	Nemesis bool
}

// NemesisProcess is the process of every nemesis operation.
var NemesisProcess = Process{Nemesis: true}

// Client returns the client process with the given id.
func Client(id int) Process { return Process{ID: id} }

// String renders the process as it appears in the file.
func (p Process) String() string {
	if p.Nemesis {
		return "nemesis"
	}
	return strconv.Itoa(p.ID)
}

// MarshalJSON writes an integer, or the string "nemesis".
func (p Process) MarshalJSON() ([]byte, error) {
	if p.Nemesis {
		return []byte(`"nemesis"`), nil
	}
	return strconv.AppendInt(nil, int64(p.ID), 10), nil
}

// UnmarshalJSON accepts an integer, or the string "nemesis".
func (p *Process) UnmarshalJSON(b []byte) error {
	if string(b) == `"nemesis"` {
		*p = NemesisProcess
		return nil
	}
	id, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("process must be an integer or \"nemesis\", got %s", b)
	}
	*p = Client(id)
	return nil
}

// Op is one line of a history: the invocation or completion of an operation.
//
// A completion matches the open invoke of the same process; a process has at most one
// open op at a time.
type Op struct {
	// Index is the op's position in the file, from 0.
	Index int64 `json:"index"`
	// Type is invoke, ok, fail or info.
	Type Type `json:"type"`
	// F is the function: one of the F constants (vocab.go), or a workload's own.
	F string `json:"f"`
	// Process performed the op.
	Process Process `json:"process"`
	// Time is nanoseconds since the run started, from a monotonic clock.
	Time int64 `json:"time"`
	// Key names the lock; empty means the only lock.
	Key string `json:"key,omitempty"`
	// Mode is "read" or "write" for read-write lock ops.
	Mode string `json:"mode,omitempty"`
	// Value is the op's argument or result (a fencing token, what the nemesis did).
	Value json.RawMessage `json:"value,omitempty"`
	// Error says why an op failed or is unknown.
	Error string `json:"error,omitempty"`
	// Lost marks a release that the harness recorded because the worker reported it
	// had lost the lock (the hold ended at this moment, not by the worker's choice).
	Lost bool `json:"lost,omitempty"`
}

// History is a whole history in file order.
type History []Op
