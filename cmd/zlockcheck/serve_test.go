package main

import (
	"path/filepath"
	"testing"
)

// TestServeFlags: serve reports bad input and a missing store instead of serving.
func TestServeFlags(t *testing.T) {
	expectRefused(t, []flagCase{
		{[]string{"serve", "extra"}, "unexpected argument"},
		{[]string{"serve", "--store", filepath.Join(t.TempDir(), "missing")}, "no such file"},
		{[]string{"serve", "--store", t.TempDir(), "--addr", "256.0.0.1:bad"}, "zlockcheck serve:"},
		{[]string{"serve", "--frobnicate"}, "flag provided but not defined"},
	})
}
