package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

// go-zookeeper's zk.Lock (v1.0.4) returns the error and leaves its lock node behind
// when a request after its create fails: Children or GetW in its wait loop, or the
// Children with which CreateProtectedEphemeralSequential looks for a create whose
// reply was lost. Unlock then says ErrNotLocked, so a caller that goes on with its
// session (retrying Lock, say) keeps a node nobody will delete: it blocks everyone
// until that session ends. The harness replaces a worker whose op answered info,
// which ends the session and hides this; the lock property's infoKeep policy keeps
// the worker, as an application whose Lock call failed would.

// TestLockPropertyFindsGoZKOrphan lets rapid look for the orphan: gozk's workers are
// kept after an info, and the steps are acquire, wait and wake-loss (the fault that makes
// the request after a wake-up fail; release, the other faults and reply-loss, which
// cannot leave an orphan with 4 s sessions, only make the search slower). rapid must
// find a counterexample: liveness, with faults off the kept worker's next acquire
// queues behind the node its failed Lock left (and so would everyone else's). The
// wake-loss is aimed at the only waiter (possible: with others queued the release
// wakes someone else); so aimed, rapid found it within 2-5 checks in 4 runs of 4. Run
// it with -rapid.shrinktime=10m to see it shrunk (to the schedule of
// TestGoZKOrphanSchedules).
func TestLockPropertyFindsGoZKOrphan(t *testing.T) {
	requireProperty(t)
	env := startPropEnv(t)
	setRapidDefault(t, "rapid.steps", "RAPID_STEPS", propSteps)
	setRapidDefault(t, "rapid.checks", "RAPID_CHECKS", propChecks)
	rec := env.recipe(t, "gozk", infoKeep)
	stats := &propStats{}
	defer stats.log(t)
	msg := expectCounterexample(t, env.property(rec, []string{stepAcquire, stepWait, stepWakeLoss}, stats))
	if !strings.Contains(msg, failLiveness) || !strings.Contains(msg, "kept after info true") {
		t.Fatalf("want a liveness failure naming the kept worker's node, got:\n%s", msg)
	}
}

// TestGoZKOrphanSchedules are the orphan's schedules, shrunk by hand and by rapid,
// with zlc-mutex (protected create, children re-read after any error) as the control.
func TestGoZKOrphanSchedules(t *testing.T) {
	env := startPropEnv(t)
	const wakeLoss = "clients 2; acquire c0 10s; wake-loss c1 3.4s"
	for _, tc := range []struct {
		name   string
		recipe string
		st     time.Duration
		sched  string
		// strict holds the kept worker to the orphan invariant at once; finalOnly
		// leaves every invariant to the final phase.
		strict, finalOnly bool
		// want is the failure kind, "" for none.
		want string
		// tries: a schedule whose window depends on the ping phase is run up to
		// tries times (0: once) until it fails as wanted.
		tries int
		// long: make test-long only (a variant of a detection make test makes).
		long bool
	}{
		// c1 waits behind c0; c0 releases while only watch notifications reach c1: c1
		// is woken, its Children's reply is lost; 2/3 of the session timeout later
		// go-zookeeper drops the connection, Children fails, Lock returns "connection
		// closed" and leaves c1's node, now the lowest, behind; c1 reconnects at once
		// with its session. With the default 4 s session. c1's next Lock queues
		// behind its own node for good: liveness.
		{"wake-loss/gozk", "gozk", 4 * time.Second, wakeLoss, false, false, failLiveness, 0, false},
		// Strict: right after the step, an orphan (c1 holds nothing, asks for
		// nothing, its live session owns a node) ...
		{"wake-loss/gozk/strict", "gozk", 4 * time.Second, wakeLoss, true, false, failOrphan, 0, false},
		// ... and it blocks the others: with faults off, c0 cannot acquire (make
		// test-long: wake-loss/gozk finds the same liveness failure in make test).
		{"wake-loss/gozk/strict-final", "gozk", 4 * time.Second, wakeLoss, true, true, failLiveness, 0, true},
		{"wake-loss/zlc-mutex", "zlc-mutex", 4 * time.Second, wakeLoss, true, false, "", 0, false},
		// A lost create reply: go-zookeeper's recovery (Children, to find the node by
		// its GUID) fails only if its first two reconnects fail too (1 s each), after
		// its read timeout (2/3 of the session timeout). But the session's last sign of
		// life is the create itself: TCP sends nothing new (pings) while the create is
		// unacknowledged. The reconnect after the recovery failed comes 3 s after the
		// read timeout, too late for a session of 4 s: the node dies with the session.
		// Lock still fails (info), but no orphan outlives it.
		{"create-reply-loss-4s/gozk", "gozk", 4 * time.Second, "clients 2; reply-loss c0 4s", true, false, "", 0, false},
		// With a 12 s session the session outlives go-zookeeper's reconnect whatever
		// the ping phase: the node of the lost create reply is an orphan.
		{"create-reply-loss-12s/gozk", "gozk", 12 * time.Second, "clients 2; reply-loss c0 9.6s", true, false, failOrphan, 0, false},
		{"create-reply-loss-12s/zlc-mutex", "zlc-mutex", 12 * time.Second, "clients 2; reply-loss c0 9.6s", true, false, "", 0, false},
		// zlc-mutex's deferred cleanup (found by the strict property): c0's acquire
		// times out while c0 is cut off; the delete of its node fails with connection
		// loss and the acquire answers info. zlc-mutex remembers the node and deletes
		// it at its next acquire, so it passes the default property; until then the
		// node sits behind the holder's and blocks whoever comes after. The cut must
		// end after go-zookeeper's read timeout (2/3 of the session timeout after the
		// last reply it read, a ping's: the phase is random) and less than 1 s after
		// it (or the session expires first): a 2.5 s cut hits that in about 3 runs
		// of 4.
		{"cut-timeout/zlc-mutex/strict", "zlc-mutex", 4 * time.Second, "clients 2; acquire c1 10s; acquire c0 2s; cut c0 2.5s", true, false, failOrphan, 6, false},
		{"cut-timeout/zlc-mutex", "zlc-mutex", 4 * time.Second, "clients 2; acquire c1 10s; acquire c0 2s; cut c0 2.5s", false, false, "", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.long {
				testenv.Long(t, "the same schedule's liveness failure is wake-loss/gozk's in make test")
			}
			s, err := parseSchedule(tc.sched)
			if err != nil {
				t.Fatal(err)
			}
			rec := env.recipe(t, tc.recipe, infoKeep)
			rec.SessionTimeout, rec.Strict = tc.st, tc.strict
			m, f := env.runSchedule(t, rec, s, tc.finalOnly)
			for try := 2; try <= tc.tries && (f == nil || f.Kind != tc.want); try++ {
				t.Logf("try %d: %v\n%s", try-1, f, m.report())
				m, f = env.runSchedule(t, rec, s, tc.finalOnly)
			}
			t.Logf("%s", m.report())
			defer func() {
				if t.Failed() {
					t.Logf("worker logs:\n%s", m.workerLogs(30))
				}
			}()
			switch {
			case tc.want == "" && f != nil:
				t.Fatalf("want no failure, got %v", f)
			case tc.want != "" && f == nil:
				t.Fatalf("want a %s failure, got none", tc.want)
			case tc.want != "" && f.Kind != tc.want:
				t.Fatalf("want a %s failure, got %v", tc.want, f)
			case tc.want != "" && !strings.Contains(f.Msg, "kept after info true"):
				t.Fatalf("the failure does not name the kept worker's node: %v", f)
			}
		})
	}
}
