package main

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/harness/explore"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
)

// TestPrintSessionSaysHonestOnly: a session invalid only by honest rounds says so and
// names their causes; one with a recipe bug does not.
func TestPrintSessionSaysHonestOnly(t *testing.T) {
	honest := explore.Session{Verdict: models.Invalid, Rounds: []explore.Round{{Verdict: models.Valid},
		{Verdict: models.Invalid, Cause: "clock", Honest: true}, {Verdict: models.Invalid, Cause: "unfenced overlap", Honest: true}}}
	var b strings.Builder
	printSession(&b, "redis-lock", honest)
	if !strings.Contains(b.String(), "INVALID by honest causes only (clock, unfenced overlap): no recipe bug found") {
		t.Errorf("honest session printed:\n%s", b.String())
	}
	bug := honest
	bug.Rounds = append(bug.Rounds, explore.Round{Verdict: models.Invalid, Cause: "recipe bug"})
	b.Reset()
	printSession(&b, "mutant", bug)
	if strings.Contains(b.String(), "honest") {
		t.Errorf("a session with a recipe bug printed:\n%s", b.String())
	}
}

// TestPrintSessionSaysWhatWasNotExercised: a valid session's last line says how many
// situations its rounds never exercised, together; one that exercised them all says
// VALID alone.
func TestPrintSessionSaysWhatWasNotExercised(t *testing.T) {
	cov := coverage.Table{Exercised: true, Rows: []coverage.Row{
		{ID: coverage.RowFaultReleasing, Count: 0, NotExercised: "not exercised: the run could not have found a delete lost mid-release"},
		{ID: coverage.RowLost, Count: 2}, {ID: coverage.RowEdge, NotApplicable: "not applicable: no queue"}}}
	s := explore.Session{Verdict: models.Valid, Rounds: []explore.Round{{Verdict: models.Valid}}, Tally: explore.Tally{Coverage: cov}}
	var b strings.Builder
	printSession(&b, "kazoo-lock", s)
	if !strings.Contains(b.String(), ": VALID (1 of 2 situations not exercised: the coverage table says which)\n") {
		t.Errorf("session printed:\n%s", b.String())
	}
	cov.Rows[0] = coverage.Row{ID: coverage.RowFaultReleasing, Count: 1}
	b.Reset()
	printSession(&b, "kazoo-lock", s)
	if !strings.HasSuffix(b.String(), ": VALID\n") {
		t.Errorf("a session that exercised everything printed:\n%s", b.String())
	}
}
