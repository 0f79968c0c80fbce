package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/rundir"
)

// debianVersion is what Debian's ZooKeeper reports: built without its git
// properties, the commit id is a Maven placeholder left unexpanded.
const debianVersion = "3.8.0-${mvngit.commit.id}"

func TestDisplayVersion(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", ""},
		{"   ", ""},
		{"3.8.0", "3.8.0"},
		{"3.9.2", "3.9.2"},
		{" 3.9.2\n", "3.9.2"},
		{debianVersion, "3.8.0"},
		{"3.8.0-${mvngit.commit.id}-${build.number}", "3.8.0"},
		{"3.8.0-", "3.8.0"},               // an empty suffix
		{"3.8.0.${buildNumber}", "3.8.0"}, // another separator
		{"3.8.0-SNAPSHOT", "3.8.0-SNAPSHOT"},
		{"3.8.0-SNAPSHOT-${mvngit.commit.id}", "3.8.0-SNAPSHOT"},
		{"3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c", "3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c"}, // a real commit id stays
		{"3.8.0-abc123", "3.8.0-abc123"},
		{debianVersion + " (existing ensemble, not managed by zlockcheck)", "3.8.0 (existing ensemble, not managed by zlockcheck)"},
		{" (existing ensemble, not managed by zlockcheck)", "(existing ensemble, not managed by zlockcheck)"},
		{"3.8.0-${unclosed", "3.8.0-${unclosed"},
	}
	for _, c := range cases {
		got := DisplayVersion(c.in)
		if got != c.want {
			t.Errorf("DisplayVersion(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := DisplayVersion(got); again != got {
			t.Errorf("DisplayVersion is not idempotent on %q: %q, then %q", c.in, got, again)
		}
	}
}

// recordedRun checks testdata/histories/NAME.jsonl as a run of zkVersion with the
// given timing settings, in a fresh run directory.
func recordedRun(t *testing.T, name, zkVersion string, p cause.Params) Results {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "testdata", "histories", name+".jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, rundir.History)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := CheckRun(Run{Dir: dir, History: path, Test: name, Recipe: "curator-mutex", Seed: 1, Elapsed: 60 * time.Second,
		ServerVersion: zkVersion, RecipeVersion: "Curator 5.4.0-3", Cause: p}, models.Config{Kind: models.Mutex})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// lineIndex returns the index of the first line of lines that contains s, or -1.
func lineIndex(lines []string, s string) int {
	for i, l := range lines {
		if strings.Contains(l, s) {
			return i
		}
	}
	return -1
}

// assertLineOrder: each of want is on a line of out, each after the one before.
func assertLineOrder(t *testing.T, out string, want ...string) {
	t.Helper()
	lines := strings.Split(out, "\n")
	last, lastWant := -1, ""
	for _, w := range want {
		i := lineIndex(lines, w)
		switch {
		case i < 0:
			t.Errorf("no line has %q:\n%s", w, out)
		case i <= last:
			t.Errorf("%q (line %d) is not after %q (line %d):\n%s", w, i+1, lastWant, last+1, out)
		}
		last, lastWant = i, w
	}
}

// TestSummaryReasonFirst: the summary of an invalid run opens with the verdict, the
// failed check, its cause class and its witness, before what ran and its counts;
// the ZooKeeper version is shown clean.
func TestSummaryReasonFirst(t *testing.T) {
	// The run's settings: a 6 s sync window past a 4 s session timeout.
	p := cause.Params{SessionTimeout: 4 * time.Second, Tick: 200 * time.Millisecond, SyncLimit: 30}
	res := recordedRun(t, "curator-zombie-follower", debianVersion, p)
	if res.Verdict != models.Invalid {
		t.Fatalf("verdict %s, want invalid", res.Verdict)
	}
	reasons := Reasons(res.Checks)
	if len(reasons) == 0 || reasons[0].Cause == nil || reasons[0].Cause.Class != cause.Configuration || reasons[0].Witness == "" {
		t.Fatalf("reasons %+v, want a configuration finding with a witness first", reasons)
	}
	var b strings.Builder
	Summary(&b, res)
	out := b.String()
	firstWitnessLine, _, _ := strings.Cut(reasons[0].Witness, "\n")
	assertLineOrder(t, out,
		"verdict:  INVALID",
		"key "+reasons[0].Key+": invalid (holds checker), first at ",
		"    cause: CONFIGURATION: ",
		"    to close the window: a sync window of at most half the session timeout",
		"    "+firstWitnessLine,
		"curator-zombie-follower  seed 1  ",
		"  ZooKeeper 3.8.0, Curator 5.4.0-3",
		"  acquire  invoke",
		"lock cycles per second",
		"coverage: what the run exercised",
		"run:      ",
	)
	if first := strings.TrimLeft(out, "\n"); !strings.HasPrefix(first, "verdict:  INVALID\n") {
		t.Errorf("the summary does not open with the verdict:\n%s", out)
	}
	// results.json and junit.xml carry the clean version too.
	var onDisk Results
	if err := rundir.Dir(res.Dir).ReadResults(&onDisk); err != nil || onDisk.ZooKeeperVersion != "3.8.0" {
		t.Errorf("results.json: zookeeper_version %q (%v), want 3.8.0", onDisk.ZooKeeperVersion, err)
	}
	junit, err := os.ReadFile(filepath.Join(res.Dir, rundir.JUnit))
	if err != nil || !strings.Contains(string(junit), `<property name="zookeeper_version" value="3.8.0">`) {
		t.Errorf("junit.xml lacks the clean version (%v)", err)
	}
	for name, text := range map[string]string{"summary": out, "results.json": onDisk.ZooKeeperVersion, "junit.xml": string(junit)} {
		if strings.Contains(text, "mvngit") {
			t.Errorf("%s shows the Maven placeholder", name)
		}
	}
}

