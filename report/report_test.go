package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
)

func op(t histories.Type, f string, p int, at int64) histories.Op {
	return histories.Op{Type: t, F: f, Process: histories.Client(p), Time: at, Key: "l0"}
}

// writeHistory stores h as a run directory's history.jsonl.
func writeHistory(t *testing.T, h histories.History) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	path = filepath.Join(dir, "history.jsonl")
	w, err := histories.NewWriter(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range h {
		if _, err := w.Append(o); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

func TestCheckRunWritesResults(t *testing.T) {
	overlapping := histories.History{
		op(histories.Invoke, "acquire", 0, 10), op(histories.OK, "acquire", 0, 20),
		op(histories.Invoke, "acquire", 1, 25), op(histories.OK, "acquire", 1, 27),
		op(histories.Invoke, "release", 0, 30), op(histories.OK, "release", 0, 40),
		op(histories.Invoke, "release", 1, 50), op(histories.OK, "release", 1, 60),
	}
	disjoint := histories.History{
		op(histories.Invoke, "acquire", 0, 10), op(histories.OK, "acquire", 0, 20),
		op(histories.Invoke, "acquire", 1, 25), op(histories.Invoke, "release", 0, 30),
		op(histories.OK, "release", 0, 40), op(histories.OK, "acquire", 1, 45),
		op(histories.Invoke, "release", 1, 50), op(histories.Info, "release", 1, 60),
	}
	for _, c := range []struct {
		name string
		h    histories.History
		want models.Verdict
	}{{"overlap", overlapping, models.Invalid}, {"disjoint", disjoint, models.Valid}} {
		t.Run(c.name, func(t *testing.T) {
			dir, path := writeHistory(t, c.h)
			res, err := CheckRun(Run{Dir: dir, History: path, Test: "t", Elapsed: 1e9}, models.Config{Kind: models.Mutex})
			if err != nil {
				t.Fatal(err)
			}
			if res.Verdict != c.want {
				t.Fatalf("verdict %s, want %s", res.Verdict, c.want)
			}
			var onDisk Results
			data, err := os.ReadFile(filepath.Join(dir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &onDisk); err != nil {
				t.Fatal(err)
			}
			if onDisk.Verdict != c.want || onDisk.Ops != len(c.h) || onDisk.Processes != 2 {
				t.Errorf("results.json: verdict %s ops %d processes %d", onDisk.Verdict, onDisk.Ops, onDisk.Processes)
			}
			if got := onDisk.Counts["acquire"]["invoke"]; got != 2 {
				t.Errorf("acquire invokes counted %d, want 2", got)
			}
			timeline, err := os.ReadFile(filepath.Join(dir, "timeline.html"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(timeline), `"lane":[`) || !strings.Contains(string(timeline), `<b data-count="total">8</b>`) {
				t.Errorf("timeline lacks its bars or its count of ok ops")
			}
			_, vizErr := os.Stat(filepath.Join(dir, "linearizability.html"))
			if (vizErr == nil) != (c.want == models.Invalid) {
				t.Errorf("linearizability.html present = %v, want %v", vizErr == nil, c.want == models.Invalid)
			}
			if c.want == models.Invalid {
				if !strings.Contains(string(timeline), `class="violation"`) {
					t.Error("timeline does not show the violation")
				}
				if onDisk.Checks[0].Witness == "" || onDisk.Checks[0].FirstViolationSeconds == nil {
					t.Errorf("invalid check without witness or time: %+v", onDisk.Checks[0])
				}
			}
		})
	}
}

func TestCheckRunRejectsMalformedHistory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history.jsonl")
	if err := os.WriteFile(path, []byte(`{"index":0,"type":"ok","f":"acquire","process":0,"time":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckRun(Run{Dir: dir, History: path}, models.Config{Kind: models.Mutex}); err == nil {
		t.Fatal("a completion without invoke was accepted")
	}
}

func TestLockChecksAreAdvisoryWhenDataIsChecked(t *testing.T) {
	lockBad := Check{Key: "l0", Verdict: models.Invalid, Checker: "holds"}
	counterOK := Check{Key: "counter", Verdict: models.Valid, Checker: "register+final-value"}
	counterBad := Check{Key: "counter", Verdict: models.Invalid, Checker: "register"}
	liveBad := Check{Key: LivenessKey, Verdict: models.Invalid, Checker: "final phase"}
	lockUnfenced := Check{Key: "l0", Verdict: models.Invalid, Checker: "holds", Cause: &cause.Finding{Class: cause.Unfenced}}
	lockBug := Check{Key: "l0", Verdict: models.Invalid, Checker: "holds", Cause: &cause.Finding{Class: cause.RecipeBug}}
	cases := []struct {
		name   string
		checks []Check
		want   models.Verdict
	}{
		{"lock alone decides", []Check{lockBad}, models.Invalid},
		{"fenced data stays right", []Check{lockBad, counterOK}, models.Valid},
		{"lost update", []Check{lockBad, counterBad}, models.Invalid},
		{"liveness is never advisory", []Check{lockBad, counterOK, liveBad}, models.Invalid},
		{"an honest overlap beside fenced data", []Check{lockUnfenced, counterOK}, models.Valid},
		{"a recipe bug is never advisory", []Check{lockBug, counterOK}, models.Invalid},
	}
	for _, c := range cases {
		checks, v := Verdict(append([]Check(nil), c.checks...))
		if v != c.want {
			t.Errorf("%s: verdict %s, want %s", c.name, v, c.want)
		}
		for _, ch := range checks {
			if ch.Advisory && (ch.Key != "l0" || ch.Cause != nil && ch.Cause.Class == cause.RecipeBug) {
				t.Errorf("%s: %s marked advisory", c.name, ch.Key)
			}
		}
	}
}

// TestSteadyCyclesPerSecond counts releases from the moment every first worker asked
// for the lock to the end of the workload time, and nothing when that is unknown.
func TestSteadyCyclesPerSecond(t *testing.T) {
	const s = int64(1e9)
	h := histories.History{
		op(histories.Invoke, "acquire", 0, 0), op(histories.OK, "acquire", 0, s/10),
		op(histories.Invoke, "release", 0, s/5), op(histories.OK, "release", 0, s/4), // before process 1 is ready
		op(histories.Invoke, "acquire", 1, s), op(histories.OK, "acquire", 1, s+1),
		op(histories.Invoke, "release", 1, 2*s), op(histories.OK, "release", 1, 2*s+1),
		op(histories.Invoke, "acquire", 0, 3*s), op(histories.OK, "acquire", 0, 3*s+1),
		op(histories.Invoke, "release", 0, 4*s), op(histories.OK, "release", 0, 4*s+1),
		op(histories.Invoke, "acquire", 2, 5*s), op(histories.OK, "acquire", 2, 5*s+1), // a replacement process
		op(histories.Invoke, "release", 2, 6*s), op(histories.OK, "release", 2, 6*s+1), // after the workload time
	}
	for _, tc := range []struct {
		name     string
		workers  int
		workload time.Duration
		want     float64
	}{
		{"two slots, 5 s", 2, 5 * time.Second, 0.5}, // 2 releases in [1 s, 5 s]
		{"two slots, 7 s", 2, 7 * time.Second, 0.5}, // 3 releases in [1 s, 7 s]
		{"a slot never asked", 4, 5 * time.Second, 0},
		{"unknown workers", 0, 5 * time.Second, 0},
		{"workload over before ready", 2, time.Second / 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SteadyCyclesPerSecond(h, tc.workers, tc.workload); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestARecipeBugBesideFencedDataIsInvalid: a recorded round of explore on
// mutant-pg-table-delete-by-name (testdata/histories/README.md): the fenced counter
// stayed right, but a resumed holder's DELETE by name removed the next holder's row
// and a third was granted while it held. The run is invalid by a recipe bug; the lock
// check is not advisory.
func TestARecipeBugBesideFencedDataIsInvalid(t *testing.T) {
	dir, path := copyToRunDir(t, filepath.Join("..", "testdata", "histories", "mutant-pg-table-delete-by-name-paused.jsonl"))
	res, err := CheckRun(Run{Dir: dir, History: path, Test: "t", Cause: cause.Params{SessionTimeout: 2 * time.Second}}, models.Config{Kind: models.Mutex})
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != models.Invalid {
		t.Errorf("verdict %s, want invalid", res.Verdict)
	}
	for _, c := range res.Checks {
		if c.Key == "l0" && (c.Advisory || c.Cause == nil || c.Cause.Class != cause.RecipeBug) {
			t.Errorf("lock check: advisory %v, cause %+v; want a recipe bug deciding the verdict", c.Advisory, c.Cause)
		}
		if c.Key == "counter" && c.Verdict != models.Valid {
			t.Errorf("counter: %s, want valid (fencing kept it)", c.Verdict)
		}
	}
}
