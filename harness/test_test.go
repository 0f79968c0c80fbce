package harness

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/rundir"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestResolveCompletesTheRecipesSide: the workload a run names none of, the checks a
// recipe of the catalogue must pass, its worker command, and the seed.
func TestResolveCompletesTheRecipesSide(t *testing.T) {
	ctx := context.Background()
	self := WorkerSetup{Self: "/bin/zlockcheck"}
	for _, c := range []struct {
		name     string
		cfg      Config
		wantKind workloads.Kind
		wantArgv []string
		wantErr  string
	}{
		{"the recipe's first kind", Config{Recipe: "gozk", Worker: self}, workloads.Mutex, []string{"/bin/zlockcheck", "worker", "--recipe", "gozk"}, ""},
		{"fenced is a counter", Config{Recipe: "gozk", Worker: self, Workload: workloads.Config{Fenced: true}}, workloads.Counter, nil, ""},
		{"exec brings its command", Config{Recipe: "exec", WorkerArgv: []string{"w"}}, workloads.Mutex, []string{"w"}, ""},
		{"a given command is kept", Config{Recipe: "gozk", WorkerArgv: []string{"w"}}, workloads.Mutex, []string{"w"}, ""},
		{"a profiled Go worker", Config{Recipe: "zlc-mutex", Worker: WorkerSetup{Self: "z", CPUProfileDir: t.TempDir()}}, workloads.Mutex, nil, ""},
		{"a mutant needs allowing", Config{Recipe: "mutant-off-by-one", Worker: self}, "", nil, "deliberately broken mutant"},
		{"an allowed mutant", Config{Recipe: "mutant-off-by-one", Worker: WorkerSetup{Self: "z", AllowMutants: true}}, workloads.Mutex, nil, ""},
		{"a workload the recipe does not do", Config{Recipe: "gozk", Worker: self, Workload: workloads.Config{Kind: workloads.Semaphore}}, "", nil, "does not do"},
		{"an unknown recipe", Config{Recipe: "paxos-lock", Worker: self}, "", nil, "unknown recipe"},
		{"a Go recipe without the binary", Config{Recipe: "gozk"}, "", nil, "no zlockcheck binary"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.cfg.Resolve(ctx)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Workload.Kind != c.wantKind || got.Seed == 0 || len(got.WorkerArgv) == 0 {
				t.Errorf("kind %s, seed %d, argv %v; want %s, a seed, a command", got.Workload.Kind, got.Seed, got.WorkerArgv, c.wantKind)
			}
			if c.wantArgv != nil && !slices.Equal(got.WorkerArgv, c.wantArgv) {
				t.Errorf("argv %v, want %v", got.WorkerArgv, c.wantArgv)
			}
			if c.cfg.Worker.CPUProfileDir != "" && !slices.Contains(got.WorkerArgv, "--cpuprofile") {
				t.Errorf("argv %v lacks the profile", got.WorkerArgv)
			}
		})
	}
}

// TestRecipeVersionNamesTheLibrary: results.json's recipe_version. A module's
// version (gozk's go-zookeeper) is only in a main binary's build information: the
// CLI's tests look at it (cmd/zlockcheck).
func TestRecipeVersionNamesTheLibrary(t *testing.T) {
	for _, name := range []string{"zlc-mutex", "mutant-off-by-one"} {
		if got := recipeVersion(name, nil); !strings.HasPrefix(got, "zlockcheck ") {
			t.Errorf("recipeVersion(%q) = %q, want it to start with %q", name, got, "zlockcheck ")
		}
	}
	if got := recipeVersion("exec", nil); got != "" {
		t.Errorf("recipeVersion(exec) = %q, want empty (unknown)", got)
	}
}

