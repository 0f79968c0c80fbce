package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models"
	"github.com/zlockcheck/zlockcheck/models/cause"
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
		ZooKeeperVersion: zkVersion, RecipeVersion: "Curator 5.4.0-3", Cause: p}, models.Config{Kind: models.Mutex})
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
// then what ran.
func TestSummaryValidRunVerdictFirst(t *testing.T) {
	res, _ := fixtureRun(t, "valid")
	if res.Verdict != models.Valid {
		t.Fatalf("verdict %s", res.Verdict)
	}
	res.ZooKeeperVersion = debianVersion // as an older results.json has it
	var b strings.Builder
	Summary(&b, res)
	out := b.String()
	if !strings.HasPrefix(out, "\nverdict:  VALID\nfixture-valid  seed ") {
		t.Errorf("the summary does not open with the verdict, then the run:\n%s", out)
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
