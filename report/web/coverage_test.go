package web

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models/coverage"
)

// TestRunPageCoverage: the run page shows results.json's coverage table, a row at 0
// marked not exercised, and nothing of the kind for a run whose results have none.
func TestRunPageCoverage(t *testing.T) {
	store, _ := fixture(t)
	path := filepath.Join(store, invalidRun, "results.json")
	data, err := os.ReadFile(path)
	must(t, err)
	var results map[string]any
	must(t, json.Unmarshal(data, &results))
	h := histories.History{
		{Type: histories.Invoke, F: "acquire", Process: histories.Client(0), Time: 0},
		{Type: histories.Info, F: "acquire", Process: histories.Client(0), Time: 1},
	}
	results["coverage"] = coverage.Compute(h, coverage.Options{})
	data, err = json.Marshal(results)
	must(t, err)
	must(t, os.WriteFile(path, data, 0o644))

	srv := server(t, store)
	_, body := get(t, srv, "/run/"+invalidRun+"/")
	for _, s := range []string{
		`<h2 id="coverage">Coverage</h2>`,
		`<tr class="coverage-row" data-row="acquire-info"><td>acquires that ended unknown (info)</td><td class="num">1</td>`,
		`<tr class="coverage-row not-exercised" data-row="client-fault-holding">`,
		"not exercised: the run could not have found a zombie holder",
		`id="nothing-exercised"`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("run page lacks %q", s)
		}
	}
	_, body = get(t, srv, "/run/"+validRun+"/")
	if strings.Contains(body, `id="coverage"`) {
		t.Error("a run without a coverage table shows one")
	}
}
