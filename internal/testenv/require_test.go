package testenv

import (
	"strings"
	"testing"
)

// recorder is a fake testing.TB that records Skip and Fatal instead of ending the
// goroutine, so the test can look at what RequireIntegration decided.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()           {}
func (r *recorder) Skip(args ...any)  { r.skipped = args[0].(string) }
func (r *recorder) Fatal(args ...any) { r.failed = args[0].(string) }

func TestMissingRequirementSkipsOrFails(t *testing.T) {
	t.Setenv(ZKConnectVar, "")
	t.Setenv(RequireIntegrationVar, "")
	r := &recorder{TB: t}
	requireIntegration(r, false, []Requirement{StandaloneZK})
	if !strings.Contains(r.skipped, ZKConnectVar) || r.failed != "" {
		t.Errorf("without %s: skipped %q, failed %q; want a skip naming it", RequireIntegrationVar, r.skipped, r.failed)
	}
	t.Setenv(RequireIntegrationVar, "1")
	r = &recorder{TB: t}
	requireIntegration(r, false, []Requirement{StandaloneZK})
	if !strings.Contains(r.failed, ZKConnectVar) || r.skipped != "" {
		t.Errorf("with %s: skipped %q, failed %q; want a failure naming it", RequireIntegrationVar, r.skipped, r.failed)
	}
	t.Setenv(ZKConnectVar, "127.0.0.1:1")
	r = &recorder{TB: t}
	requireIntegration(r, false, []Requirement{StandaloneZK})
	if r.skipped != "" || r.failed != "" {
		t.Errorf("with the requirement met: skipped %q, failed %q", r.skipped, r.failed)
	}
}

func TestShortModeSkips(t *testing.T) {
	t.Setenv(RequireIntegrationVar, "1")
	r := &recorder{TB: t}
	requireIntegration(r, true, []Requirement{StandaloneZK})
	if !strings.Contains(r.skipped, "-short") || r.failed != "" {
		t.Errorf("in -short mode: skipped %q, failed %q; want a skip", r.skipped, r.failed)
	}
}

func TestEveryRequirementHasAName(t *testing.T) {
	for r := Root; r <= StandaloneZK; r++ {
		if r.String() == "unknown requirement" {
			t.Errorf("requirement %d is not in the catalogue", r)
		}
	}
}
