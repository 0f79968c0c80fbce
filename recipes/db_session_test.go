package recipes

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// sessionKit builds one database's session-lock recipes for a test and kills a
// session from the server's side.
type sessionKit struct {
	w    *dbWorld
	name string
	// build makes variant m dialling from the worker's namespace.
	build func(ctx context.Context, cfg Config, m sessionMutant, dial dialFunc) (*sessionLock, error)
	// kill ends the session id on the server (pg_terminate_backend, KILL CONNECTION).
	kill func(t *testing.T, id int64)
}

func pgAdvisoryKit(w *dbWorld) sessionKit {
	return sessionKit{w: w, name: "pg-advisory", build: newPgAdvisory, kill: func(t *testing.T, id int64) {
		if _, err := w.pg.Terminate(context.Background(), int(id)); err != nil {
			t.Fatal(err)
		}
	}}
}

func mariadbKit(w *dbWorld) sessionKit {
	return sessionKit{w: w, name: "mariadb-getlock", build: newMariaDBGetLock, kill: func(t *testing.T, id int64) {
		if err := w.maria.KillConnection(context.Background(), 1, uint64(id)); err != nil {
			t.Fatal(err)
		}
	}}
}

// newLock builds variant m for worker, of kind, with session timeout ttl.
func (k sessionKit) newLock(t *testing.T, m sessionMutant, kind workloads.Kind, ttl time.Duration, worker int) (*sessionLock, *recordedEvents) {
	t.Helper()
	cfg, ev := testDBConfig(t, k.w.servers(), kind, ttl, worker)
	d := &testDialer{host: k.w.worker}
	r, err := k.build(context.Background(), cfg, m, d.dial)
	if err != nil {
		t.Fatalf("new %s: %v", k.name, err)
	}
	t.Cleanup(func() { r.Close() })
	return r, ev
}

// checkSessionLock runs the session-lock tests that both databases share.
func checkSessionLock(t *testing.T, k sessionKit) {
	const ttl = 900 * time.Millisecond
	t.Run("mutex", func(t *testing.T) {
		a, _ := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 1)
		b, _ := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 2)
		mustAcquire(t, a, "a")
		if _, typ, _ := acquire(t, a, time.Second); typ != workloads.ReplyFail {
			t.Fatalf("a mutex acquired twice: %s", typ)
		}
		expectTimeout(t, b, "b while a holds")
		mustRelease(t, a, "a")
		if err := a.Release(context.Background()); err == nil {
			t.Fatal("a second release succeeded")
		}
		mustAcquire(t, b, "b")
	})
	t.Run("reentrant", func(t *testing.T) {
		a, _ := k.newLock(t, sessCorrect, workloads.Reentrant, ttl, 1)
		b, _ := k.newLock(t, sessCorrect, workloads.Reentrant, ttl, 2)
		mustAcquire(t, a, "a")
		mustAcquire(t, a, "a again (it stacks)")
		mustRelease(t, a, "a's inner level")
		expectTimeout(t, b, "b while a holds its outer level")
		mustRelease(t, a, "a's outer level")
		mustAcquire(t, b, "b")
	})
	t.Run("killed-session", func(t *testing.T) {
		a, evA := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 1)
		b, _ := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 2)
		mustAcquire(t, a, "a")
		k.kill(t, lastSessionID(t, evA))
		t.Logf("lost: %s", waitLost(t, evA, 2*ttl))
		mustAcquire(t, b, "b after a's session was killed")
		if err := a.Release(context.Background()); err == nil {
			t.Fatal("a released after losing its session")
		}
	})
	t.Run("cancelled-acquire", func(t *testing.T) {
		a, _ := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 1)
		b, evB := k.newLock(t, sessCorrect, workloads.Mutex, ttl, 2)
		mustAcquire(t, a, "a")
		first := lastSessionID(t, evB)
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		start := time.Now()
		_, err := b.Acquire(ctx, AcquireRequest{}) // waits without a timeout until ctx ends
		cancel()
		t.Logf("cancelled after %s: %v", time.Since(start), err)
		if typ, msg := Classify(err); typ != workloads.ReplyInfo || !strings.Contains(msg, "connection is closed") || time.Since(start) < 200*time.Millisecond {
			t.Fatalf("cancelled acquire: %s %q, want info naming the closed connection", typ, msg)
		}
		mustRelease(t, a, "a")
		mustAcquire(t, b, "b on a new session")
		if lastSessionID(t, evB) == first {
			t.Fatal("b kept its session after a cancelled request")
		}
	})
}