// TestSummaryValidRunVerdictFirst: a valid run's summary opens with its verdict line,
// which says how many situations it did not exercise (a valid verdict never hides
// that nothing dangerous happened), then what ran; a run that exercised every
// situation says VALID alone.
func TestSummaryValidRunVerdictFirst(t *testing.T) {
	res, _ := fixtureRun(t, "valid")
	if res.Verdict != models.Valid {
		t.Fatalf("verdict %s", res.Verdict)
	}
	res.ZooKeeperVersion = debianVersion // as an older results.json has it
	var b strings.Builder
	Summary(&b, res)
	out := b.String()
	want := fmt.Sprintf("\nverdict:  VALID (%d of %d situations not exercised: the coverage table says which)\nfixture-valid  seed ",
		res.Coverage.NotExercisedCount(), res.Coverage.ApplicableCount())
	if res.Coverage.NotExercisedCount() == 0 || !strings.HasPrefix(out, want) {
		t.Errorf("the summary does not open with the verdict and what it did not exercise, then the run:\n%s", out)
	}
	for i := range res.Coverage.Rows {
		res.Coverage.Rows[i].NotExercised = ""
	}
	b.Reset()
	Summary(&b, res)
	if !strings.HasPrefix(b.String(), "\nverdict:  VALID\nfixture-valid  seed ") {
		t.Errorf("every situation exercised: the verdict line says more than VALID:\n%s", b.String())
	}
	assertLineOrder(t, out, "verdict:  VALID", "fixture-valid  seed", "  ZooKeeper 3.8.0", "  acquire  invoke", "run:      ")
	if strings.Contains(out, "    \n") {
		t.Errorf("the summary has an empty witness line:\n%s", out)
	}
}

