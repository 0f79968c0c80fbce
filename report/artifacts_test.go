package report

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/report/plots"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// copyToRunDir copies the history file src into a fresh run directory, returning
// the directory and the copy's path.
func copyToRunDir(t *testing.T, src string) (dir, path string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	path = filepath.Join(dir, "history.jsonl")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// fixtureRun copies testdata/NAME.jsonl into a fresh run directory and checks it.
func fixtureRun(t *testing.T, name string) (Results, histories.History) {
	t.Helper()
	dir, path := copyToRunDir(t, filepath.Join("testdata", name+".jsonl"))
	h, _, err := histories.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	res, err := CheckRun(Run{Dir: dir, History: path, Test: "fixture-" + name, Recipe: "gen", Elapsed: 20 * time.Second}, models.Config{Kind: models.Mutex})
	if err != nil {
		t.Fatal(err)
	}
	return res, h
}

func TestRunArtifacts(t *testing.T) {
	for _, c := range []struct {
		name string
		want models.Verdict
	}{{"valid", models.Valid}, {"invalid", models.Invalid}} {
		t.Run(c.name, func(t *testing.T) {
			res, h := fixtureRun(t, c.name)
			if res.Verdict != c.want {
				t.Fatalf("verdict %s, want %s", res.Verdict, c.want)
			}
			var onDisk Results
			data, err := os.ReadFile(filepath.Join(res.Dir, "results.json"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(data, &onDisk); err != nil {
				t.Fatal(err)
			}
			minSize := map[string]int64{"history": 1000, "results": 200, "timeline": 5000, "latency": 10000,
				"rate": 10000, "junit": 300, "nemesis": 300}
			if c.want == models.Invalid {
				minSize["linearizability"] = 1000
			}
			for key, least := range minSize {
				file, ok := onDisk.Files[key]
				if !ok {
					t.Errorf("results.json files lack %q: %v", key, onDisk.Files)
					continue
				}
				st, err := os.Stat(filepath.Join(res.Dir, file))
				if err != nil {
					t.Errorf("%s: %v", key, err)
				} else if st.Size() < least {
					t.Errorf("%s is %d bytes, want at least %d", file, st.Size(), least)
				}
			}
			for _, pic := range []string{"latency.png", "rate.png"} {
				f, err := os.Open(filepath.Join(res.Dir, pic))
				if err != nil {
					t.Fatal(err)
				}
				img, err := png.Decode(f)
				f.Close()
				if err != nil {
					t.Fatalf("%s: %v", pic, err)
				}
				if b := img.Bounds(); b.Dx() != plots.Width || b.Dy() != plots.Height {
					t.Errorf("%s is %dx%d, want %dx%d", pic, b.Dx(), b.Dy(), plots.Width, plots.Height)
				}
			}
			checkNemesisFile(t, filepath.Join(res.Dir, "nemesis.jsonl"), h)
			checkJUnitFile(t, filepath.Join(res.Dir, "junit.xml"), res)
			checkTimelineFile(t, filepath.Join(res.Dir, "timeline.html"), h, c.want == models.Invalid)
		})
	}
}

func checkNemesisFile(t *testing.T, path string, h histories.History) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []int64
	for _, op := range h {
		if op.Process.Nemesis {
			want = append(want, op.Index)
		}
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != len(want) || len(want) == 0 {
		t.Fatalf("nemesis.jsonl has %d lines, the history %d nemesis ops", len(lines), len(want))
	}
	for i, line := range lines {
		var op histories.Op
		if err := json.Unmarshal([]byte(line), &op); err != nil {
			t.Fatalf("nemesis.jsonl line %d: %v", i+1, err)
		}
		if !op.Process.Nemesis || op.Index != want[i] || op.F == "" {
			t.Errorf("nemesis.jsonl line %d is %+v, want the nemesis op at index %d", i+1, op, want[i])
		}
	}
}

// junitDoc is junit.xml as a CI reads it, declared apart from the writer's types.
type junitDoc struct {
	XMLName xml.Name `xml:"testsuites"`
	Tests   int      `xml:"tests,attr"`
	Suites  []struct {
		Name     string  `xml:"name,attr"`
		Tests    int     `xml:"tests,attr"`
		Failures int     `xml:"failures,attr"`
		Errors   int     `xml:"errors,attr"`
		Time     float64 `xml:"time,attr"`
		Props    []struct {
			Name  string `xml:"name,attr"`
			Value string `xml:"value,attr"`
		} `xml:"properties>property"`
		Cases []struct {
			Name      string  `xml:"name,attr"`
			Classname string  `xml:"classname,attr"`
			Time      float64 `xml:"time,attr"`
			Failure   []struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Text    string `xml:",chardata"`
			} `xml:"failure"`
			Error []struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func parseJUnit(t *testing.T, data []byte) junitDoc {
	t.Helper()
	var doc junitDoc
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("junit.xml does not parse: %v\n%s", err, data)
	}
	if len(doc.Suites) != 1 {
		t.Fatalf("junit.xml has %d suites, want 1", len(doc.Suites))
	}
	return doc
}

func checkJUnitFile(t *testing.T, path string, res Results) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc := parseJUnit(t, data)
	s := doc.Suites[0]
	if s.Name != res.Test {
		t.Errorf("suite named %q, want the test's name %q", s.Name, res.Test)
	}
	if s.Tests != len(res.Checks) || len(s.Cases) != len(res.Checks) || doc.Tests != s.Tests {
		t.Errorf("suite has tests=%d and %d cases (root %d), want one per check: %d", s.Tests, len(s.Cases), doc.Tests, len(res.Checks))
	}
	props := map[string]string{}
	for _, p := range s.Props {
		props[p.Name] = p.Value
	}
	if props["recipe"] != "gen" || props["verdict"] != string(res.Verdict) {
		t.Errorf("properties %v lack the recipe or verdict", props)
	}
	failures := 0
	for i, tc := range s.Cases {
		if tc.Time < 0 || tc.Classname == "" {
			t.Errorf("case %q: time %v classname %q", tc.Name, tc.Time, tc.Classname)
		}
		failures += len(tc.Failure)
		c := res.Checks[i]
		if !strings.HasPrefix(tc.Name, c.Key) {
			t.Errorf("case %d named %q, want it named after key %q", i, tc.Name, c.Key)
		}
		if c.Verdict == models.Invalid {
			if len(tc.Failure) != 1 || tc.Failure[0].Message != c.Witness || !strings.Contains(tc.Failure[0].Text, c.Witness) {
				t.Errorf("invalid check %q: failures %+v, want one whose message is the witness %q", c.Key, tc.Failure, c.Witness)
			}
		}
	}
	want := 0
	if res.Verdict == models.Invalid {
		want = 1
	}
	if failures != want || s.Failures != want {
		t.Errorf("%d failure elements, failures=%d, want %d", failures, s.Failures, want)
	}
	if want == 1 && !strings.Contains(string(data), "2 holders at once") {
		t.Error("junit.xml lacks the witness of the double grant")
	}
}

func checkTimelineFile(t *testing.T, path string, h histories.History, invalid bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	page := string(data)
	want := map[string]int{"total": len(h)}
	for _, op := range h {
		if op.Process.Nemesis {
			want["nemesis"]++
			continue
		}
		want["client"]++
		want[string(op.Type)]++
	}
	counts, _ := Count(h)
	for f, m := range counts {
		for _, typ := range []string{"invoke", "ok", "fail", "info"} {
			want[f+" "+typ] = m[typ]
		}
	}
	for _, k := range []string{"total", "client", "nemesis", "invoke", "ok", "fail", "info", "acquire ok", "release info"} {
		if _, ok := want[k]; !ok {
			want[k] = 0
		}
	}
	for k, n := range want {
		if s := fmt.Sprintf(`data-count="%s">%d<`, k, n); !strings.Contains(page, s) {
			t.Errorf("timeline does not state %s = %d (%s)", k, n, s)
		}
	}
	for _, label := range []string{"partition isolate-leader", "pause one (never stopped)"} {
		if !strings.Contains(page, label) {
			t.Errorf("timeline lacks the fault %q", label)
		}
	}
	highlighted := strings.Contains(page, `class="violation"`) && !strings.Contains(page, `"violations":[]`)
	if highlighted != invalid || strings.Contains(page, `id="no-violation"`) == invalid {
		t.Errorf("violation highlighted = %v, want %v", highlighted, invalid)
	}
	if invalid && !strings.Contains(page, "first violation at 11.116013s") {
		t.Error("timeline does not give the first violation's time")
	}
	if strings.Count(page, "<rect") > 0 || strings.Count(page, "<div") > 20 {
		t.Error("timeline draws ops as DOM nodes")
	}
}

func TestJUnitOutcomes(t *testing.T) {
	r := Results{Test: "t", Recipe: "r", CheckSeconds: 2, Verdict: models.Invalid, SetupError: "ensemble never came up", Checks: []Check{
		{Key: "a", Verdict: models.Valid, Checker: "holds", Ops: 10},
		{Key: "b", Verdict: models.Invalid, Checker: "holds", Ops: 30, Witness: "two <holders> & more"},
		{Key: "c", Verdict: models.Unknown, Checker: "porcupine", Ops: 60, Witness: "timed out"},
		{Key: "d", Verdict: models.Invalid, Checker: "holds", Ops: 100, Witness: "overlap", Advisory: true},
		{Key: LivenessKey, Verdict: models.Valid, Checker: "final phase", Ops: 5},
	}}
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r, time.Unix(0, 0)); err != nil {
		t.Fatal(err)
	}
	s := parseJUnit(t, buf.Bytes()).Suites[0]
	if s.Tests != 6 || s.Failures != 1 || s.Errors != 2 {
		t.Fatalf("tests=%d failures=%d errors=%d, want 6, 1, 2:\n%s", s.Tests, s.Failures, s.Errors, buf.String())
	}
	if m := s.Cases[1].Failure; len(m) != 1 || m[0].Message != "two <holders> & more" {
		t.Errorf("failure of b: %+v", m)
	}
	if len(s.Cases[2].Error) != 1 || len(s.Cases[3].Failure) != 0 || s.Cases[5].Name != "run" || len(s.Cases[5].Error) != 1 {
		t.Errorf("unknown, advisory or setup cases wrong:\n%s", buf.String())
	}
	if got := s.Cases[1].Time; got < 0.29 || got > 0.31 {
		t.Errorf("b's time %v, want its share of the check (0.3)", got)
	}
}

func TestNewRunRechecksFromPreviousResults(t *testing.T) {
	res, _ := fixtureRun(t, "invalid")
	d := rundir.Dir(res.Dir)
	var prev Results
	if err := d.ReadResults(&prev); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{rundir.Timeline, rundir.Latency, rundir.JUnit, rundir.Results} {
		if err := os.Remove(d.File(f)); err != nil {
			t.Fatal(err)
		}
	}
	run := NewRun(d, prev.RunConfig(), prev.Config, prev.Course())
	if run.History != d.File(rundir.History) || run.Test != "fixture-invalid" || run.Recipe != "gen" || run.Elapsed != 20*time.Second {
		t.Errorf("run from the previous results: %+v", run)
	}
	again, err := CheckRun(run, models.Config{Kind: models.Mutex})
	if err != nil {
		t.Fatal(err)
	}
	if again.Verdict != models.Invalid || again.Test != res.Test || again.ElapsedSeconds != res.ElapsedSeconds || again.CyclesPerSecond != res.CyclesPerSecond {
		t.Errorf("checked again: %s, test %q, %.1fs, %.1f/s; first %s, %q, %.1fs, %.1f/s", again.Verdict, again.Test, again.ElapsedSeconds,
			again.CyclesPerSecond, res.Verdict, res.Test, res.ElapsedSeconds, res.CyclesPerSecond)
	}
	for _, f := range []string{rundir.Timeline, rundir.Latency, rundir.JUnit, rundir.Results} {
		if !d.Has(f) {
			t.Errorf("%s not written again", f)
		}
	}
}

// history100k is a generated 100k-line mutex history (50 processes, 5% crashed ops,
// one double grant) with three faults, checked.
func history100k(b *testing.B) (histories.History, models.Result) {
	b.Helper()
	h := models.GenerateMutexHistory(models.GenConfig{Ops: 100000, Processes: 50, CrashRate: 0.05, DoubleGrants: 1, Seed: 1})
	end := h[len(h)-1].Time
	nem := func(f string, at int64, fault string) histories.Op {
		return histories.Op{Type: histories.Info, F: f, Process: histories.NemesisProcess, Time: at,
			Value: json.RawMessage(`{"fault":"` + fault + `","target":"one"}`)}
	}
	faults := histories.History{nem("start", end/5, "partition"), nem("stop", end/3, "partition"),
		nem("start", end/2, "pause"), nem("stop", end*6/10, "pause"), nem("start", end*8/10, "kill")}
	merged := make(histories.History, 0, len(h)+len(faults))
	for _, op := range h {
		for len(faults) > 0 && faults[0].Time <= op.Time {
			merged, faults = append(merged, faults[0]), faults[1:]
		}
		merged = append(merged, op)
	}
	merged = append(merged, faults...)
	for i := range merged {
		merged[i].Index = int64(i)
	}
	res, err := models.Check(merged, models.Config{Kind: models.Mutex})
	if err != nil {
		b.Fatal(err)
	}
	return merged, res
}

func BenchmarkTimeline100k(b *testing.B) {
	h, res := history100k(b)
	var size int
	for b.Loop() {
		var cw countingWriter
		if err := WriteTimeline(&cw, h, res, coverage.Table{}); err != nil {
			b.Fatal(err)
		}
		size = cw.n
	}
	b.ReportMetric(float64(size)/1e6, "MB/page")
}

func BenchmarkPictures100k(b *testing.B) {
	h, _ := history100k(b)
	chart := plots.Chart{Title: "bench", Marks: []plots.Mark{{Seconds: 1, Label: "first violation"}}}
	for b.Loop() {
		if err := plots.Latency(io.Discard, h, chart); err != nil {
			b.Fatal(err)
		}
		if err := plots.Rate(io.Discard, h, chart); err != nil {
			b.Fatal(err)
		}
	}
}

type countingWriter struct{ n int }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

func TestTimelineOfEmptyHistory(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteTimeline(&buf, nil, models.Result{Verdict: models.Valid}, coverage.Table{}); err != nil {
		t.Fatal(err)
	}
	page := buf.String()
	for _, s := range []string{`data-count="total">0<`, `"lanes":[]`, `id="no-violation"`, `No faults injected.`} {
		if !strings.Contains(page, s) {
			t.Errorf("page of an empty history lacks %s", s)
		}
	}
}
