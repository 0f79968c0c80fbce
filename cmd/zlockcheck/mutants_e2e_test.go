package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/netns"
	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// exposure is a mutant of zlc-mutex and the run that exposes its bug.
type exposure struct {
	mutant string
	args   []string
	// want names the check that must fail: a lock key, or "liveness".
	want string
	// minTime is the shortest run that exposes the bug reliably ("" for the default).
	minTime string
	// deadlock: the bug leaves a node that blocks everyone, which the harness's
	// orphan watch must show (the liveness witness says the lock "could never be
	// granted again", not just that the final bound ran out).
	deadlock bool
	// witness is what a liveness witness must say (default "ORPHAN").
	witness string
	// long: make mutants (ZLC_LONG) catches it, make test leaves it to the simulator
	// (zksim's TestMutantsAreCaught), for make test's time.
	long bool
}

// exposures: each mutant with the workload and faults that expose it. The same
// arguments run the real zlc-mutex as a control, which must stay valid.
var exposures = []exposure{
	// Low contention: a newcomer often finds a single node ahead of it (with a full
	// queue every new node is third or later and waits on its predecessor, which
	// hides the bug after the first seconds).
	{"mutant-off-by-one", []string{"--think-max", "100ms"}, "l0", "", false, "", false},
	// Waiters that time out make predecessors vanish while earlier nodes remain.
	{"mutant-no-recheck", []string{"--acquire-timeout", "150ms"}, "", "", false, "", false},
	{"mutant-delete-lowest", []string{"--acquire-timeout", "150ms"}, "", "", true, "", false},
	// A holder cut off during a long critical section must learn it lost the lock.
	// The overlap needs the hold to outlast the cut by a session timeout: a short
	// session (2 s) and holds of up to 10 s make that likely at every fault.
	{"mutant-ignore-lost", []string{"--nemesis", "client-partition", "--nemesis-targets", "holder",
		"--nemesis-interval", "2s", "--hold-max", "10s", "--session-timeout", "2s", "--acquire-timeout", "20s"}, "l0", "40s", false, "", false},
	// Replies lost right when an idle worker starts its next acquire: the create is
	// applied, its reply never comes, the blind retry leaves an orphan node.
	{"mutant-unprotected-create", []string{"--nemesis", "reply-loss", "--nemesis-targets", "idle",
		"--nemesis-interval", "2s", "--think-max", "200ms", "--acquire-timeout", "10s"}, "liveness", "", true, "", false},
	// The narrow fault-free races (issue 28). Two workers, holds under a millisecond,
	// think times near a round trip: the holder releases between a newcomer's
	// getChildren and its exists, and the mutant waits without a watch; the harness's
	// missed wake-up watch shows its node the lowest, never granted.
	{"mutant-missed-wakeup", []string{"--workers", "2", "--hold-max", "1ms", "--think-max", "2ms", "--acquire-timeout", "3s"}, "liveness", "", false, "a missed wake-up", false},
	// Waiters that give up after about one hold: the given-up acquire's watch fires
	// before the next acquire and creates a node nobody waits with.
	{"mutant-withdrawn-watch", []string{"--workers", "3", "--hold-max", "5ms", "--think-max", "2ms", "--acquire-timeout", "10ms"}, "liveness", "", true, "", false},
	// A holder's connections silenced as it releases, then reset: its delete is lost
	// for good, and its client reconnects at once to the session that still has the
	// node the mutant says it deleted.
	{"mutant-swallowed-release", []string{"--nemesis", "connection-reset", "--nemesis-targets", "holder",
		"--nemesis-interval", "2s", "--hold-max", "100ms", "--think-max", "100ms", "--acquire-timeout", "10s"}, "liveness", "", true, "", true},
}

