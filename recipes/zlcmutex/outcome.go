package zlcmutex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Causes of definite failures, for errors.Is.
var (
	// ErrTimeout: a timed acquire gave up; its node is certainly gone.
	ErrTimeout = errors.New("timeout")
	// ErrNotHeld: a release found nothing held (never acquired, lost, or its node
	// already deleted).
	ErrNotHeld = errors.New("not held")
	// ErrAlreadyHeld: an acquire while holding; the lock is not reentrant.
	ErrAlreadyHeld = errors.New("already held (zlc-mutex is not reentrant)")
	// ErrFenced: a fenced counter write found the lock node gone and wrote nothing.
	ErrFenced = errors.New("fenced: lock node gone")
	// ErrNoCounter: a counter operation without Config.CounterPath.
	ErrNoCounter = errors.New("no counter path configured")
)

// definiteError marks an error whose operation certainly had no effect.
type definiteError struct{ err error }

func (e *definiteError) Error() string { return e.err.Error() }
func (e *definiteError) Unwrap() error { return e.err }

// definite marks err as certain: the operation had no effect. definite(nil) is nil.
func definite(err error) error {
	if err == nil {
		return nil
	}
	return &definiteError{err: err}
}

// Definite reports whether err, returned by a Lock method, means that the operation
// certainly had no effect (a timeout with the node deleted, a release of nothing, a
// fenced write refused). Any other non-nil error leaves the outcome unknown.
func Definite(err error) bool {
	var d *definiteError
	return errors.As(err, &d)
}

// gaveUp is the definite error of an acquire whose ctx ended with nothing left behind.
func gaveUp(ctx context.Context) error {
	cause := context.Cause(ctx)
	if cause == nil || errors.Is(cause, context.DeadlineExceeded) || errors.Is(cause, ErrTimeout) {
		return definite(ErrTimeout)
	}
	return definite(fmt.Errorf("acquire abandoned: %w", cause))
}

// ParseCounter decodes a counter node's data: a decimal integer, possibly surrounded
// by white space; empty data is 0.
func ParseCounter(data []byte) (int64, error) {
	s := strings.TrimSpace(string(data))
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("counter data %q is not a decimal integer", data)
	}
	return v, nil
}

// FormatCounter encodes a counter value as a counter node's data.
func FormatCounter(v int64) []byte { return strconv.AppendInt(nil, v, 10) }
