package histories

import (
	"encoding/json"
	"time"
)

// The vocabulary of a history: the names of the ops (Op.F) this project records, and
// the values of the ops the harness and the nemesis record about the run itself. The
// harness writes these values and the models, the report and the CLI read them
// through the same types, so each record has one schema, here.

// F is the function of an op (Op.F): what a client did, or what the harness or the
// nemesis recorded. The names this project records are the constants below; a
// workload may use any other non-empty name.
//
// F is an alias of string so that Op.F, and the code that builds ops from it, stay
// plain strings.
type F = string

// The functions of client ops.
const (
	// FAcquire takes a lock; an ok acquire's Value is its fencing token, if any.
	FAcquire F = "acquire"
	// FRelease gives a lock back.
	FRelease F = "release"
	// FRead is the counter workload's read of the counter; an ok read's Value is
	// what it returned.
	FRead F = "read"
	// FWrite is the counter workload's write of the counter; its invoke's Value is
	// what it writes.
	FWrite F = "write"
)

// The functions of nemesis ops: each is an info op of NemesisProcess whose Value is
// the record named.
const (
	// FStart: the nemesis starts a fault (Value: Fault).
	FStart F = "start"
	// FStop: the nemesis stopped a fault it started (Value: Fault).
	FStop F = "stop"
	// FStall: nobody acquired the lock for too long while workers tried, so the
	// harness ended the workload early (Value: Stall).
	FStall F = "stall"
	// FOrphan: a blocking orphan node kept every waiter from the lock, so the
	// harness ended the workload early (Value: Orphan).
	FOrphan F = "orphan"
	// FOverlap: the harness saw more workers hold the lock than it admits, so it
	// ended the run early (Value: Overlap); the checker decides the verdict.
	FOverlap F = "overlap"
	// FLiveness: the final phase's verdict (Value: Liveness).
	FLiveness F = "liveness"
	// FCounterFinal: the counter's value after the run, on the counter's key (Value:
	// CounterFinal).
	FCounterFinal F = "counter-final"
	// FRenewed: a worker said the server renewed its lease on the lock (Value:
	// Renewal).
	FRenewed F = "renewed"
)

// Record is the value of a nemesis op.
type Record interface {
	// Func names the op whose value this is.
	Func() F
}

var (
	_ Record = Fault{}
	_ Record = Stall{}
	_ Record = Orphan{}
	_ Record = Overlap{}
	_ Record = Liveness{}
	_ Record = CounterFinal{}
	_ Record = Renewal{}
)

// NemesisOp returns the op that records r: an info op of NemesisProcess with r's
// function, r as its JSON value and msg as its error. The index and time are the
// recorder's to set.
func NemesisOp(r Record, msg string) Op {
	value, err := json.Marshal(r)
	if err != nil { // cannot happen: every Record marshals (Fault replaces a bad Detail)
		value, _ = json.Marshal(map[string]string{"error": err.Error()})
	}
	return Op{Type: Info, F: r.Func(), Process: NemesisProcess, Value: value, Error: msg}
}

// Fault is the value of a nemesis start or stop op: one JSON object of the fault's
// class ("fault"), what the nemesis did or is about to do to whom (the class's own
// fields, such as "shape", "target", "servers" or "grudge"), and "error" when
// something went wrong.
type Fault struct {
	// Phase is FStart or FStop: the op's function, not part of the value.
	Phase F `json:"-"`
	// Class is the fault's class ("partition", "pause", ...).
	Class string
	// Detail holds the class's own fields, written beside "fault" and "error". As
	// the harness always wrote it, a "fault" among them wins over Class, and a
	// non-empty Error over an "error" among them.
	Detail map[string]any
	// Error says why choosing, applying or undoing the fault failed; "" if all went well.
	Error string
}

// Func returns the fault's phase.
func (f Fault) Func() F { return f.Phase }