func TestPgAdvisory(t *testing.T) {
	w := startTestPostgres(t)
	checkSessionLock(t, pgAdvisoryKit(w))
	t.Run("lock-timeout", func(t *testing.T) {
		k := pgAdvisoryKit(w)
		a, _ := k.newLock(t, sessCorrect, workloads.Mutex, time.Second, 1)
		b, _ := k.newLock(t, sessCorrect, workloads.Mutex, time.Second, 2)
		mustAcquire(t, a, "a")
		start := time.Now()
		_, err := b.Acquire(context.Background(), AcquireRequest{Timeout: 300 * time.Millisecond})
		if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "lock_timeout") {
			t.Fatalf("b: %v, want the server's lock_timeout", err)
		}
		if took := time.Since(start); took < 300*time.Millisecond || took > time.Second {
			t.Fatalf("b's timed acquire took %s", took)
		}
		if !b.d.alive() {
			t.Fatal("a lock_timeout closed the connection")
		}
	})
	// A session the server ended while it held nothing (here: terminated; in a
	// failover, an old primary's orphaned backend that finds its postmaster gone)
	// answers the next acquire with a FATAL reply: not acquired, for certain (a fail
	// the application retries, not an unknown outcome), and the acquire after it
	// opens a new session.
	t.Run("acquire-on-an-ended-session", func(t *testing.T) {
		k := pgAdvisoryKit(w)
		b, evB := k.newLock(t, sessCorrect, workloads.Mutex, 2*time.Second, 2)
		first := lastSessionID(t, evB)
		k.kill(t, first)
		time.Sleep(200 * time.Millisecond)
		_, err := b.Acquire(context.Background(), AcquireRequest{Timeout: time.Second})
		typ, msg := Classify(err)
		t.Logf("acquire on the ended session: %s %q", typ, msg)
		if typ != workloads.ReplyFail {
			t.Fatalf("acquire on a session the server ended: %s %q, want fail", typ, msg)
		}
		mustAcquire(t, b, "b on a new session")
		if lastSessionID(t, evB) == first {
			t.Fatal("b acquired on the ended session")
		}
	})
	// PostgreSQL can grant a waiting session the lock and still end its statement
	// with lock_timeout (55P03): the backend is granted the lock while its timeout is
	// pending (here: stopped while a releases and its lock_timeout passes), and on
	// waking it raises the timeout anyway (proc.c's LockErrorCleanup keeps the
	// grant). A session-level advisory lock survives the failed statement: a recipe
	// that takes 55P03 for "not acquired" keeps a lock it does not know it holds,
	// and every other session waits for it for ever (explore found it as a
	// liveness failure of pg-advisory under a paused server, 2026-11-30).
	t.Run("lock-timeout-after-the-grant", func(t *testing.T) {
		k := pgAdvisoryKit(w)
		a, _ := k.newLock(t, sessCorrect, workloads.Mutex, 2*time.Second, 1)
		b, evB := k.newLock(t, sessCorrect, workloads.Mutex, 2*time.Second, 2)
		c, _ := k.newLock(t, sessCorrect, workloads.Mutex, 2*time.Second, 3)
		mustAcquire(t, a, "a")
		backend := int(lastSessionID(t, evB))
		done := make(chan error, 1)
		go func() {
			_, err := b.Acquire(context.Background(), AcquireRequest{Timeout: 300 * time.Millisecond})
			done <- err
		}()
		time.Sleep(100 * time.Millisecond) // b waits in the server's queue
		if err := syscall.Kill(backend, syscall.SIGSTOP); err != nil {
			t.Fatalf("stopping b's backend %d: %v", backend, err)
		}
		mustRelease(t, a, "a") // grants the lock to b's stopped backend
		time.Sleep(400 * time.Millisecond)
		if err := syscall.Kill(backend, syscall.SIGCONT); err != nil {
			t.Fatalf("resuming b's backend %d: %v", backend, err)
		}
		err := <-done
		t.Logf("b, its backend stopped past its lock_timeout: %v", err)
		if err == nil {
			mustRelease(t, b, "b")
		}
		mustAcquire(t, c, "c, once b was told it has no lock or released it")
	})
}

func TestMariaDBGetLock(t *testing.T) {
	w := startTestMariaDB(t)
	checkSessionLock(t, mariadbKit(w))
	t.Run("fractional-timeout", func(t *testing.T) {
		k := mariadbKit(w)
		a, _ := k.newLock(t, sessCorrect, workloads.Mutex, time.Second, 1)
		b, _ := k.newLock(t, sessCorrect, workloads.Mutex, time.Second, 2)
		mustAcquire(t, a, "a")
		start := time.Now()
		_, err := b.Acquire(context.Background(), AcquireRequest{Timeout: 300 * time.Millisecond})
		if !errors.Is(err, ErrTimeout) {
			t.Fatalf("b: %v, want GET_LOCK's timeout", err)
		}
		if took := time.Since(start); took < 300*time.Millisecond || took > 900*time.Millisecond {
			t.Fatalf("b's acquire with a 0.3s timeout took %s", took)
		}
	})
}
