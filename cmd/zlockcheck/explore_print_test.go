package main

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/harness/explore"
	"github.com/zlockcheck/zlockcheck/models"
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
