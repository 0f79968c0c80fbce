package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
)

func TestStatusLineFormatAndQuietWhenNotATerminal(t *testing.T) {
	got := formatStatus(harness.Progress{Elapsed: 12 * time.Second, Total: 30 * time.Second, OK: 1200, Fail: 3, Info: 1,
		Faults: []string{"kill", "partition"}, LastEvent: "process 3 lost l0 at 11.2s"})
	for _, want := range []string{"[ 12s/30s]", "ok 1200", "fail 3", "info 1", "faults: kill,partition", "last: process 3 lost l0 at 11.2s"} {
		if !strings.Contains(got, want) {
			t.Errorf("status %q lacks %q", got, want)
		}
	}
	if got := formatStatus(harness.Progress{Total: time.Second}); !strings.Contains(got, "faults: none") || strings.Contains(got, "last:") {
		t.Errorf("idle status %q: want faults none and no last event", got)
	}
	var buf bytes.Buffer
	if line := newStatusLine(&buf, true); line != nil {
		t.Error("a status line on a buffer (not a terminal)")
	}
	var none *statusLine
	none.done() // a nil status line is silent
}
