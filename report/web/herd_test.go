package web

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/models/herd"
)

// TestRunPageHerd: the run page shows results.json's herd record, its verdict line
// and figures, and nothing of the kind for a run whose results have none.
func TestRunPageHerd(t *testing.T) {
	store, _ := fixture(t)
	path := filepath.Join(store, invalidRun, "results.json")
	data, err := os.ReadFile(path)
	must(t, err)
	var results map[string]any
	must(t, json.Unmarshal(data, &results))
	results["herd"] = herd.Report{Verdict: herd.Herd, Line: "herd: 5 of 5 waiters watch /zlc/ab/l0", Lock: "/zlc/ab/l0", ReadsPerGrant: 12.5}
	data, err = json.Marshal(results)
	must(t, err)
	must(t, os.WriteFile(path, data, 0o644))

	srv := server(t, store)
	_, body := get(t, srv, "/run/"+invalidRun+"/")
	for _, s := range []string{
		`<h2 id="herd">Herd effect</h2>`,
		`<p class="herd-verdict" data-verdict="herd"><b>herd: 5 of 5 waiters watch /zlc/ab/l0</b></p>`,
		"12.5 reads and",
	} {
		if !strings.Contains(body, s) {
			t.Errorf("run page lacks %q", s)
		}
	}
	_, body = get(t, srv, "/run/"+validRun+"/")
	if strings.Contains(body, `id="herd"`) {
		t.Error("a run without a herd record shows one")
	}
}
