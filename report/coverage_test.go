package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// TestCheckRunReportsCoverage: results.json, the summary and the timeline carry the
// coverage table, with the run's session timeout, and keep it when checked again.
func TestCheckRunReportsCoverage(t *testing.T) {
	h := histories.History{
		op(histories.Invoke, "acquire", 0, 0), op(histories.OK, "acquire", 0, 1),
		op(histories.Invoke, "acquire", 1, 2), op(histories.Fail, "acquire", 1, 3),
		op(histories.Invoke, "release", 0, 3e9), op(histories.OK, "release", 0, 3e9+1),
	}
	dir, path := writeHistory(t, h)
	res, err := CheckRun(Run{Dir: dir, History: path, Test: "t", Cause: cause.Params{SessionTimeout: 2 * time.Second}}, models.Config{Kind: models.Mutex})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != models.Valid {
		t.Fatalf("verdict %s", res.Verdict)
	}
	var onDisk Results
	if err := rundir.Dir(dir).ReadResults(&onDisk); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{coverage.RowTimedOutQueued: 1, coverage.RowLongHold: 1, coverage.RowFaultHolding: 0} {
		if r, ok := onDisk.Coverage.Row(id); !ok || r.Count != want {
			t.Errorf("results.json: row %s = %+v, want count %d", id, r, want)
		}
	}
	if onDisk.Coverage.SessionTimeout != 2*time.Second {
		t.Errorf("results.json: session timeout %s", onDisk.Coverage.SessionTimeout)
	}
	var sum strings.Builder
	Summary(&sum, res)
	if !strings.Contains(sum.String(), "coverage: what the run exercised") || !strings.Contains(sum.String(), "not exercised: the run could not have found a zombie holder") {
		t.Errorf("summary lacks the coverage table:\n%s", sum.String())
	}
	timeline, err := os.ReadFile(filepath.Join(dir, rundir.Timeline))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(timeline), `<table id="coverage">`) || !strings.Contains(string(timeline), `data-count="hold-past-session-timeout">1<`) {
		t.Errorf("timeline lacks the coverage table")
	}
	if again := NewRun(rundir.Dir(dir), onDisk.RunConfig(), nil, onDisk.Course()); again.Cause.SessionTimeout != 2*time.Second {
		t.Errorf("checked again from results.json: session timeout %s", again.Cause.SessionTimeout)
	}
}

// TestNothingExercisedIsUnknown: a history without a granted acquire has no verdict,
// even when its data checks would make the lock's checks advisory.
func TestNothingExercisedIsUnknown(t *testing.T) {
	timedOut := histories.History{op(histories.Invoke, "acquire", 0, 0), op(histories.Fail, "acquire", 0, 1)}
	for name, h := range map[string]histories.History{"empty": nil, "every acquire timed out": timedOut} {
		t.Run(name, func(t *testing.T) {
			dir, path := writeHistory(t, h)
			res, err := CheckRun(Run{Dir: dir, History: path}, models.Config{Kind: models.Mutex})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != models.Unknown || res.Coverage.Exercised {
				t.Fatalf("verdict %s, exercised %v: want unknown", res.Verdict, res.Coverage.Exercised)
			}
			var out strings.Builder
			v, err := PrintCheck(&out, path, h, models.Result{Verdict: models.Valid}, models.Config{Kind: models.Mutex})
			if err != nil || v != models.Unknown || !strings.Contains(out.String(), "exercised nothing") {
				t.Errorf("PrintCheck: %s, %v:\n%s", v, err, out.String())
			}
		})
	}
	nothing, _ := ExercisedCheck(coverage.Table{})
	counterOK := Check{Key: "counter", Verdict: models.Valid, Checker: "register+final-value"}
	checks, v := Verdict([]Check{nothing, counterOK})
	if v != models.Unknown || checks[0].Advisory {
		t.Errorf("with a data check: verdict %s, coverage check advisory %v", v, checks[0].Advisory)
	}
	liveBad := Check{Key: LivenessKey, Verdict: models.Invalid, Checker: "final phase"}
	if _, v := Verdict([]Check{nothing, liveBad}); v != models.Invalid {
		t.Errorf("an invalid liveness check under nothing exercised: %s, want invalid", v)
	}
	if _, nothing := ExercisedCheck(coverage.Table{Exercised: true}); nothing {
		t.Error("a history that exercised the lock got the check")
	}
}