// MarshalJSON writes one object: "fault", the Detail fields, "error" if not empty.
// A Detail that is not JSON-able is replaced by the error it gives.
func (f Fault) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, len(f.Detail)+2)
	m["fault"] = f.Class
	for k, v := range f.Detail {
		m[k] = v
	}
	if f.Error != "" {
		m["error"] = f.Error
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.Marshal(map[string]string{"fault": f.Class, "error": err.Error()})
	}
	return b, nil
}

// UnmarshalJSON reads an object written by MarshalJSON. It is lenient, as readers of
// old or hand-made histories need: it fills in every field it can read and then
// returns the first problem (a value that is not an object, a "fault" or "error"
// that is not a string). A null leaves f as it is.
func (f *Fault) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	var first error
	str := func(k string) string {
		var s string
		if raw, ok := m[k]; ok {
			if err := json.Unmarshal(raw, &s); err != nil && first == nil {
				first = err
			}
		}
		delete(m, k)
		return s
	}
	f.Class, f.Error = str("fault"), str("error")
	f.Detail = make(map[string]any, len(m))
	for k, raw := range m {
		var v any
		_ = json.Unmarshal(raw, &v) // raw is valid JSON: it came out of b
		f.Detail[k] = v
	}
	return first
}

// DetailString returns the Detail field k if it is a string, else "".
func (f Fault) DetailString(k string) string {
	s, _ := f.Detail[k].(string)
	return s
}

// Stall is the value of the stall op: how long nobody had acquired the lock while
// workers tried, and the limit it passed.
type Stall struct {
	// SinceGrant is the time since the last grant of the lock.
	SinceGrant time.Duration `json:"since_grant_ns"`
	// StallAfter is the harness's limit (Config.StallAfter).
	StallAfter time.Duration `json:"stall_after_ns"`
}

// Func returns FStall.
func (Stall) Func() F { return FStall }

// Orphan is the value of the orphan op: the blocking orphan seen last, the lowest
// child of the lock node, owned by the live session of a worker that holds nothing.
type Orphan struct {
	// Node is the lock node's child.
	Node string `json:"node"`
	// Owner is the node's ephemeral owner, a session id like 0x1000a2b3c0001.
	Owner string `json:"ephemeral_owner"`
	// Process is the worker process whose session owns the node.
	Process int `json:"process"`
	// Newer is a newer node of the same session ("" when the worker is idle).
	Newer string `json:"newer,omitempty"`
	// MissedWakeup: not an orphan but its worker's own waiting node, the lowest, never
	// granted while no fault had been on for a session timeout: the recipe missed that
	// its node became the lowest. It makes the run's liveness check invalid whatever
	// the final phase finds (the waiter may give up, and the lock move on, later).
	MissedWakeup bool `json:"missed_wakeup,omitempty"`
	// LeftBy names the owner's release that ended with an unknown outcome, when its
	// latest did: the node is most likely that lock's, left behind a session the
	// worker kept ("": none).
	LeftBy string `json:"left_by,omitempty"`
}

// Func returns FOrphan.
func (Orphan) Func() F { return FOrphan }

// Overlap is the value of the overlap op: the processes the harness saw holding the
// lock at once, and how many it admits.
type Overlap struct {
	Holders []int `json:"holders"`
	Permits int   `json:"permits"`
	// Cause is the cause class the harness gave the overlap when it ended the run
	// for it on reading its history ("recipe bug"); empty when it ended the run on
	// seeing the holders at once.
	Cause string `json:"cause,omitempty"`
}

// Func returns FOverlap.
func (Overlap) Func() F { return FOverlap }

// CounterFinal is the value of the counter-final op: the counter read after the run.
// Readers also accept a bare integer (see models).
type CounterFinal struct {
	// Value is the counter's final value.
	Value int64 `json:"value"`
}

// Func returns FCounterFinal.
func (CounterFinal) Func() F { return FCounterFinal }

