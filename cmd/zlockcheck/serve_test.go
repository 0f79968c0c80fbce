package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServeFlags: serve reports bad input and a missing store instead of serving.
func TestServeFlags(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"serve", "extra"}, "unexpected argument"},
		{[]string{"serve", "--store", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"serve", "--store", t.TempDir(), "--addr", "256.0.0.1:bad"}, "zlockcheck serve:"},
		{[]string{"serve", "--frobnicate"}, "flag provided but not defined"},
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
