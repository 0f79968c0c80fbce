package harness

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
	"github.com/zlockcheck/zlockcheck/internal/toykind"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// TestAToyKindRunsARealTest: a kind of lock service that only its own package and
// its one registration line know (internal/toykind, a directory of flock'd files)
// runs a real harness.Test: real worker processes in their own namespaces, a client
// fault, a final phase, a check that sees every worker take the lock. Nothing in
// harness, the nemesis, the report or the judges names it.
func TestAToyKindRunsARealTest(t *testing.T) {
	testenv.RequireIntegration(t, testenv.Root, testenv.IPRoute2, testenv.Python3)
	worker, err := filepath.Abs(filepath.Join("..", "conformance", "testdata", "fake_worker.py"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Service: toykind.Name, Recipe: "exec", WorkerArgv: []string{"python3", worker},
		Workers: 3, Duration: 6 * time.Second, Seed: 1, Store: t.TempDir(), SessionTimeout: 2 * time.Second,
		Nemesis: []nemesis.Class{nemesis.ClassClientKill}, NemesisInterval: 2 * time.Second, FinalPhase: true,
	}
	res, err := Test(context.Background(), cfg)
	if err != nil {
		t.Fatalf("the toy kind's run: %v (%+v)", err, res.RunErr)
	}
	r := res.Results
	if r.Verdict != models.Valid || r.Service != string(toykind.Name) || r.ServerVersion != "toy" {
		t.Fatalf("verdict %s on service %q version %q, want valid on %s, toy", r.Verdict, r.Service, r.ServerVersion, toykind.Name)
	}
	t.Logf("%s: %d ops by %d processes, %v", r.Verdict, r.Ops, r.Processes, r.Counts)
	// A history that exercised nothing is no pass: every worker held the lock.
	if ok := r.Counts[histories.FRelease]["ok"]; ok < 20 || r.Processes < 3 {
		t.Errorf("%d releases by %d processes: the run exercised too little", ok, r.Processes)
	}
	if res.Config.Service != toykind.Name || res.Config.Nodes != 1 {
		t.Errorf("config.json: service %q, nodes %d; want %s, 1 (the kind's default)", res.Config.Service, res.Config.Nodes, toykind.Name)
	}
}
