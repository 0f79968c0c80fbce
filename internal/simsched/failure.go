package simsched

import "fmt"

// FailureKind says which property a run broke.
type FailureKind string

// The properties; each simulator's doc says what breaks them there.
const (
	// FailExclusion: two clients held the lock at once.
	FailExclusion FailureKind = "mutual exclusion"
	// FailModel: the recorded history is not linearizable for models' mutex.
	FailModel FailureKind = "history"
	// FailLiveness: with faults off, a client did not acquire in time.
	FailLiveness FailureKind = "liveness"
	// FailOrphan: the lock was left held once every client was idle.
	FailOrphan FailureKind = "orphan"
	// FailHarness: the recipe or the run misbehaved otherwise.
	FailHarness FailureKind = "harness"
)

// Failure is a broken property: which, and how.
type Failure struct {
	Kind FailureKind
	Msg  string
}

// Error renders the failure as "<kind>: <msg>".
func (f *Failure) Error() string { return string(f.Kind) + ": " + f.Msg }

// Failf makes a failure.
func Failf(kind FailureKind, format string, args ...any) *Failure {
	return &Failure{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}
