package web

import (
	"strings"
	"testing"
)

// assertOrder: each of markers is on the page, each after the one before.
func assertOrder(t *testing.T, name, page string, markers ...string) {
	t.Helper()
	last, lastMarker := -1, ""
	for _, m := range markers {
		i := strings.Index(page, m)
		switch {
		case i < 0:
			t.Errorf("%s lacks %q:\n%s", name, m, page)
			return
		case i <= last:
			t.Errorf("%s: %q (at %d) is not after %q (at %d):\n%s", name, m, i, lastMarker, last, page)
		}
		last, lastMarker = i, m
	}
}

// The markers of a run page's sections, in the order the page shows them: the
// verdict and the reason first, then what ran, the plots, every check, the files.
const (
	markVerdict = `id="verdict"`
	markReason  = `<section id="reason" class="reason">`
	markFacts   = `<table class="facts" id="facts">`
	markPlots   = `<div class="plots">`
	markChecks  = `<table class="checks">`
	markFiles   = `<h2 id="files">`
	// The invalid fixture's reason: its check, cause class and why, and witness.
	markInvalidCheck = `<div class="reason-check invalid" data-key="l0" data-verdict="invalid">`
	markCause        = `<p class="cause" data-class="recipe bug"><b>cause: recipe bug</b>: process 0 went on holding with no fault of its own`
	markWitness      = `<pre class="witness">process 1 acquired l0 at 0.000000027s while process 0 held it since 0.000000020s`
	// The clean ZooKeeper version of the facts table (results.json has Debian's).
	markZooKeeper = `<tr><th>ZooKeeper</th><td>3.8.0</td></tr>`
)

// reasonFirstCases are the run pages and what each must show, in order: the reason
// before the facts, the plots and the checks.
func reasonFirstCases() map[string][]string {
	return map[string][]string{
		invalidRun: {markVerdict, markReason, markInvalidCheck, markCause, markWitness, markFacts, markZooKeeper, markPlots, markChecks, markFiles},
		validRun: {markVerdict, markReason, `<p class="reason-ok" id="all-passed">Every check passed: l0 (holds), liveness (final phase).</p>`,
			markFacts, markZooKeeper, markChecks, markFiles},
		unknownRun: {markVerdict, markReason, `<div class="reason-check unknown" data-key="l0" data-verdict="unknown">`,
			`<pre class="witness">the search ran out of its 60s budget</pre>`, markFacts, markZooKeeper, markPlots, markChecks, markFiles},
		errorRun: {markVerdict, markReason, "The run broke down: server s2 did not start",
			"Every check passed on what the run recorded before it broke down: l0 (holds), liveness (final phase).", markFacts, markChecks, markFiles},
	}
}

// TestRunPageReasonFirst: a run page opens with its verdict and why: an invalid
// run's failed check, its cause class and its witness come before the run's facts,
// its plots and its table of checks; a valid run's page opens with one line saying
// every check passed. Neither shows Debian's unexpanded version placeholder.
func TestRunPageReasonFirst(t *testing.T) {
	store, _ := fixture(t)
	srv := server(t, store)
	for run, markers := range reasonFirstCases() {
		_, body := get(t, srv, "/run/"+run+"/")
		assertOrder(t, run, body, markers...)
		if strings.Contains(body, "mvngit") {
			t.Errorf("%s: the page shows the Maven placeholder of the version", run)
		}
	}
	_, body := get(t, srv, "/run/"+validRun+"/")
	if strings.Contains(body, `class="reason-check`) {
		t.Errorf("the valid run's page shows a failed check:\n%s", body)
	}
	_, body = get(t, srv, "/run/"+invalidRun+"/")
	if strings.Contains(body, `id="all-passed"`) {
		t.Errorf("the invalid run's page says every check passed:\n%s", body)
	}
	// The witness is shown once, at the top, not again in the table of checks.
	if n := strings.Count(body, "process 1 acquired l0"); n != 1 {
		t.Errorf("the witness is shown %d times, want once", n)
	}
}
