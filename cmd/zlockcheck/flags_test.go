package main

import (
	"strings"
	"testing"
)

// flagCase is a command line that must be refused before anything starts, and what
// its error must say.
type flagCase struct {
	args []string
	want string
}

// expectRefused runs each case's command line: it must exit with exitError, say
// want on stderr, and print nothing on stdout.
func expectRefused(t *testing.T, cases []flagCase) {
	t.Helper()
	for _, c := range cases {
		var stdout, stderr strings.Builder
		if code := realMain(c.args, &stdout, &stderr); code != exitError || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr.String(), exitError, c.want)
		}
		if stdout.Len() > 0 {
			t.Errorf("%q: stdout %q, want nothing", c.args, stdout.String())
		}
	}
}

// TestExploreDurationFlags: a budget, round or first look no session can use is
// refused by the flag's name before anything starts.
func TestExploreDurationFlags(t *testing.T) {
	expectRefused(t, []flagCase{
		{[]string{"explore", "--budget", "0s"}, "--budget 0s: want a budget > 0"},
		{[]string{"explore", "--round", "-1s"}, "--round -1s: want a round > 0"},
		{[]string{"explore", "--first-round", "-2s"}, "--first-round -2s: want 0"},
	})
}
