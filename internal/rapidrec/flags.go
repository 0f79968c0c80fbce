package rapidrec

import (
	"flag"
	"strconv"
	"testing"
	"time"
)

// WithChecks sets rapid's -rapid.checks to n (when n > 0) until the test ends, and
// returns the number of checks rapid.Check will make.
func WithChecks(t *testing.T, n int) int {
	t.Helper()
	f := rapidFlag(t, "rapid.checks")
	was := f.Value.String()
	if n > 0 {
		if err := f.Value.Set(strconv.Itoa(n)); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set(was) })
	}
	limit, err := strconv.Atoi(f.Value.String())
	if err != nil {
		t.Fatal(err)
	}
	return limit
}

// ShrinkTime returns rapid's -rapid.shrinktime, the time shrinking may take.
func ShrinkTime(t *testing.T) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(rapidFlag(t, "rapid.shrinktime").Value.String())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// rapidFlag is rapid's flag name; t fails when rapid has none.
func rapidFlag(t *testing.T, name string) *flag.Flag {
	t.Helper()
	f := flag.Lookup(name)
	if f == nil {
		t.Fatalf("rapid has no -%s flag", name)
	}
	return f
}
