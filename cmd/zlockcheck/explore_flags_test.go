package main

import (
	"strings"
	"testing"
)

// TestExploreDurationFlags: a budget, round or first look no session can use is
// refused by the flag's name before anything starts.
func TestExploreDurationFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"explore", "--budget", "0s"}, "--budget 0s: want a budget > 0"},
		{[]string{"explore", "--round", "-1s"}, "--round -1s: want a round > 0"},
		{[]string{"explore", "--first-round", "-2s"}, "--first-round -2s: want 0"},
	}
	for _, c := range cases {
		var stdout, stderr strings.Builder
		if code := realMain(c.args, &stdout, &stderr); code != exitError {
			t.Errorf("%v: exit %d, want %d", c.args, code, exitError)
		}
		if !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", c.args, c.want, stderr.String())
		}
	}
}
