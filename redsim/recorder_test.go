package redsim

import (
	"fmt"
	"regexp"
	"strconv"

	"pgregory.net/rapid"
)

// recorder is a rapid.TB (a copy of zksim's, which is test-only there) that keeps what rapid.Check reports instead of failing a
// test, so that a test can check that a property fails, and how.
type recorder struct {
	name   string
	logs   []string
	errs   []string
	failed bool
}

var _ rapid.TB = (*recorder)(nil)

func (r *recorder) Helper()      {}
func (r *recorder) Name() string { return r.name }
func (r *recorder) Logf(format string, args ...any) {
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}
func (r *recorder) Log(args ...any)                   { r.logs = append(r.logs, fmt.Sprint(args...)) }
func (r *recorder) Errorf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Error(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) { r.fail(fmt.Sprintf(format, args...)) }
func (r *recorder) Fatal(args ...any)                 { r.fail(fmt.Sprint(args...)) }
func (r *recorder) FailNow()                          { r.failed = true }
func (r *recorder) Fail()                             { r.failed = true }
func (r *recorder) Failed() bool                      { return r.failed }

// rapid.Check never skips; a skip would be a bug here.
func (r *recorder) Skipf(format string, args ...any) { panic("skip: " + fmt.Sprintf(format, args...)) }
func (r *recorder) Skip(args ...any)                 { panic("skip: " + fmt.Sprint(args...)) }
func (r *recorder) SkipNow()                         { panic("skip") }

func (r *recorder) fail(msg string) {
	r.errs = append(r.errs, msg)
	r.failed = true
}

var (
	failedAfter = regexp.MustCompile(`\[rapid\] failed after (\d+) tests`)
	reproduce   = regexp.MustCompile(`To reproduce, specify (-run=\S+ .*)`)
)

// checksBefore returns how many checks passed before rapid found the failure, from
// its report, or -1.
func (r *recorder) checksBefore() int {
	for _, e := range r.errs {
		if m := failedAfter.FindStringSubmatch(e); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
	}
	return -1
}

// reproduction returns rapid's advice on how to replay the failure.
func (r *recorder) reproduction() string {
	for _, e := range r.errs {
		if m := reproduce.FindStringSubmatch(e); m != nil {
			return m[1]
		}
	}
	return ""
}
