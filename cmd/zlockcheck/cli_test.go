package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/maven"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/recipes"
	"github.com/zlockcheck/zlockcheck/recipes/jvm"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const validHistory = `{"index":0,"type":"invoke","f":"acquire","process":0,"time":10}
{"index":1,"type":"ok","f":"acquire","process":0,"time":20}
{"index":2,"type":"invoke","f":"acquire","process":1,"time":25}
{"index":3,"type":"invoke","f":"release","process":0,"time":30}
{"index":4,"type":"ok","f":"release","process":0,"time":40}
{"index":5,"type":"ok","f":"acquire","process":1,"time":50}
`

// Process 1's acquire succeeds while process 0 certainly holds: a double grant.
const doubleGrant = `{"index":0,"type":"invoke","f":"acquire","process":0,"time":10}
{"index":1,"type":"ok","f":"acquire","process":0,"time":20}
{"index":2,"type":"invoke","f":"acquire","process":1,"time":25}
{"index":3,"type":"ok","f":"acquire","process":1,"time":27}
{"index":4,"type":"invoke","f":"release","process":0,"time":30}
{"index":5,"type":"ok","f":"release","process":0,"time":40}
`

// Every acquire timed out: the history exercised nothing, so it has no verdict.
const nothingGranted = `{"index":0,"type":"invoke","f":"acquire","process":0,"time":10}
{"index":1,"type":"fail","f":"acquire","process":0,"time":20,"error":"timeout"}
{"index":2,"type":"info","f":"start","process":"nemesis","time":25,"value":{"fault":"kill","servers":["s1"]}}
`

// The second line has an unknown type: the error must name line 2 and the field.
const malformed = `{"index":0,"type":"invoke","f":"acquire","process":0,"time":10}
{"index":1,"type":"okk","f":"acquire","process":0,"time":20}
{"index":2,"type":"invoke","f":"acquire","process":1,"time":25}
`

func TestCheckExitCodes(t *testing.T) {
	edn, _ := filepath.Abs("../../../shared/testdata/jepsen/knossos-mutex-bad-etcd.edn")
	if _, err := os.Stat(edn); err != nil {
		edn = "testdata/knossos-mutex-bad-etcd.edn"
	}
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantOut  string // in stdout or stderr
	}{
		{"valid mutex", []string{"check", writeFile(t, "ok.jsonl", validHistory)}, exitValid, "VALID"},
		{"double grant", []string{"check", writeFile(t, "bad.jsonl", doubleGrant)}, exitInvalid, "INVALID"},
		{"double grant is fine for 2 permits", []string{"check", "--model", "semaphore", "--permits", "2", writeFile(t, "bad.jsonl", doubleGrant)}, exitValid, "VALID"},
		{"jepsen etcd history", []string{"check", "--model", "knossos-mutex", edn}, exitInvalid, "INVALID"},
		{"stored run dir is reported again", []string{"check", filepath.Dir(writeFile(t, "history.jsonl", doubleGrant))}, exitInvalid, "junit.xml"},
		{"an empty file exercised nothing", []string{"check", writeFile(t, "empty.jsonl", "")}, exitUnknown, "exercised nothing"},
		{"no acquire granted exercised nothing", []string{"check", writeFile(t, "none.jsonl", nothingGranted)}, exitUnknown, "UNKNOWN"},
		{"a run dir that exercised nothing", []string{"check", filepath.Dir(writeFile(t, "history.jsonl", nothingGranted))}, exitUnknown, "exercised nothing"},
		{"check prints the coverage table", []string{"check", writeFile(t, "ok.jsonl", validHistory)}, exitValid, "coverage: what the run exercised"},
		{"malformed line", []string{"check", writeFile(t, "m.jsonl", malformed)}, exitError, "m.jsonl:2"},
		{"missing file", []string{"check", "/nonexistent/history.jsonl"}, exitError, "no such file"},
		{"unknown model", []string{"check", "--model", "paxos", writeFile(t, "ok.jsonl", validHistory)}, exitError, "--model"},
		{"unknown command", []string{"frobnicate"}, exitError, "unknown command"},
		{"no file", []string{"check"}, exitError, "exactly one"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := zlockcheck(t, c.args...)
			if code != c.wantCode {
				t.Errorf("exit %d, want %d\nstdout: %s\nstderr: %s", code, c.wantCode, stdout, stderr)
			}
			if !strings.Contains(stdout+stderr, c.wantOut) {
				t.Errorf("output lacks %q\nstdout: %s\nstderr: %s", c.wantOut, stdout, stderr)
			}
			if strings.Contains(stderr, "panic") {
				t.Errorf("panicked: %s", stderr)
			}
		})
	}
}

// TestRecipeVersionNamesTheLibrary: results.json's recipe_version (the library's
// harness.Test asks the catalogue) names the library a recipe tests; a module's
// version is in the build information of a main binary, such as this test's.
func TestRecipeVersionNamesTheLibrary(t *testing.T) {
	version := func(name string) string {
		r, _ := recipes.Find(name)
		return r.Version()
	}
	for name, prefix := range map[string]string{"gozk": "go-zookeeper v", "zlc-mutex": "zlockcheck ", "mutant-off-by-one": "zlockcheck "} {
		if got := version(name); !strings.HasPrefix(got, prefix) {
			t.Errorf("version of %q = %q, want it to start with %q", name, got, prefix)
		}
	}
	if got := version("exec"); got != "" {
		t.Errorf("version of exec = %q, want empty (unknown)", got)
	}
}

