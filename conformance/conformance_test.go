package conformance

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice"
)

// fakeServer is the FAKE ZooKeeper of testdata/fake_worker.py (a fake worker, not a
// recipe): a directory holding the fake's lock files; expiring a session writes a file
// the fake watches for.
type fakeServer struct{ dir string }

func (f fakeServer) Connect() string { return f.dir }

func (f fakeServer) End(_ context.Context, h lockservice.Holder) (lockservice.Ending, error) {
	if h.Session == "" {
		return lockservice.Ending{}, lockservice.CannotEnd("no session")
	}
	return lockservice.Ending{Did: "expired session " + h.Session, MustReport: true},
		os.WriteFile(filepath.Join(f.dir, "expired-"+h.Session), nil, 0o644)
}

func (f fakeServer) Close() error { return nil }

var _ lockservice.Local = fakeServer{}

// runFake runs the rules named in only against the fake worker in mode ("" keeps
// every rule), with a short session timeout so the bounds are short too.
func runFake(t *testing.T, argv []string, only ...string) Report {
	t.Helper()
	if _, err := exec.LookPath(python); err != nil {
		t.Skipf("the fake worker needs %s: %v", python, err)
	}
	rep, err := Run(context.Background(), Config{
		Argv: argv, SessionTimeout: time.Second, Server: fakeServer{t.TempDir()}, Only: only,
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// python is Debian's python3: a python3 on the PATH may be a version manager's shim,
// slow to start (seconds when several start at once).
const python = "/usr/bin/python3"

func fake(mode string) []string {
	argv := []string{python, "testdata/fake_worker.py"}
	if mode != "" {
		argv = append(argv, mode)
	}
	return argv
}

// TestFakeThatKeepsEveryRulePasses: the suite itself raises no false alarm, on a
// worker speaking v2 and on one speaking v3.
func TestFakeThatKeepsEveryRulePasses(t *testing.T) {
	for _, mode := range []string{"", "v3"} {
		t.Run("mode="+mode, func(t *testing.T) {
			t.Parallel()
			rep := runFake(t, fake(mode))
			var b strings.Builder
			rep.Write(&b)
			if !rep.OK() || len(rep.Results) != len(Rules()) {
				t.Fatalf("the fake that keeps every rule did not pass them all:\n%s", b.String())
			}
			for _, res := range rep.Results {
				if res.Skipped != "" {
					t.Errorf("rule %s skipped: %s", res.Rule.Name, res.Skipped)
				}
			}
		})
	}
}

// TestEveryRuleCanBreak runs each rule against a fake worker that breaks it (and only
// that rule, so each case is quick), and wants it reported broken with the exchange.
func TestEveryRuleCanBreak(t *testing.T) {
	cases := []struct {
		rule string
		argv []string
		// problem is a piece of the expected problem text.
		problem string
	}{
		{"init", fake("init-info"), "want ok, got info"},
		{"replies", fake("garbage-line"), "malformed line from worker"},
		{"replies", fake("double-reply"), "a reply with id 17 while no request was in flight"},
		{"replies", append([]string{python, "../cmd/zlockcheck/testdata/breaking_proxy.py", "wrong-release-id"}, fake("")...), "a reply with id 1018 while request 18 was in flight"},
		{"acquire-release", fake("release-fails"), "A release: want ok, got fail"},
		{"timeout", fake("no-timeout"), "no reply within"},
		{"timeout", fake("early-fail"), "before its timeout"},
		{"timeout", fake("leak-on-timeout"), "leave a waiter behind"},
		{"handover", fake("deaf-waiter"), "once A released"},
		{"lost", fake("no-lost"), `no {"event":"lost"}`},
		{"close", fake("close-no-exit"), "did not exit"},
		{"eof", fake("eof-exit-1"), "want status 0"},
		{"bad-request", fake("ignore-bad-lines"), "did not exit"},
		{"refuse", fake("accept-any-kind"), "want fail, got ok"},
		{"cycle", fake("cycle-no-hold"), "want at least hold_us"},
		{"cycle-lost", fake("cycle-release-after-lost"), "no release after the lock was lost"},
		{"cycle", fake("v3-invoke-reports"), "a v3 worker reports no invokes"},
		{"cycle", fake("v3-reply-after-last"), "reply"},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.rule] = true
		t.Run(tc.rule+"/"+tc.argv[len(tc.argv)-1], func(t *testing.T) {
			t.Parallel()
			rep := runFake(t, tc.argv, tc.rule)
			var b strings.Builder
			rep.Write(&b)
			res := rep.Results[0]
			if res.Passed || rep.OK() {
				t.Fatalf("rule %s passed a fake that breaks it:\n%s", tc.rule, b.String())
			}
			if !strings.Contains(res.Problem, tc.problem) {
				t.Errorf("problem %q does not say %q", res.Problem, tc.problem)
			}
			if len(res.Exchange) == 0 || !strings.Contains(b.String(), " > ") {
				t.Errorf("no exchange in the report:\n%s", b.String())
			}
		})
	}
	for _, r := range Rules() {
		if !seen[r.Name] {
			t.Errorf("no fake breaks rule %s", r.Name)
		}
	}
}

// TestV2RulesSkipAV1Worker: a worker that never agrees to v2 is not held to its rules.
func TestV2RulesSkipAV1Worker(t *testing.T) {
	t.Parallel()
	rep := runFake(t, fake("v1"), "cycle", "cycle-lost")
	var b strings.Builder
	rep.Write(&b)
	for _, res := range rep.Results {
		if !res.Passed || !strings.Contains(res.Skipped, "protocol v1") {
			t.Errorf("rule %s on a v1 worker: want skipped (protocol v1), got:\n%s", res.Rule.Name, b.String())
		}
	}
	if len(rep.Results) != 2 {
		t.Fatalf("want 2 results, got %d", len(rep.Results))
	}
}

func TestUnknownRuleAndEmptyCommand(t *testing.T) {
	if _, err := Run(context.Background(), Config{Argv: []string{"true"}, Only: []string{"nonesuch"}, Server: fakeServer{}}); err == nil || !strings.Contains(err.Error(), `no rule "nonesuch"`) {
		t.Errorf("unknown rule: err %v", err)
	}
	if _, err := Run(context.Background(), Config{Server: fakeServer{}}); err == nil {
		t.Error("no worker command: no error")
	}
}