// TestPrintCheckVerdictFirst: `check FILE` prints the verdict and the reasons before
// what it checked and the coverage table.
func TestPrintCheckVerdictFirst(t *testing.T) {
	path := filepath.Join("..", "testdata", "histories", "curator-kept-worker-orphan.jsonl")
	h, _, err := histories.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg := models.Config{Kind: models.Mutex}
	res, err := models.Check(h, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	v, err := PrintCheck(&b, path, h, res, cfg)
	if err != nil || v != models.Invalid {
		t.Fatalf("PrintCheck: %s, %v", v, err)
	}
	out := b.String()
	if !strings.HasPrefix(out, "verdict:  INVALID\n") {
		t.Errorf("check does not open with the verdict:\n%s", out)
	}
	assertLineOrder(t, out, "verdict:  INVALID", "key liveness: invalid (final phase checker), first at ", "ORPHAN", path+": ", "coverage: what the run exercised")
}

// TestReasonsDecidingFirst: the checks that decide the verdict come before the
// advisory ones; valid checks are no reason.
func TestReasonsDecidingFirst(t *testing.T) {
	checks, v := Verdict([]Check{
		{Key: "l0", Verdict: models.Invalid, Checker: "holds"},
		{Key: "ok", Verdict: models.Valid, Checker: "holds"},
		{Key: "counter", Verdict: models.Invalid, Checker: "register+final-value"},
		{Key: LivenessKey, Verdict: models.Unknown, Checker: "final phase"},
	})
	if v != models.Invalid {
		t.Fatalf("verdict %s", v)
	}
	var keys []string
	for _, c := range Reasons(checks) {
		keys = append(keys, c.Key)
	}
	if got, want := strings.Join(keys, " "), "counter liveness l0"; got != want {
		t.Errorf("reasons %q, want %q", got, want)
	}
	if r := Reasons([]Check{{Key: "l0", Verdict: models.Valid}}); len(r) != 0 {
		t.Errorf("a valid check is a reason: %+v", r)
	}
}

// fixtureSummary decodes the results.json at path and prints its summary.
func fixtureSummary(t *testing.T, path string) (Results, string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var b strings.Builder
	Summary(&b, res)
	return res, b.String()
}

// TestSummaryRedisService: a Redis run's results.json (testdata/redis-results.json, as
// `zlockcheck run --service redis` wrote it) names Redis and its version, in the
// summary, junit.xml and the results.json written again; ZooKeeper appears nowhere,
// and the coverage rows that only ZooKeeper's queue has say "not applicable", with
// no count, and are not counted as not exercised.
func TestSummaryRedisService(t *testing.T) {
	res, out := fixtureSummary(t, filepath.Join("testdata", "redis-results.json"))
	if service, version := res.Server(); service != "redis" || version != "7.0.15" {
		t.Errorf("Server() = %q, %q, want redis, 7.0.15", service, version)
	}
	assertLineOrder(t, out, "verdict:  VALID", "  Redis 7.0.15, ", "coverage: what the run exercised")
	if strings.Contains(out, "ZooKeeper") {
		t.Errorf("a Redis run's summary names ZooKeeper:\n%s", out)
	}

	// Checked again (as `zlockcheck check` of a stored run does), from its course.
	dir := t.TempDir()
	path := filepath.Join(dir, rundir.History)
	data, err := os.ReadFile(filepath.Join("testdata", "valid.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := CheckRun(NewRun(rundir.Dir(dir), res.RunConfig(), res.Config, res.Course()), models.Config{Kind: models.Mutex})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, rundir.Results))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"service": "redis"`, `"server_version": "7.0.15"`} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("results.json lacks %s", want)
		}
	}
	if strings.Contains(string(raw), "zookeeper_version") {
		t.Errorf("a Redis run's results.json has zookeeper_version")
	}
	junit, err := os.ReadFile(filepath.Join(dir, rundir.JUnit))
	if err != nil || !strings.Contains(string(junit), `<property name="server_version" value="7.0.15">`) ||
		!strings.Contains(string(junit), `<property name="service" value="redis">`) || strings.Contains(string(junit), "zookeeper") {
		t.Errorf("junit.xml does not name Redis 7.0.15 alone (%v)", err)
	}
	var b strings.Builder
	Summary(&b, again)
	out = b.String()
	if !strings.Contains(out, "  Redis 7.0.15") || strings.Contains(out, "ZooKeeper") {
		t.Errorf("the summary of the run checked again:\n%s", out)
	}
	for _, id := range []string{coverage.RowTimedOutQueued, coverage.RowPredecessorGone} {
		r, ok := again.Coverage.Row(id)
		if !ok || !strings.HasPrefix(r.NotApplicable, "not applicable: ") || r.Count != 0 || r.NotExercised != "" {
			t.Errorf("coverage row %s of a Redis run: %+v, want not applicable", id, r)
			continue
		}
		if !strings.Contains(out, "       -  "+r.Situation+"\n          "+r.NotApplicable+"\n") {
			t.Errorf("the summary does not show row %s as not applicable:\n%s", id, out)
		}
	}
	if r, _ := again.Coverage.Row(coverage.RowOrphans); strings.Contains(r.Situation, "nodes") {
		t.Errorf("a Redis run's orphan row speaks of nodes: %q", r.Situation)
	}
	na := len(again.Coverage.Rows) - again.Coverage.ApplicableCount()
	if want := fmt.Sprintf("situations not exercised, %d not applicable)", na); na == 0 || !strings.Contains(out, want) {
		t.Errorf("the coverage header does not say %q:\n%s", want, out)
	}
}

// TestSummaryOldResultsZooKeeper: a results.json written before Redis (only
// zookeeper_version, Debian's unexpanded version) still reads as ZooKeeper's, and a
// ZooKeeper run's results.json keeps writing zookeeper_version beside the new fields.
func TestSummaryOldResultsZooKeeper(t *testing.T) {
	res, out := fixtureSummary(t, filepath.Join("web", "testdata", "runs", "gozk-mutex", "20261122T060322.360Z", "results.json"))
	if res.Service != "" || res.ServerVersion != "" {
		t.Fatalf("the old fixture has service %q, server_version %q: not an old results.json", res.Service, res.ServerVersion)
	}
	if service, version := res.Server(); service != "zookeeper" || version != "3.8.0" {
		t.Errorf("Server() = %q, %q, want zookeeper, 3.8.0", service, version)
	}
	if !strings.Contains(out, "  ZooKeeper 3.8.0") || strings.Contains(out, "Redis") || strings.Contains(out, "not applicable") {
		t.Errorf("an old results.json's summary:\n%s", out)
	}
	if c := res.Course(); c.Service != "zookeeper" || c.ServerVersion != "3.8.0" {
		t.Errorf("Course() = %q, %q, want zookeeper, 3.8.0", c.Service, c.ServerVersion)
	}
	zk := recordedRun(t, "curator-zombie-follower", debianVersion, cause.Params{})
	if zk.Service != "zookeeper" || zk.ServerVersion != "3.8.0" || zk.ZooKeeperVersion != "3.8.0" {
		t.Errorf("a ZooKeeper run's results: service %q, server_version %q, zookeeper_version %q", zk.Service, zk.ServerVersion, zk.ZooKeeperVersion)
	}
}