// TestCheckRunDirTakesTheRunsModel: `check RUN_DIR` checks with the run's own model,
// from its config.json's check (a run from before it recorded one: its workload), else
// from its results.json, else from the flags.
func TestCheckRunDirTakesTheRunsModel(t *testing.T) {
	semaphore := `{"recipe": "exec", "worker_argv": ["true"], "workload": {"kind": "semaphore", "permits": 2}}`
	judged := `{"recipe": "exec", "worker_argv": ["true"], "workload": {"kind": "mutex"}, "check": {"kind": "semaphore", "permits": 2}}`
	for _, c := range []struct {
		name, config, results string
		flags                 []string
		want                  int
	}{
		{"config.json's check says how the run is judged", judged, `{"model": "mutex"}`, []string{"--model", "mutex"}, exitValid},
		{"config.json's workload wins over the flags", semaphore, "", []string{"--model", "mutex"}, exitValid},
		{"config.json's workload wins over results.json", semaphore, `{"model": "mutex"}`, nil, exitValid},
		{"results.json's model wins over the flags", "", `{"model": "semaphore", "permits": 2}`, []string{"--model", "mutex"}, exitValid},
		{"the flags when the run says nothing", "", "", []string{"--model", "semaphore", "--permits", "2"}, exitValid},
		{"the default model when nobody says", "", "", nil, exitInvalid},
		{"a bad flag matters only when used", "", `{"model": "mutex"}`, []string{"--model", "paxos"}, exitInvalid},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Dir(writeFile(t, "history.jsonl", doubleGrant))
			for name, data := range map[string]string{"config.json": c.config, "results.json": c.results} {
				if data != "" {
					if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			code, stdout, stderr := zlockcheck(t, append(append([]string{"check"}, c.flags...), dir)...)
			if code != c.want || !strings.Contains(stdout, "junit.xml") {
				t.Errorf("exit %d, want %d with the report rewritten\nstdout: %s\nstderr: %s", code, c.want, stdout, stderr)
			}
		})
	}
}

// recipesDoc is the page (linked from the README) whose recipes table is the catalogue.
const recipesDoc = "docs/recipes.md"

// TestREADMEListsTheCatalogue: the recipes table of docs/recipes.md is `zlockcheck
// recipes --markdown`, rendered from the one catalogue (package recipes).
func TestREADMEListsTheCatalogue(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", recipesDoc))
	if err != nil {
		t.Fatal(err)
	}
	code, table, stderr := zlockcheck(t, "recipes", "--markdown")
	if code != 0 || table != recipesMarkdown(false) {
		t.Fatalf("recipes --markdown: exit %d, %s", code, stderr)
	}
	if !strings.Contains(string(doc), table) {
		t.Errorf("%s lacks the catalogue's table; paste in the output of `zlockcheck recipes --markdown`:\n%s", recipesDoc, table)
	}
}

// mdLink is a Markdown link's target: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// TestREADMELinksEveryDocsPage: the README is the map of docs/: every page there is
// linked from it, and every relative link of the README and the pages leads to a
// file that exists (anchors are not checked).
func TestREADMELinksEveryDocsPage(t *testing.T) {
	root := filepath.Join("..", "..")
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, m := range mdLink.FindAllStringSubmatch(string(readme), -1) {
		target, _, _ := strings.Cut(m[1], "#")
		linked[filepath.Clean(target)] = true
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	for _, page := range pages {
		rel := filepath.Join("docs", filepath.Base(page))
		if !linked[rel] {
			t.Errorf("README.md does not link %s", rel)
		}
	}
	for _, file := range append([]string{filepath.Join(root, "README.md")}, pages...) {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(text), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(file), target)); err != nil {
				t.Errorf("%s links %s: %v", file, m[1], err)
			}
		}
	}
}

// TestFetch: fetch takes no arguments, and a --zk-version the manifest does not pin
// is refused before anything starts, naming the flag and the releases it takes.
// (A second fetch runs no Maven: internal/maven's TestFetchedOnceRunsNoMaven.)
func TestFetch(t *testing.T) {
	var out, errb strings.Builder
	if code := realMain([]string{"fetch", "extra"}, &out, &errb); code != exitError || !strings.Contains(errb.String(), "fetch takes no arguments") {
		t.Errorf("fetch extra: exit %d, %s", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := realMain([]string{"run", "--zk-version", "3.4.6", "--time", "1s"}, &out, &errb); code != exitError || !strings.Contains(errb.String(), `zk-version: want one of 3.8.6, 3.9.5`) {
		t.Errorf("run --zk-version 3.4.6: exit %d, %s", code, errb.String())
	}
	// What fetch fetches is pinned to the jar: each manifest's lock file lists the
	// jars of every profile, with their hashes.
	for _, m := range []maven.Manifest{zookeeper.ReleasesManifest(), jvm.Manifest()} {
		if err := m.CheckLock(); err != nil {
			t.Error(err)
		}
	}
}
