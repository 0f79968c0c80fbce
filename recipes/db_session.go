package recipes

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// sessionDriver is one database session that holds named, stacking locks: a
// PostgreSQL advisory lock on a pgx connection (pg-advisory) or a MariaDB GET_LOCK
// on one database/sql connection (mariadb-getlock). Its methods are called one at a
// time (sessionLock.mu).
type sessionDriver interface {
	// open makes sure a connection is open, opening a new session (and reporting its
	// id) when there is none. Its failure wraps errPollAgain: nothing was sent.
	open(ctx context.Context) error
	// lock waits up to timeout (0: until ctx ends) for one more level of the lock.
	// A refusal for the timeout is Fail(ErrTimeout).
	lock(ctx context.Context, timeout time.Duration) error
	// unlock releases one level; false when the session did not hold the lock.
	unlock(ctx context.Context) (bool, error)
	// ping runs a trivial query on the session.
	ping(ctx context.Context) error
	// definite reports whether an error of lock or unlock certainly changed nothing.
	definite(err error) bool
	// ended reports whether err is the server ending the session itself (a FATAL
	// reply, such as a primary's orphaned backend finding its postmaster gone):
	// whatever the request did, no lock of that session survives it.
	ended(err error) bool
	// drop closes the connection, ending the session and so every lock it holds.
	drop()
	// alive reports whether the connection is open (as far as the client knows).
	alive() bool
	// place says where the lock lives: the session's connection and the lock's key
	// (workloads.LockPlace), for the acquire's ok.
	place() workloads.LockPlace
}

// sessionMutant is a deliberately broken variant of a session lock, or sessCorrect.
type sessionMutant int

// The variants of pg-advisory and mariadb-getlock.
const (
	sessCorrect sessionMutant = iota
	// sessXact (PostgreSQL only) locks with pg_advisory_xact_lock outside any
	// transaction: the statement's implicit transaction ends at once, and the lock
	// with it. Its release ignores pg_advisory_unlock's false.
	sessXact
	// sessPool unlocks through a second connection, as a pool hands out whichever
	// connection is idle: another session, which does not hold the lock (the
	// unlock's false is ignored).
	sessPool
	// sessUnlockOnce counts nested acquires in the client, locks on the server each
	// time, and unlocks on the server only at the outermost release: once.
	sessUnlockOnce
	// sessNoHeartbeat has no heartbeat: it never reports lost.
	sessNoHeartbeat
)

// sessionLock is a lock held by a database session: acquires stack (the reentrant
// workload), a heartbeat (SELECT 1 every third of the session timeout while held)
// reports lost when the session is gone, and any request whose outcome is unknown
// ends the session (the drivers close the connection when a request's context ends
// mid-flight; the recipe then closes it in every such case, so its state is known:
// the server frees the session's locks), reporting lost for the levels it held.
type sessionLock struct {
	name  string
	m     sessionMutant
	cfg   Config
	log   *log.Logger
	d     sessionDriver
	other sessionDriver // sessPool: the connection unlocks go through

	mu    sync.Mutex
	depth int // levels held on the server (sessUnlockOnce: in the client)
	hb    chan struct{}
	done  chan struct{}
}

var _ Recipe = (*sessionLock)(nil)

// newSessionLock opens d's session (trying again for up to the session timeout)
// and starts the heartbeat.
func newSessionLock(ctx context.Context, name string, m sessionMutant, cfg Config, logger *log.Logger, d, other sessionDriver) (*sessionLock, error) {
	r := &sessionLock{name: name, m: m, cfg: cfg, log: logger, d: d, other: other}
	if err := r.openUntil(ctx, time.Now().Add(cfg.SessionTimeout)); err != nil {
		d.drop()
		return nil, fmt.Errorf("recipe %s: gave up after the session timeout (%s): %w", name, cfg.SessionTimeout, err)
	}
	if m != sessNoHeartbeat {
		r.hb, r.done = make(chan struct{}), make(chan struct{})
		go r.heartbeat()
	}
	return r, nil
}

// openUntil opens the session, trying again every redisInitPause until deadline.
func (r *sessionLock) openUntil(ctx context.Context, deadline time.Time) error {
	for {
		err := r.d.open(ctx)
		if err == nil {
			return nil
		}
		r.log.Printf("open: %v", err)
		if werr := pollWait(ctx, deadline, redisInitPause, err); werr != nil {
			return werr
		}
	}
}

