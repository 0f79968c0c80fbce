package simsched

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"testing"
	"testing/synctest"
)

// Bubble is how a run's synctest bubble is set up, and how its failures read.
type Bubble struct {
	// Before, if set, runs before the bubble is made.
	Before func()
	// Setup, if set, runs first in the bubble, with the bubble's t.
	Setup func(t *testing.T)
	// Mask, if set, rewrites the message of a failure the runner makes (of an
	// error that is not a *Failure) to read the same in every replay.
	Mask func(string) string
}

// Run runs f in a new synctest bubble of t and returns its failure: the *Failure
// f returns or panics with, or a FailHarness failure of another error. Any other
// panic is raised again outside the bubble (a runtime error with the stack where
// it happened).
func (b Bubble) Run(t *testing.T, f func() error) (fail *Failure) {
	if b.Before != nil {
		b.Before()
	}
	var p any
	synctest.Test(t, func(bt *testing.T) {
		if b.Setup != nil {
			b.Setup(bt)
		}
		defer func() {
			p = recover()
			if pf, ok := p.(*Failure); ok {
				fail, p = pf, nil
			} else if re, ok := p.(runtime.Error); ok {
				p = fmt.Sprintf("%v\n%s", re, debug.Stack())
			}
		}()
		if err := f(); err != nil {
			if fail, _ = err.(*Failure); fail == nil {
				fail = b.harness(err)
			}
		}
	})
	if p != nil {
		panic(p)
	}
	return fail
}

// harness is the FailHarness failure of err, masked.
func (b Bubble) harness(err error) *Failure {
	f := Failf(FailHarness, "%v", err)
	if b.Mask != nil {
		f.Msg = b.Mask(f.Msg)
	}
	return f
}