// mutantSeeds and mutantTime: one 20 s seed in make test; ZLC_MUTANT_SEEDS=3
// ZLC_MUTANT_TIME=60s for the full proof (make mutants).
func mutantSeeds(t *testing.T) (int, string) {
	seeds, runTime := 1, "20s"
	if s := os.Getenv("ZLC_MUTANT_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("ZLC_MUTANT_SEEDS=%q: want a positive integer", s)
		}
		seeds = n
	}
	if s := os.Getenv("ZLC_MUTANT_TIME"); s != "" {
		runTime = s
	}
	return seeds, runTime
}

// TestEveryMutantIsCaught runs one command line for every mutant, `explore` with a
// budget and nothing that says where the bug is (only --recipe differs): it must find
// each one, with the check and witness its bug calls for.
func TestEveryMutantIsCaught(t *testing.T) {
	requireIntegration(t)
	seeds, _ := mutantSeeds(t)
	for _, e := range exposures {
		t.Run(e.mutant, func(t *testing.T) {
			if e.long {
				testenv.Long(t, "explore on a real ensemble; make test catches this mutant in the simulator (zksim's TestMutantsAreCaught)")
			}
			for seed := 1; seed <= seeds; seed++ {
				store := keptIfFailed(t)
				before := zlcNamespaces(t)
				code, stdout, stderr := zlockcheck(t, "explore", "--allow-mutants", "--recipe", e.mutant, "--budget", "4m",
					"--seed", strconv.Itoa(seed), "--store", store, "--quiet")
				if code != exitInvalid {
					t.Fatalf("seed %d: exit %d, want %d (invalid)\nstdout:\n%s\nstderr:\n%s", seed, code, exitInvalid, stdout, stderr)
				}
				res := readResults(t, store)
				var caught []string
				first := -1.0
				for _, c := range res["checks"].([]any) {
					c := c.(map[string]any)
					if c["verdict"] == "invalid" {
						caught = append(caught, c["key"].(string))
						if f, ok := c["first_violation_seconds"].(float64); ok && (first < 0 || f < first) {
							first = f
						}
					}
				}
				witness := checkOutput(t, store)
				if e.want != "" && !strings.Contains(strings.Join(caught, ","), e.want) {
					t.Errorf("seed %d: invalid checks %v, want %s among them\n%s", seed, caught, e.want, witness)
				}
				if want := cmp.Or(e.witness, "ORPHAN"); e.want == "liveness" && !strings.Contains(witness, want) {
					t.Errorf("seed %d: the liveness witness does not say %q:\n%s", seed, want, witness)
				}
				if e.deadlock && slices.Contains(caught, "liveness") && !strings.Contains(witness, "could never be granted again") {
					t.Errorf("seed %d: the orphan watch did not show the deadlock:\n%s", seed, witness)
				}
				t.Logf("seed %d: caught by %v, first violation at %.1fs of its round\n%s", seed, caught, first, stdout)
				assertNothingLeft(t, store)
				if left := slices.DeleteFunc(zlcNamespaces(t), func(n string) bool { return slices.Contains(before, n) }); len(left) > 0 {
					t.Errorf("seed %d: explore left namespaces behind: %v", seed, left)
				}
			}
		})
	}
}

