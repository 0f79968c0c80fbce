package coverage

import (
	"fmt"
	"io"
)

// WriteText prints the table for a terminal: one row a line, its count and
// situation, and under a row at 0 why that matters. A table without rows (results
// written before coverage existed) prints nothing.
func WriteText(w io.Writer, t Table) error {
	if len(t.Rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "coverage: what the run exercised (%d of %d situations not exercised)\n", t.NotExercisedCount(), len(t.Rows)); err != nil {
		return err
	}
	if !t.Exercised {
		fmt.Fprintf(w, "  %s\n", NothingExercised)
	}
	for _, r := range t.Rows {
		fmt.Fprintf(w, "  %6d  %s%s\n", r.Count, r.Situation, byText(r.By))
		if r.NotExercised != "" {
			fmt.Fprintf(w, "          %s\n", r.NotExercised)
		}
	}
	return nil
}

// byText renders a row's split as " (a 2, b 1)", in name order; "" when none.
func byText(by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	s := ""
	for _, k := range sortedKeys(by) {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k, by[k])
	}
	return " (" + s + ")"
}

// ByText renders a row's split as "a 2, b 1" in name order, for HTML pages.
func (r Row) ByText() string {
	s := byText(r.By)
	if s == "" {
		return ""
	}
	return s[2 : len(s)-1]
}
