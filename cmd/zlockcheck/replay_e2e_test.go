package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayReproducesAMutant: a failing run's directory alone is enough to see and
// reproduce the failure. A mutant run from a config file (--json) is invalid; `check
// RUN_DIR` re-checks it without running anything; its history exported to Jepsen EDN
// checks invalid too; `replay RUN_DIR` runs the same configuration and seed on a fresh
// ensemble and is invalid again.
func TestReplayReproducesAMutant(t *testing.T) {
	requireIntegration(t)
	store := t.TempDir()
	conf := writeFile(t, "mutant.yaml", strings.Join([]string{
		"recipe: mutant-off-by-one", "allow-mutants: true", "think-max: 100ms",
		"time: 10s", "seed: 1", "quiet: true", "store: " + store, ""}, "\n"))
	code, stdout, stderr := zlockcheck(t, "run", "-f", conf, "--json")
	if code != exitInvalid {
		t.Fatalf("run: exit %d, want %d\n%s\n%s", code, exitInvalid, stdout, stderr)
	}
	var res struct {
		Verdict string `json:"verdict"`
		Dir     string `json:"dir"`
		Seed    int64  `json:"seed"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("--json: stdout is not the results JSON: %v\n%s", err, stdout)
	}
	if res.Verdict != "invalid" || res.Seed != 1 || res.Dir == "" {
		t.Fatalf("--json results: %+v", res)
	}
	assertNothingLeft(t, store)

	code, stdout, stderr = zlockcheck(t, "check", res.Dir)
	if code != exitInvalid || !strings.Contains(stdout, "key l0: invalid") {
		t.Errorf("check RUN_DIR: exit %d, want %d\n%s\n%s", code, exitInvalid, stdout, stderr)
	}
	edn := filepath.Join(t.TempDir(), "history.edn")
	if code, _, stderr = zlockcheck(t, "export", "--format", "edn", "-o", edn, res.Dir); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	if code, stdout, stderr = zlockcheck(t, "check", edn); code != exitInvalid {
		t.Errorf("check of the exported EDN: exit %d, want %d\n%s\n%s", code, exitInvalid, stdout, stderr)
	}

	replays := t.TempDir()
	code, stdout, stderr = zlockcheck(t, "replay", "--quiet", "--store", replays, res.Dir)
	if code != exitInvalid {
		t.Fatalf("replay: exit %d, want %d (invalid again)\n%s\n%s", code, exitInvalid, stdout, stderr)
	}
	again := readResults(t, replays)
	if again["seed"].(float64) != 1 || again["recipe"] != "mutant-off-by-one" {
		t.Errorf("the replay ran seed %v of %v, want seed 1 of mutant-off-by-one", again["seed"], again["recipe"])
	}
	orig, err := os.ReadFile(filepath.Join(res.Dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	replayed, err := os.ReadFile(filepath.Join(replays, "latest", "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strip(t, orig) != strip(t, replayed) {
		t.Errorf("the replay's config differs beyond run id and store:\n%s\nvs\n%s", orig, replayed)
	}
	assertNothingLeft(t, replays)
}

// strip returns a config.json without the fields a replay changes (run id, store).
func strip(t *testing.T, data []byte) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "run_id")
	delete(m, "store")
	out, _ := json.Marshal(m)
	return string(out)
}

// Bad input: a run directory whose config.json is broken names the file, line and field.
func TestReplayOfABrokenRunDirNamesFileAndLine(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{\n  \"recipe\": \"gozk\",\n  \"nodez\": 3\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := zlockcheck(t, "replay", dir)
	if code != exitError || !strings.Contains(stderr, filepath.Join(dir, "config.json")) || !strings.Contains(stderr, `"nodez"`) || !strings.Contains(stderr, "line 3") {
		t.Errorf("exit %d, stderr %q: want exit %d naming the file, line 3 and the field", code, stderr, exitError)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{\n  \"recipe\": \"gozk\",\n  \"nodes\": \"three\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = zlockcheck(t, "check", dir)
	if code != exitError || !strings.Contains(stderr, "line 3") {
		t.Errorf("exit %d, stderr %q: want exit %d naming line 3", code, stderr, exitError)
	}
}
