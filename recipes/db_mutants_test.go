package recipes

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Each database mutant shows its bug directly, next to its control (the recipe
// without the bug) under the same steps.

// TestPgTableMutantDeleteByName: A is cut off until its row expires, B takes the
// row over, A comes back and releases. pg-table-expiry's DELETE by name and owner
// leaves B's row; mutant-pg-table-delete-by-name's deletes it, and C locks while B
// holds.
func TestPgTableMutantDeleteByName(t *testing.T) {
	w := startTestPostgres(t)
	for _, c := range []struct {
		m   pgTableMutant
		bug bool
	}{{pgTableExpiry, false}, {pgTableDeleteByName, true}} {
		t.Run(pgTableVariants[c.m].name, func(t *testing.T) {
			d := &testDialer{host: w.worker}
			a, evA := newTestPgTable(t, w, c.m, 600*time.Millisecond, 1, d, "")
			b, _ := newTestPgTable(t, w, c.m, 5*time.Second, 2, nil, "")
			cc, _ := newTestPgTable(t, w, c.m, 5*time.Second, 3, nil, "")
			mustAcquire(t, a, "a")
			d.cutOff()
			waitLost(t, evA, 2*time.Second)
			mustAcquire(t, b, "b takes a's expired row over")
			d.heal()
			a.Release(context.Background()) // fails (a lost it); what matters is its DELETE
			owner, _ := pgRowOwner(t, w, b.cfg.Path)
			if (owner != b.owner) != c.bug {
				t.Fatalf("after a's release the row's owner is %q (b's: %q); the bug deletes it: %v", owner, b.owner, c.bug)
			}
			if !c.bug {
				expectTimeout(t, cc, "c while b holds")
				return
			}
			mustAcquire(t, cc, "c while b still holds")
			if !b.lease.holding() {
				t.Fatal("b should still believe it holds")
			}
		})
	}
}

// TestPgTableMutantBlindRetry: the INSERT's reply is lost. pg-table reads the owner
// back and holds; mutant-pg-table-blind-retry sends the INSERT again, finds its own
// row, polls until its timeout and fails, leaving the row for ever: B cannot lock.
func TestPgTableMutantBlindRetry(t *testing.T) {
	w := startTestPostgres(t)
	for _, c := range []struct {
		m   pgTableMutant
		bug bool
	}{{pgTableCorrect, false}, {pgTableBlindRetry, true}} {
		t.Run(pgTableVariants[c.m].name, func(t *testing.T) {
			d := &testDialer{host: w.worker}
			a, _ := newTestPgTable(t, w, c.m, 2*time.Second, 1, d, "")
			b, _ := newTestPgTable(t, w, pgTableCorrect, 2*time.Second, 2, nil, "")
			mustAcquire(t, a, "a, preparing its statements") // so that the reply dropped is the INSERT's, not a prepare's
			mustRelease(t, a, "a")
			d.armed.Store(true)
			_, typ, msg := acquire(t, a, 500*time.Millisecond)
			if (typ != workloads.ReplyOK) != c.bug {
				t.Fatalf("a, its INSERT's reply lost: %s %q; the bug fails it: %v", typ, msg, c.bug)
			}
			if owner, _ := pgRowOwner(t, w, a.cfg.Path); owner == "" {
				t.Fatal("no row: the first INSERT did not commit")
			}
			if !c.bug {
				mustRelease(t, a, "a")
				mustAcquire(t, b, "b")
				return
			}
			expectTimeout(t, b, "b after a's acquire failed")
		})
	}
}

// TestPgTableMutantTakeoverKeepsToken: A is cut off until its row expires, B takes
// the row over. pg-table-expiry gives B a higher token; the mutant's UPDATE keeps
// A's, so a resource fenced by token takes the stale holder's writes after B's.
func TestPgTableMutantTakeoverKeepsToken(t *testing.T) {
	w := startTestPostgres(t)
	for _, c := range []struct {
		m   pgTableMutant
		bug bool
	}{{pgTableExpiry, false}, {pgTableTakeoverKeepsToken, true}} {
		t.Run(pgTableVariants[c.m].name, func(t *testing.T) {
			counter := "/zlc-test/counter-" + pgTableVariants[c.m].name
			d := &testDialer{host: w.worker}
			a, evA := newTestPgTable(t, w, c.m, 600*time.Millisecond, 1, d, counter)
			b, _ := newTestPgTable(t, w, c.m, 5*time.Second, 2, nil, counter)
			ga := mustAcquire(t, a, "a")
			d.cutOff()
			waitLost(t, evA, 2*time.Second)
			gb := mustAcquire(t, b, "b takes a's expired row over")
			if (tokenOf(t, gb) == tokenOf(t, ga)) != c.bug {
				t.Fatalf("tokens %s then %s; the bug repeats it: %v", ga.Token, gb.Token, c.bug)
			}
			if err := b.Write(context.Background(), 1); err != nil {
				t.Fatal(err)
			}
			d.heal()
			a.owner, a.token = "stale", tokenOf(t, ga) // a writes as a holder that missed its loss would
			defer func() { a.owner = "" }()
			if err := a.Write(context.Background(), 2); errors.Is(err, ErrFenced) == c.bug {
				t.Fatalf("a's stale write after b's: %v; the bug lets it through: %v", err, c.bug)
			}
		})
	}
}

// checkSessionMutants shows the session-lock mutants both databases share next to
// their control.
func checkSessionMutants(t *testing.T, k sessionKit, prefix string) {
	const ttl = 900 * time.Millisecond
	for _, c := range []struct {
		m   sessionMutant
		bug bool
	}{{sessCorrect, false}, {sessPool, true}} {
		t.Run(map[bool]string{false: k.name, true: prefix + "pool"}[c.bug]+"/release", func(t *testing.T) {
			a, _ := k.newLock(t, c.m, workloads.Mutex, ttl, 1)
			b, _ := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 2)
			mustAcquire(t, a, "a")
			mustRelease(t, a, "a")
			if c.bug {
				expectTimeout(t, b, "b after a's release went to another session")
				return
			}
			mustAcquire(t, b, "b after a's release")
		})
	}
	for _, c := range []struct {
		m   sessionMutant
		bug bool
	}{{sessCorrect, false}, {sessUnlockOnce, true}} {
		t.Run(map[bool]string{false: k.name, true: prefix + "unlock-once"}[c.bug]+"/nested", func(t *testing.T) {
			a, _ := k.newLock(t, c.m, workloads.Reentrant, ttl, 1)
			b, _ := k.newLock(t, sessCorrect, workloads.Reentrant, ttl, 2)
			mustAcquire(t, a, "a")
			mustAcquire(t, a, "a again")
			mustRelease(t, a, "a's inner level")
			mustRelease(t, a, "a's outer level")
			if c.bug {
				expectTimeout(t, b, "b after a released both levels")
				return
			}
			mustAcquire(t, b, "b after a released both levels")
		})
	}
	for _, c := range []struct {
		m   sessionMutant
		bug bool
	}{{sessCorrect, false}, {sessNoHeartbeat, true}} {
		t.Run(map[bool]string{false: k.name, true: prefix + "no-heartbeat"}[c.bug]+"/killed", func(t *testing.T) {
			a, evA := k.newLock(t, c.m, workloads.Mutex, ttl, 1)
			b, _ := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 2)
			mustAcquire(t, a, "a")
			k.kill(t, lastSessionID(t, evA))
			if c.bug {
				expectNoLost(t, evA, 2*ttl)
			} else {
				waitLost(t, evA, 2*ttl)
			}
			mustAcquire(t, b, "b after a's session was killed")
			a.mu.Lock()
			holds := a.depth > 0
			a.mu.Unlock()
			if holds != c.bug {
				t.Fatalf("a believes it holds: %v, want %v", holds, c.bug)
			}
		})
	}
}

func TestPgAdvisoryMutants(t *testing.T) {
	w := startTestPostgres(t)
	k := pgAdvisoryKit(w)
	checkSessionMutants(t, k, "mutant-pg-advisory-")
	// pg_advisory_xact_lock outside a transaction: released when its statement ends.
	for _, c := range []struct {
		m   sessionMutant
		bug bool
	}{{sessCorrect, false}, {sessXact, true}} {
		t.Run(map[bool]string{false: k.name, true: "mutant-pg-advisory-xact-lock"}[c.bug], func(t *testing.T) {
			a, _ := k.newLock(t, c.m, workloads.Mutex, time.Second, 1)
			b, _ := k.newLock(t, sessCorrect, workloads.Mutex, time.Second, 2)
			mustAcquire(t, a, "a")
			if c.bug {
				mustAcquire(t, b, "b while a holds")
				return
			}
			expectTimeout(t, b, "b while a holds")
		})
	}
}

func TestMariaDBMutants(t *testing.T) {
	w := startTestMariaDB(t)
	checkSessionMutants(t, mariadbKit(w), "mutant-mariadb-")
}
