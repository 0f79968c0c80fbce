package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/models/herd"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// TestHerdFlagsOnlyTheMutant runs each recipe once, briefly, with 6 workers (so that
// several wait at once) and reads results.json's herd record: mutant-herd, whose
// waiters watch the lock node's children, is flagged (and still valid); zlc-mutex,
// go-zookeeper's, Curator's and Kazoo's locks, whose waiters watch their
// predecessor, are not. A run with one worker, where nobody ever waits, says "not
// exercised", not "no herd". `check RUN_DIR` prints the same verdict line from the
// run directory alone. make test runs mutant-herd and zlc-mutex's two runs; the other
// recipes' no-herd runs (the same check, three more controls) are make test-long's.
func TestHerdFlagsOnlyTheMutant(t *testing.T) {
	requireIntegration(t)
	cache := t.TempDir()
	for _, tc := range []struct {
		recipe  string
		workers string
		want    herd.Verdict
		long    bool // make test-long only
	}{
		{"mutant-herd", "6", herd.Herd, false},
		{"zlc-mutex", "6", herd.NoHerd, false},
		{"gozk", "6", herd.NoHerd, true},
		{"curator-mutex", "6", herd.NoHerd, true},
		{"kazoo-lock", "6", herd.NoHerd, true},
		{"zlc-mutex", "1", herd.NotExercised, false},
	} {
		t.Run(tc.recipe+"-"+tc.workers, func(t *testing.T) {
			if tc.long {
				testenv.Long(t, "another recipe's no-herd control; make test keeps mutant-herd flagged and zlc-mutex not")
			} else {
				t.Parallel() // the Go workers' runs side by side (make test's budget); the cache is for Curator's
			}
			store := t.TempDir()
			code, stdout, stderr := zlockcheckEnv(t, []string{"ZLC_CACHE_DIR=" + cache}, "run", "--allow-mutants", "--recipe", tc.recipe, "--workers", tc.workers,
				"--time", "15s", "--seed", "4", "--store", store, "--quiet")
			if code != 0 {
				t.Fatalf("exit %d, want 0 (valid: the herd is not a safety bug)\n%s\n%s", code, stdout, stderr)
			}
			rep := readHerd(t, store)
			if rep.Verdict != tc.want {
				t.Fatalf("herd verdict %q (%s), want %q\n%s", rep.Verdict, rep.Line, tc.want, rep.Figures())
			}
			t.Logf("%s: %s; %s", tc.recipe, rep.Line, rep.Figures())
			if tc.want == herd.Herd {
				if !strings.HasPrefix(rep.Line, "herd: ") || !strings.Contains(rep.Line, "waiters watch /zlc/") {
					t.Errorf("line %q, want \"herd: N of M waiters watch /zlc/...\"", rep.Line)
				}
				code, out, errOut := zlockcheck(t, "check", filepath.Join(store, "latest"))
				if code != 0 || !strings.Contains(out, rep.Line) {
					t.Errorf("check RUN_DIR: exit %d, want 0 and the line %q\n%s\n%s", code, rep.Line, out, errOut)
				}
			}
			assertNothingLeft(t, store)
		})
	}
}

// readHerd reads the herd record of the newest run in store.
func readHerd(t *testing.T, store string) herd.Report {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(store, rundir.Latest, rundir.Results))
	if err != nil {
		t.Fatal(err)
	}
	var res struct {
		Herd *herd.Report `json:"herd"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatal(err)
	}
	if res.Herd == nil {
		t.Fatalf("results.json has no herd record")
	}
	return *res.Herd
}