// Acquire implements Recipe.
func (r *sessionLock) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if req.Mode != "" {
		return Grant{}, Fail(fmt.Errorf("kind %s has no modes, got mode %q", r.cfg.Kind, req.Mode))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.depth > 0 && r.cfg.Kind != workloads.Reentrant {
		return Grant{}, Fail(errors.New("already held"))
	}
	if r.depth > 0 && !r.d.alive() {
		r.endSession("the connection closed")
		return Grant{}, Fail(errors.New("the session holding the lock is gone (lost reported)"))
	}
	if r.depth == 0 {
		if err := r.openUntil(ctx, deadlineOf(req.Timeout)); err != nil {
			return Grant{}, err
		}
	}
	err := r.d.lock(ctx, req.Timeout)
	switch {
	case err == nil:
		r.depth++
		p := r.d.place()
		return Grant{Lock: &p}, nil
	case errors.Is(err, ErrTimeout) || definiteFail(err):
		return Grant{}, err
	case r.d.definite(err):
		return Grant{}, Fail(fmt.Errorf("acquire: %w", err))
	case r.depth == 0 && r.d.ended(err):
		// The session held nothing before, and whatever this request took went
		// with it: not acquired, for certain, and the next acquire opens a new one.
		r.d.drop()
		return Grant{}, Fail(fmt.Errorf("acquire: %w (the server ended the session: it holds nothing)", err))
	}
	r.endSession("the acquire's outcome is unknown")
	return Grant{}, Info(fmt.Errorf("acquire: %w (the connection is closed: the session, and any lock it took, is gone)", err))
}

// definiteFail reports whether err is already classified as a definite failure.
func definiteFail(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Outcome == OutcomeFail
}

// endSession closes the session after a request whose outcome is unknown and
// reports lost when it held levels. r.mu is held.
func (r *sessionLock) endSession(why string) {
	r.d.drop()
	if r.depth > 0 {
		r.depth = 0
		r.cfg.Events.Lost(why + ": the connection was closed, and the session's locks with it")
	}
}

// Release implements Recipe: one level.
func (r *sessionLock) Release(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.depth == 0 {
		return Fail(errors.New("not held (or the session was lost)"))
	}
	if !r.d.alive() {
		r.endSession("the connection closed")
		return Fail(errors.New("not held: the session is gone (lost reported)"))
	}
	if r.m == sessUnlockOnce && r.depth > 1 {
		r.depth--
		return nil
	}
	d := r.d
	if r.m == sessPool {
		if err := r.other.open(ctx); err != nil {
			return Fail(fmt.Errorf("release: %w", err))
		}
		d = r.other
	}
	ok, err := d.unlock(ctx)
	switch {
	case err == nil && (ok || r.m == sessXact || r.m == sessPool):
		r.depth--
		return nil
	case err == nil:
		r.depth = 0
		return Fail(errors.New("not held: the server says this session does not hold the lock"))
	case d.definite(err):
		return Fail(fmt.Errorf("release: %w", err))
	}
	r.depth--
	r.endSession("the release's outcome is unknown")
	return Info(fmt.Errorf("release: %w (the connection is closed: the session's locks are freed once the server sees it)", err))
}

// heartbeat pings the session every third of the session timeout while it holds the
// lock, and ends it, reporting lost, when a ping fails. A ping waits for no request:
// when one is running it is skipped (that request tests the connection itself).
func (r *sessionLock) heartbeat() {
	defer close(r.done)
	t := time.NewTicker(r.cfg.SessionTimeout / 3)
	defer t.Stop()
	for {
		select {
		case <-r.hb:
			return
		case <-t.C:
		}
		if !r.mu.TryLock() {
			continue
		}
		if r.depth > 0 {
			if err := r.d.ping(context.Background()); err != nil {
				r.log.Printf("heartbeat: %v", err)
				r.endSession(fmt.Sprintf("heartbeat: the session is gone (%v)", err))
			}
		}
		r.mu.Unlock()
	}
}

// Close implements Recipe: it stops the heartbeat and closes the connection, which
// ends the session and frees what it held.
func (r *sessionLock) Close() error {
	if r.hb != nil {
		close(r.hb)
		<-r.done
		r.hb = nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.depth = 0
	r.d.drop()
	if r.other != nil {
		r.other.drop()
	}
	return nil
}
