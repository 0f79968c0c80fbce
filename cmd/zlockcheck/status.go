package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/zlockcheck/zlockcheck/harness"
)

// statusLine keeps one live status line at the bottom of a terminal while a run goes
// (elapsed/total, ops by outcome, faults on, the last verdict-relevant event); log
// lines written through it scroll above it. It is nil, and silent, when the output is
// not a terminal or progress is off.
type statusLine struct {
	mu   sync.Mutex
	w    io.Writer
	last string
}

// newStatusLine returns a status line on w if w is a terminal and enabled is set.
func newStatusLine(w io.Writer, enabled bool) *statusLine {
	if !enabled || !isTerminal(w) {
		return nil
	}
	return &statusLine{w: w}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// formatStatus renders a progress snapshot as one line.
func formatStatus(p harness.Progress) string {
	faults := "none"
	if len(p.Faults) > 0 {
		faults = strings.Join(p.Faults, ",")
	}
	line := fmt.Sprintf("[%3.0fs/%.0fs] ok %d  fail %d  info %d  faults: %s",
		p.Elapsed.Seconds(), p.Total.Seconds(), p.OK, p.Fail, p.Info, faults)
	if p.LastEvent != "" {
		line += "  last: " + p.LastEvent
	}
	return line
}

// show redraws the status line.
func (s *statusLine) show(p harness.Progress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = formatStatus(p)
	fmt.Fprintf(s.w, "\r\033[K%s", s.last)
}

// Write prints a log line above the status line.
func (s *statusLine) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "\r\033[K%s", b)
	if s.last != "" {
		fmt.Fprintf(s.w, "%s", s.last)
	}
	return len(b), nil
}

// done ends the status line (it stays on screen, followed by a newline).
func (s *statusLine) done() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last != "" {
		fmt.Fprintln(s.w)
	}
	s.last = ""
}
