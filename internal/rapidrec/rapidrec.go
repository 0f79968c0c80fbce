// Package rapidrec owns Recorder, the rapid.TB the simulators' tests (zksim, redsim)
// hand to rapid.Check to see a property fail, and how, instead of failing the test;
// and the helpers those tests share to read and set rapid's flags (WithChecks,
// ShrinkTime).
package rapidrec

import (
	"fmt"
	"regexp"
	"strconv"

	"pgregory.net/rapid"
)

// Recorder is a rapid.TB that keeps what rapid.Check reports instead of failing a
// test, so that a test can check that a property fails, and how.
type Recorder struct {
	name   string
	logs   []string
	errs   []string
	failed bool
}

var _ rapid.TB = (*Recorder)(nil)

// New is a Recorder for the test called name.
func New(name string) *Recorder { return &Recorder{name: name} }

// Logs are what rapid logged, in order.
func (r *Recorder) Logs() []string { return r.logs }

// Errs are the failures rapid reported, in order.
func (r *Recorder) Errs() []string { return r.errs }

// The methods of rapid.TB: failures are kept, never reported to a test.

// Helper does nothing.
func (r *Recorder) Helper()      {}
func (r *Recorder) Name() string { return r.name }
func (r *Recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *Recorder) Log(args ...any)                   { r.logs = append(r.logs, fmt.Sprint(args...)) }
func (r *Recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *Recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *Recorder) Fatalf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *Recorder) Fatal(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *Recorder) FailNow()                          { r.failed = true }
func (r *Recorder) Fail()                             { r.failed = true }
func (r *Recorder) Failed() bool                      { return r.failed }

// rapid.Check never skips; a skip would be a bug here.
func (r *Recorder) Skipf(format string, args ...any) { panic("skip: " + fmt.Sprintf(format, args...)) }
func (r *Recorder) Skip(args ...any)                 { panic("skip: " + fmt.Sprint(args...)) }
func (r *Recorder) SkipNow()                         { panic("skip") }

func (r *Recorder) fail(msg string) {
	r.errs = append(r.errs, msg)
	r.failed = true
}

var (
	failedAfter = regexp.MustCompile(`\[rapid\] failed after (\d+) tests`)
	reproduce   = regexp.MustCompile(`To reproduce, specify (-run=\S+ .*)`)
)

// ChecksBefore returns how many checks passed before rapid found the failure, from
// its report, or -1.
func (r *Recorder) ChecksBefore() int {
	for _, e := range r.errs {
		if m := failedAfter.FindStringSubmatch(e); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return -1
}

// Reproduction returns rapid's advice on how to replay the failure.
func (r *Recorder) Reproduction() string {
	for _, e := range r.errs {
		if m := reproduce.FindStringSubmatch(e); m != nil {
			return m[1]
		}
	}
	return ""
}