// TestConfigJSONSaysHowTheRunIsJudged: Defaults fills the check from the workload,
// config.json records it, and a stored run is judged by it.
func TestConfigJSONSaysHowTheRunIsJudged(t *testing.T) {
	cfg := Config{Recipe: "exec", WorkerArgv: []string{"w"}, Workload: workloads.Config{Kind: workloads.Semaphore, Permits: 3}}
	cfg.Check.Timeout = time.Minute
	cfg = cfg.Defaults()
	want := models.Config{Kind: models.Semaphore, Permits: 3, Timeout: time.Minute}
	if cfg.Check != want {
		t.Fatalf("check %+v, want %+v", cfg.Check, want)
	}
	data, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"check":{"kind":"semaphore","permits":3,"timeout_ns":60000000000}`) {
		t.Errorf("config.json lacks the check: %s", data)
	}
	old := Config{Workload: workloads.Config{Kind: workloads.Mutex}} // before config.json recorded it
	if got, ok := (StoredRun{Config: &old}).Check(); !ok || got.Kind != models.Mutex || got.Timeout != models.DefaultTimeout {
		t.Errorf("an old run's check %+v, %v: want its workload's model", got, ok)
	}
	if _, ok := (StoredRun{}).Check(); ok {
		t.Error("a run directory that says nothing says how it is judged")
	}
}

// Two processes hold the lock at once: invalid for a mutex, valid for a semaphore of
// two permits.
const twoHolders = `{"index":0,"type":"invoke","f":"acquire","process":0,"time":10}
{"index":1,"type":"ok","f":"acquire","process":0,"time":20}
{"index":2,"type":"invoke","f":"acquire","process":1,"time":25}
{"index":3,"type":"ok","f":"acquire","process":1,"time":27}
`

// TestRecheckJudgesAStoredRunByItsConfig: a stored run is checked again with the
// check its config.json records, and its report rewritten.
func TestRecheckJudgesAStoredRunByItsConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{Name: "t", Recipe: "exec", WorkerArgv: []string{"w"}, Workload: workloads.Config{Kind: workloads.Mutex},
		Check: models.Config{Kind: models.Semaphore, Permits: 2}}
	if err := rundir.Dir(dir).WriteJSON(rundir.Config, cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, rundir.History), []byte(twoHolders), 0o644); err != nil {
		t.Fatal(err)
	}
	sr, err := OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	model, ok := sr.Check()
	if !ok {
		t.Fatal("the run does not say how it is judged")
	}
	res, err := sr.Recheck(model)
	if err != nil || res.Verdict != models.Valid || res.Model != models.Semaphore {
		t.Fatalf("verdict %s by %s, %v: want valid by the recorded semaphore", res.Verdict, res.Model, err)
	}
	if !rundir.Dir(dir).Has(rundir.Results) {
		t.Error("results.json was not written")
	}
}

func TestKeepFailedRemovesAValidRun(t *testing.T) {
	store := t.TempDir()
	d, err := rundir.Create(store, "t", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	tr := TestResult{Config: Config{Store: store, Name: "t"}}
	tr.Results.Dir, tr.Results.Verdict = d.Path(), models.Invalid
	if err := tr.keep(KeepFailed); err != nil || tr.Removed {
		t.Fatalf("an invalid run: removed %v, %v; want it kept", tr.Removed, err)
	}
	tr.Results.Verdict = models.Valid
	if err := tr.keep(KeepAll); err != nil || tr.Removed {
		t.Fatalf("keep all: removed %v, %v; want it kept", tr.Removed, err)
	}
	if err := tr.keep(KeepFailed); err != nil || !tr.Removed {
		t.Fatalf("keep failed: removed %v, %v; want it removed", tr.Removed, err)
	}
	if _, err := os.Stat(d.Path()); !os.IsNotExist(err) {
		t.Errorf("%s is still there: %v", d.Path(), err)
	}
	if _, err := ParseKeep("some"); err == nil {
		t.Error("ParseKeep accepted some")
	}
}

func TestWithSetupReplacesTheFaults(t *testing.T) {
	base := Config{Nemesis: []nemesis.Class{nemesis.ClassKill}, NemesisInterval: time.Second}
	s := nemesis.Setups()[2]
	c := base.WithSetup(s)
	if !slices.Equal(c.Nemesis, s.Classes) || !slices.Equal(c.ClientTargets, s.ClientTargets) || c.NemesisInterval != time.Second {
		t.Errorf("with %s: %+v", s.Name, c)
	}
	if c = base.WithSetup(nemesis.Setup{Interval: 3 * time.Second}); c.Nemesis != nil || c.NemesisInterval != 3*time.Second {
		t.Errorf("a fault-free setup with an interval: %v, %s", c.Nemesis, c.NemesisInterval)
	}
}
