package suite

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/toykind"
	"github.com/zlockcheck/zlockcheck/lockservice"
	_ "github.com/zlockcheck/zlockcheck/lockservice/builtin"
	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

func TestRunsAreTheProduct(t *testing.T) {
	runs := Spec{Recipes: []string{"gozk", "redis-lock"}, Nemesis: []string{"none", "kill,pause"}, Seeds: []int64{1, 2, 3}}.Runs()
	if len(runs) != 12 || runs[11] != (Run{Recipe: "redis-lock", Nemesis: "kill,pause", Seed: 3}) || runs[0] != (Run{Recipe: "gozk", Nemesis: "none", Seed: 1}) {
		t.Errorf("runs %+v", runs)
	}
	if got := (Spec{}).Runs(); len(got) != 1 || got[0] != (Run{}) {
		t.Errorf("an empty suite: %+v, want the base alone", got)
	}
}

// TestEachRunOnItsRecipesService: a suite's run takes its recipe's service and that
// kind's settings among those given, its own faults and seed; what cannot be made is
// an error naming the field.
func TestEachRunOnItsRecipesService(t *testing.T) {
	replicas := redis.RedisSettings{Topology: redis.RedisReplicas}
	base := harness.Config{Recipe: "gozk", Seed: 9, Nemesis: []nemesis.Class{nemesis.ClassKill}, Worker: harness.WorkerSetup{Self: "/bin/true"}}
	p := Plan{Base: base, Given: []lockservice.Settings{replicas}}
	for _, c := range []struct {
		run      Run
		service  kind.Name
		settings lockservice.Settings
		faults   string
		seed     int64
	}{
		{Run{}, kind.ZooKeeper, nil, "kill", 9},
		{Run{Recipe: "redis-lock", Nemesis: "failover", Seed: 4}, kind.Redis, replicas, "failover", 4},
		{Run{Recipe: "pg-table", Nemesis: "none"}, kind.Postgres, nil, "none", 9},
	} {
		cfg, err := p.Config(c.run)
		if err != nil || cfg.Service != c.service || cfg.Settings != c.settings || faultsOf(cfg.Nemesis) != c.faults || cfg.Seed != c.seed || cfg.Nodes != 0 {
			t.Errorf("%+v: service %s, settings %+v, faults %s, seed %d, nodes %d (%v)", c.run, cfg.Service, cfg.Settings, faultsOf(cfg.Nemesis), cfg.Seed, cfg.Nodes, err)
		}
		if _, err := cfg.Prepare(context.Background()); err != nil {
			t.Errorf("%+v: the run does not prepare: %v", c.run, err)
		}
	}
	for run, want := range map[Run]string{
		{Recipe: "exec"}:   "recipe exec: needs --worker-cmd",
		{Nemesis: "bogus"}: "nemesis:",
	} {
		if _, err := p.Config(run); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want an error saying %q", run, err, want)
		}
	}
}

// TestASuiteRunsEachRun: a suite of real runs on the toy kind (worker processes in
// their namespaces, a client fault) gives a row per run in order, each with its own
// directory and seed; a run that cannot be made is an error row, and the suite goes
// on; the worst verdict is the suite's.
func TestASuiteRunsEachRun(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.Python3)
	worker, err := filepath.Abs(filepath.Join("..", "..", "conformance", "testdata", "fake_worker.py"))
	if err != nil {
		t.Fatal(err)
	}
	base := harness.Config{
		Service: toykind.Name, Recipe: "exec", WorkerArgv: []string{"python3", worker},
		Workers: 2, Duration: 2 * time.Second, Store: t.TempDir(), SessionTimeout: 2 * time.Second, NemesisInterval: time.Second,
	}
	p := Plan{Base: base, Runs: Spec{Nemesis: []string{"none", "bogus", "client-kill"}, Seeds: []int64{5}}.Runs()}
	rows, worst := p.Run(context.Background(), io.Discard)
	if len(rows) != 3 || worst != models.Error {
		t.Fatalf("%d rows, worst %s; want 3, error", len(rows), worst)
	}
	for i, want := range []models.Verdict{models.Valid, models.Error, models.Valid} {
		r := rows[i]
		if r.Verdict != want || r.Run.Seed != 5 {
			t.Errorf("row %d: %+v, want %s with seed 5", i, r, want)
		}
		if _, err := os.Stat(filepath.Join(r.Dir, "history.jsonl")); (want == models.Valid) != (err == nil) {
			t.Errorf("row %d: directory %q: %v", i, r.Dir, err)
		}
	}
	if rows[1].Note == "" || rows[2].Run.Nemesis != "client-kill" {
		t.Errorf("rows %+v", rows)
	}
}
