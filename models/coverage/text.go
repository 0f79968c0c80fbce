package coverage

import (
	"fmt"
	"io"
)

// WriteText prints the table for a terminal: one row a line, its count and
// situation, and under a row at 0 why that matters; a row that does not apply to the
// run's service shows "-" for its count and says why. A table without rows (results
// written before coverage existed) prints nothing.
func WriteText(w io.Writer, t Table) error {
	if len(t.Rows) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "coverage: what the run exercised (%s)\n", t.Tally()); err != nil {
		return err
	}
	if !t.Exercised {
		fmt.Fprintf(w, "  %s\n", NothingExercised)
	}
	for _, r := range t.Rows {
		if r.NotApplicable != "" {
			fmt.Fprintf(w, "  %6s  %s\n          %s\n", "-", r.Situation, r.NotApplicable)
			continue
		}
		fmt.Fprintf(w, "  %6d  %s%s\n", r.Count, r.Situation, byText(r.By))
		if r.NotExercised != "" {
			fmt.Fprintf(w, "          %s\n", r.NotExercised)
		}
	}
	return nil
}

// Tally says how many of the table's situations were not exercised, out of those
// that apply: "3 of 14 situations not exercised", with ", 2 not applicable" when
// some do not apply to the run's service.
func (t Table) Tally() string {
	s := fmt.Sprintf("%d of %d situations not exercised", t.NotExercisedCount(), t.ApplicableCount())
	if na := len(t.Rows) - t.ApplicableCount(); na > 0 {
		s += fmt.Sprintf(", %d not applicable", na)
	}
	return s
}

// VerdictNote is what a valid verdict's line adds so that "VALID" never hides that
// nothing dangerous happened: "(3 of 14 situations not exercised: the coverage table
// says which)", or "" when every situation that applies was exercised (or the table
// has no rows).
func (t Table) VerdictNote() string {
	if t.NotExercisedCount() == 0 {
		return ""
	}
	return fmt.Sprintf("(%d of %d situations not exercised: the coverage table says which)", t.NotExercisedCount(), t.ApplicableCount())
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