// Renewal is the value of a renewed op: worker Process said (the protocol's renewed
// event) that the server had confirmed its lease on the lock Key was still its own
// and extended it; the op's time is when the harness read that.
type Renewal struct {
	Process int    `json:"process"`
	Key     string `json:"key"`
}

// Func returns FRenewed.
func (Renewal) Func() F { return FRenewed }

// Liveness is the value of the liveness op, the verdict of the final phase: after
// every fault was healed and the ensemble served again, every worker had to acquire
// and release the lock once within Bound. When one could not, Children lists the
// lock node's children with their owners, so an orphaned node (one no live worker is
// waiting on) is named as such.
type Liveness struct {
	// OK is true when every worker acquired within Bound.
	OK bool `json:"ok"`
	// Bound is the final phase's bound on one acquire.
	Bound time.Duration `json:"bound_ns"`
	// Finals is each slot's final cycle, by slot.
	Finals []FinalCycle `json:"finals"`
	// Children are the lock node's children when OK is false.
	Children []LockChild `json:"children,omitempty"`
	// Proof, when set, says why the lock could never be granted again: a blocking
	// orphan outlived its own worker's final acquire, so the final phase ended
	// before its bound.
	Proof string `json:"proof,omitempty"`
	// MissedWakeup: the final phase ended before its bound on a missed wake-up (the
	// orphan op before this one, with missed_wakeup, says which waiter).
	MissedWakeup bool `json:"missed_wakeup,omitempty"`
	// Error says why listing the lock node's children failed.
	Error string `json:"error,omitempty"`
}

// Func returns FLiveness.
func (Liveness) Func() F { return FLiveness }

// FinalCycle is how one slot's end-of-run lock cycle went.
type FinalCycle struct {
	// Slot is the worker slot, from 1.
	Slot int `json:"slot"`
	// Process is the worker process of the slot.
	Process int `json:"process"`
	// Reply is the worker's reply to the final acquire (ok, fail, info), or one
	// of the Final* words the harness uses when there was none.
	Reply string `json:"reply"`
	// Error says why the cycle did not succeed.
	Error string `json:"error,omitempty"`
	// WaitedMS is how long the acquire took to answer.
	WaitedMS int64 `json:"waited_ms"`
}

// Acquired reports whether the final acquire succeeded.
func (c FinalCycle) Acquired() bool { return c.Reply == string(OK) }

// What a FinalCycle's Reply says when the worker gave no reply.
const (
	// FinalCrashed: the worker died or did not answer.
	FinalCrashed = "crashed"
	// FinalWaiting: no answer yet when the final phase was judged.
	FinalWaiting = "waiting"
	// FinalNone: the slot ended before the final phase.
	FinalNone = "none"
	// FinalNoWorker: no worker of the slot could be started.
	FinalNoWorker = "no worker"
)

// LockChild is one child of the lock node at the end of a run.
type LockChild struct {
	// Node is the child's name.
	Node string `json:"node"`
	// EphemeralOwner is the owner session, as 0x...; 0x0 for a persistent node.
	EphemeralOwner string `json:"ephemeral_owner"`
	// Process is the worker process whose session owns the node, -1 if none is known.
	Process int `json:"process"`
	// SessionAlive says whether the servers still have the owner session.
	SessionAlive bool `json:"session_alive"`
	// Orphan: the node's session is alive but no worker is waiting with it, so the
	// node blocks every waiter until that session ends (a lost create reply).
	Orphan bool `json:"orphan"`
	// MissedWakeup: the lowest node, and its owner is a live worker waiting for the
	// lock with it that was never granted: the recipe missed that its node became the
	// lowest (no watch set when its predecessor vanished, a lost notification).
	MissedWakeup bool `json:"missed_wakeup,omitempty"`
	// Note says why the node is an orphan, or what its owner does.
	Note string `json:"note,omitempty"`
	// OutlivesSession: the entry stays when its owner's session ends (a lock table's
	// row), unlike an ephemeral node or a session lock.
	OutlivesSession bool `json:"outlives_session,omitempty"`
}
