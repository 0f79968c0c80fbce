package recipes

import (
	"errors"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Outcome says what is known about an operation that returned an error.
type Outcome int

const (
	// OutcomeInfo: the operation may or may not have taken effect. It is the zero
	// value, so an unclassified error is never mistaken for a definite failure.
	OutcomeInfo Outcome = iota
	// OutcomeFail: the operation certainly did not take effect.
	OutcomeFail
)

// String returns the reply type the outcome is reported as.
func (o Outcome) String() string {
	if o == OutcomeFail {
		return workloads.ReplyFail
	}
	return workloads.ReplyInfo
}

// ErrTimeout is the cause of an acquire that gave up waiting; recipes return it
// wrapped with Fail once they have made sure the lock is not held.
var ErrTimeout = errors.New("timeout")

// Error is an error that carries its Outcome.
type Error struct {
	Outcome Outcome
	Err     error
}

// Error returns the message of the wrapped error.
func (e *Error) Error() string {
	if e.Err == nil {
		return e.Outcome.String()
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Fail marks err as a definite failure: the operation certainly did not take effect.
// Fail(nil) returns nil.
func Fail(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Outcome: OutcomeFail, Err: err}
}

// Info marks err as an unknown outcome. It documents intent: unmarked errors are
// already classified as info. Info(nil) returns nil.
func Info(err error) error {
	if err == nil {
		return nil
	}
	return &Error{Outcome: OutcomeInfo, Err: err}
}

// Classify maps an operation's error to its reply type (workloads.ReplyOK, ReplyFail
// or ReplyInfo) and the reply's error message. The outermost *Error in err's chain
// decides; an error without one is info.
func Classify(err error) (reply, msg string) {
	if err == nil {
		return workloads.ReplyOK, ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Outcome.String(), err.Error()
	}
	return workloads.ReplyInfo, err.Error()
}
