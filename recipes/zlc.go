package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"strconv"
	"time"

	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// NewZLC returns the constructor of zlc-mutex, this project's reference lock recipe
// (package zlcmutex), when m is zlcmutex.MutantNone, and of one of its deliberately
// broken variants otherwise. Kinds mutex and counter are supported, fenced counter
// writes included. The constructor returns once the first session is established
// (waiting at most twice the session timeout) and reports it, and every later
// session, as an event.
//
// Acquire honours the request's timeout: on timeout the recipe deletes its lock node
// and answers fail "timeout", or info when that delete's outcome is unknown. The
// fencing token is the lock node's czxid. Lost is reported when the connection drops
// or the session expires while the lock is held (the mutant-ignore-lost variant never
// reports it). Release is ok when the node was deleted, fail "not held..." when
// nothing was held or the node was already gone, info otherwise.
func NewZLC(m zlcmutex.Mutant) Constructor {
	return func(ctx context.Context, cfg Config) (Recipe, error) {
		return newZLC(ctx, cfg, m)
	}
}

// zlcRecipe runs a zlcmutex.Lock over a go-zookeeper connection.
type zlcRecipe struct {
	name   string
	cfg    Config
	log    *log.Logger
	client *zlcmutex.ZKClient
	lock   *zlcmutex.Lock
	// stop ends the session reporter; done is closed when it has returned.
	stop chan struct{}
	done chan struct{}
}

var (
	_ Recipe  = (*zlcRecipe)(nil)
	_ Counter = (*zlcRecipe)(nil)
)

func newZLC(ctx context.Context, cfg Config, m zlcmutex.Mutant) (Recipe, error) {
	name := m.String()
	switch {
	case !supports(name, cfg.Kind):
		return nil, Fail(fmt.Errorf("recipe %s does not support kind %s", name, cfg.Kind))
	case cfg.Permits > 1:
		return nil, Fail(fmt.Errorf("recipe %s: a mutex has one permit, got permits %d", name, cfg.Permits))
	case len(cfg.Servers) == 0 || cfg.SessionTimeout <= 0 || cfg.Path == "":
		return nil, Fail(fmt.Errorf("recipe %s: Config needs Servers, SessionTimeout and Path", name))
	case cfg.Kind.HasCounter() && cfg.CounterPath == "":
		return nil, Fail(fmt.Errorf("recipe %s: kind counter needs a counter path", name))
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	if cfg.Events == nil {
		cfg.Events = nopEvents{}
	}
	r := &zlcRecipe{
		name: name,
		cfg:  cfg,
		log:  log.New(logw, fmt.Sprintf("%s[%d] ", name, cfg.Worker), log.LstdFlags|log.Lmicroseconds),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
	client, err := zlcmutex.DialZK(zlcmutex.ZKConfig{Servers: cfg.Servers, SessionTimeout: cfg.SessionTimeout, Logger: r.log})
	if err != nil {
		return nil, Fail(fmt.Errorf("recipe %s: %w", name, err))
	}
	r.client = client
	lock, err := zlcmutex.New(zlcmutex.Config{
		Client:      client,
		Path:        cfg.Path,
		CounterPath: cfg.CounterPath,
		Fenced:      cfg.Fenced,
		Mutant:      m,
		OnLost:      cfg.Events.Lost,
		Logf:        r.log.Printf,
	})
	if err != nil {
		client.Close()
		return nil, Fail(fmt.Errorf("recipe %s: %w", name, err))
	}
	r.lock = lock
	sess, err := waitConnected(ctx, client, 2*cfg.SessionTimeout)
	if err != nil {
		client.Close()
		return nil, Fail(fmt.Errorf("recipe %s: %w", name, err))
	}
	cfg.Events.Session(sess.ID, sessionPasswd(client.Conn()))
	go r.reportSessions(sess.ID)
	return r, nil
}

// waitConnected waits until c has a session, at most wait and until ctx ends.
func waitConnected(ctx context.Context, c zlcmutex.Client, wait time.Duration) (zlcmutex.Session, error) {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		s, changed := c.Session()
		if s.State == zlcmutex.StateConnected {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("waiting for a session: %w", ctx.Err())
		case <-deadline.C:
			return s, fmt.Errorf("no session within %v", wait)
		case <-changed:
		}
	}
}

// reportSessions sends a session event for every new session until stop is closed;
// last is the session already reported.
func (r *zlcRecipe) reportSessions(last int64) {
	defer close(r.done)
	for {
		s, changed := r.client.Session()
		if s.State == zlcmutex.StateConnected && s.ID != last {
			last = s.ID
			r.cfg.Events.Session(s.ID, sessionPasswd(r.client.Conn()))
		}
		select {
		case <-r.stop:
			return
		case <-changed:
			s, _ := r.client.Session()
			r.log.Printf("session 0x%x: %s", uint64(s.ID), s.State)
		}
	}
}

// zlcOutcome classifies a zlcmutex error for the harness.
func zlcOutcome(err error) error {
	switch {
	case err == nil:
		return nil
	case !zlcmutex.Definite(err):
		return Info(err)
	case errors.Is(err, zlcmutex.ErrTimeout):
		return Fail(ErrTimeout)
	case errors.Is(err, zlcmutex.ErrFenced):
		return Fail(ErrFenced)
	}
	return Fail(err)
}

// Acquire implements Recipe.
func (r *zlcRecipe) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if req.Mode != "" {
		return Grant{}, Fail(fmt.Errorf("kind %s has no modes, got mode %q", r.cfg.Kind, req.Mode))
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, req.Timeout, zlcmutex.ErrTimeout)
		defer cancel()
	}
	g, err := r.lock.Acquire(ctx)
	if err != nil {
		return Grant{}, zlcOutcome(err)
	}
	return Grant{Token: json.RawMessage(strconv.FormatInt(g.Token, 10))}, nil
}

// Release implements Recipe. The delete cannot be interrupted, so ctx is unused; the
// client library bounds it by failing requests when the connection drops.
func (r *zlcRecipe) Release(ctx context.Context) error {
	return zlcOutcome(r.lock.Release())
}

// Read implements Counter.
func (r *zlcRecipe) Read(ctx context.Context) (int64, error) {
	v, err := r.lock.Read()
	return v, zlcOutcome(err)
}

// Write implements Counter.
func (r *zlcRecipe) Write(ctx context.Context, v int64) error {
	return zlcOutcome(r.lock.Write(v))
}

// Close implements Recipe: it closes the connection, ending the session.
func (r *zlcRecipe) Close() error {
	select {
	case <-r.stop:
		return nil
	default:
	}
	close(r.stop)
	r.lock.Close()
	r.client.Close()
	<-r.done
	return nil
}
