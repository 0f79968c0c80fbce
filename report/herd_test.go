package report

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// TestCheckRunReportsHerd: a run directory with herd.jsonl (here the samples recorded
// from a real run of mutant-herd) gets a herd record in results.json, the summary and
// junit.xml; one without has none; a broken herd.jsonl is a warning naming file and
// line, not an error.
func TestCheckRunReportsHerd(t *testing.T) {
	h := histories.History{
		op(histories.Invoke, "acquire", 0, 0), op(histories.OK, "acquire", 0, 1),
		op(histories.Invoke, "release", 0, 2), op(histories.OK, "release", 0, 3),
	}
	dir, path := writeHistory(t, h)
	res, err := CheckRun(Run{Dir: dir, History: path, Test: "t"}, models.Config{Kind: models.Mutex})
	if err != nil || res.Herd != nil {
		t.Fatalf("without herd.jsonl: herd %+v, err %v; want none", res.Herd, err)
	}
	samples, err := os.ReadFile(filepath.Join("..", "models", "herd", "testdata", "mutant-herd.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.Herd), samples, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = CheckRun(Run{Dir: dir, History: path, Test: "t"}, models.Config{Kind: models.Mutex})
	if err != nil {
		t.Fatal(err)
	}
	if res.Herd == nil || res.Herd.Verdict != herd.Herd || res.Verdict != models.Valid || res.Files["herd"] != rundir.Herd {
		t.Fatalf("herd %+v, verdict %s, files %v; want the herd flagged, the run valid", res.Herd, res.Verdict, res.Files)
	}
	var onDisk Results
	if err := rundir.Dir(dir).ReadResults(&onDisk); err != nil || onDisk.Herd == nil || onDisk.Herd.Line != res.Herd.Line {
		t.Errorf("results.json: herd %+v (%v), want %q", onDisk.Herd, err, res.Herd.Line)
	}
	var b bytes.Buffer
	Summary(&b, res)
	if !strings.Contains(b.String(), res.Herd.Line+"\n") || !strings.Contains(b.String(), "reads and") {
		t.Errorf("summary lacks the herd line and figures:\n%s", b.String())
	}
	junit, err := os.ReadFile(filepath.Join(dir, rundir.JUnit))
	if err != nil || !strings.Contains(string(junit), `<property name="herd" value="herd: `) {
		t.Errorf("junit.xml lacks the herd property (%v)", err)
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.Herd), append(samples, "{\"bogus\":1}\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err = CheckRun(Run{Dir: dir, History: path, Test: "t"}, models.Config{Kind: models.Mutex})
	if err != nil || res.Herd != nil || len(res.Warnings) == 0 || !strings.Contains(res.Warnings[0], "herd.jsonl: line 31") {
		t.Errorf("broken herd.jsonl: herd %+v, warnings %q, err %v; want a warning naming the line", res.Herd, res.Warnings, err)
	}
}