// zlcNamespaces lists the namespaces the tool may have made (explore's ensemble is
// named by its own id, not a round's).
func zlcNamespaces(t *testing.T) []string {
	t.Helper()
	names, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// checkOutput is `check` of the latest run in store: its summary and witness.
func checkOutput(t *testing.T, store string) string {
	t.Helper()
	_, stdout, stderr := zlockcheck(t, "check", filepath.Join(store, "latest"))
	return stdout + stderr
}

// TestZlcMutexSurvivesTheExposures is the control: the real recipe under the same
// runs stays valid (only the fault-driven ones; the others need no faults). A
// control, not a detection: make test-long and make mutants run it (make test keeps
// zlc-mutex valid under the same client faults in TestConnectToAnExistingEnsemble).
func TestZlcMutexSurvivesTheExposures(t *testing.T) {
	requireIntegration(t)
	testenv.Long(t, "zlc-mutex's control runs; make test keeps zlc-mutex valid under client-partition and reply-loss in TestConnectToAnExistingEnsemble")
	_, runTime := mutantSeeds(t)
	for _, e := range exposures {
		if len(e.args) == 0 || e.args[0] != "--nemesis" {
			continue
		}
		t.Run(e.mutant, func(t *testing.T) {
			store := t.TempDir()
			args := append([]string{"run", "--recipe", "zlc-mutex", "--time", runTime, "--seed", "1", "--store", store, "--quiet"}, e.args...)
			code, stdout, stderr := zlockcheck(t, args...)
			if code != exitValid {
				t.Fatalf("zlc-mutex under %s's exposure: exit %d, want 0\n%s\n%s", e.mutant, code, stdout, stderr)
			}
			assertNothingLeft(t, store)
		})
	}
}

// TestFencingKeepsTheCounterRight: go-zookeeper's lock with a paused or cut-off
// holder loses increments when the write is a plain set, and none when it is fenced.
// (A cut-off holder's write is retried after its session expired, as Curator's and
// Kazoo's retrying operations would; holds of up to 1 s let the fault land between the
// read and the write.) Whether a given seed's fault lands between a read and its write
// depends on real timing: an unfenced run may overlap holders whose writes still come
// out in order (the holds checker shows the overlap, the counter stays right), so the
// unfenced case searches up to three seeds for a lost update, as a nightly run would;
// every fenced seed must be valid. The runs of each fault go side by side. make test
// runs client-pause only (CI's time);
// ZLC_FENCING_FAULTS=all adds client-partition (make fencing).
func TestFencingKeepsTheCounterRight(t *testing.T) {
	requireIntegration(t)
	faults := [][]string{{"--nemesis", "client-pause", "--hold-max", "1s"}}
	switch os.Getenv("ZLC_FENCING_FAULTS") {
	case "":
	case "all":
		faults = append(faults, []string{"--nemesis", "client-partition", "--hold-max", "1s"})
	default:
		t.Fatalf("ZLC_FENCING_FAULTS=%q: want all or nothing", os.Getenv("ZLC_FENCING_FAULTS"))
	}
	for _, fault := range faults {
		for _, fenced := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fenced=%v", fault[1], fenced), func(t *testing.T) {
				t.Parallel() // the fenced and unfenced runs side by side (make test's budget)
				seeds := []int{1}
				if !fenced {
					seeds = []int{1, 2, 3}
				}
				var tried []string
				for _, seed := range seeds {
					store := t.TempDir()
					args := append([]string{"run", "--recipe", "gozk", "--workload", "counter",
						"--fenced=" + strconv.FormatBool(fenced), "--nemesis-targets", "holder",
						"--nemesis-interval", "2s", "--time", "40s", "--seed", strconv.Itoa(seed),
						"--store", store, "--quiet"}, fault...)
					code, stdout, stderr := zlockcheck(t, args...)
					assertNothingLeft(t, store)
					if fenced {
						if code != exitValid {
							t.Fatalf("seed %d: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", seed, code, exitValid, stdout, stderr)
						}
						return
					}
					if code == exitInvalid {
						if !strings.Contains(stdout, "lost update") && !strings.Contains(stdout, "were acknowledged") {
							t.Errorf("seed %d: the unfenced run's witness does not show lost updates:\n%s", seed, stdout)
						}
						t.Logf("seed %d: lost updates found (after %d seeds without)", seed, len(tried))
						return
					}
					if code != exitValid {
						t.Fatalf("seed %d: exit %d, want %d or %d\nstdout:\n%s\nstderr:\n%s", seed, code, exitInvalid, exitValid, stdout, stderr)
					}
					tried = append(tried, fmt.Sprintf("seed %d: exit %d\n%s", seed, code, stdout))
				}
				t.Fatalf("no unfenced seed lost an update:\n%s", strings.Join(tried, "\n"))
			})
		}
	}
}
