package recipes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"path"
	"reflect"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/go-zookeeper/zk"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

// NewGoZK builds the gozk recipe: go-zookeeper's own zk.Lock on cfg.Path, used as a
// go-zookeeper user would use it, so that the test judges that recipe, not ours. Kinds
// mutex and counter are supported. It returns once the first session is established (waiting
// at most twice the session timeout) and reports that session as an event.
//
// Acquire runs zk.Lock.Lock, which cannot be interrupted. On timeout the recipe closes
// its connection (ending the session deletes its node), waits for Lock to return,
// opens a new session, and answers fail "timeout" only if, after a sync, no node under
// the lock path is owned by the abandoned session; otherwise info. That reply can
// come up to about 1s plus twice the session timeout after the timeout itself. In a
// fenced run the acquire also finds the node it holds by (the lowest child, owned by
// the session: two round trips) and reports its czxid as the fencing token; if that
// lookup fails the acquire is info rather than ok. Unfenced, it reports no token:
// zk.Lock does not say which node it holds, and the lookup would cost every cycle.
//
// Lost is reported only when go-zookeeper reports the session expired
// (zk.StateExpired, delivered when it reconnects after the expiry) while the lock is
// held. A mere disconnect is not reported: zk.Lock gives its users no signal for it,
// so a cut-off worker keeps "holding" exactly as a go-zookeeper user would.
//
// Release is zk.Lock.Unlock: ok when the node was deleted, fail "not held" when the
// lock was not held or its node was already gone, info otherwise. go-zookeeper does
// not expose the session password; session events carry it all the same, read from
// the connection's internals (see sessionPasswd), so the nemesis can expire the session.
//
// Counter (kind counter): read is a get of the counter node (missing or empty is 0);
// write is a plain set, or, fenced, a multi of check(lock node) + set that fails with
// ErrFenced when the lock node is gone. The lock node is the one found at acquire
// time by its ephemeral owner (an acquire that cannot find exactly one is info), so
// gozk can fence. A missing counter node is created empty and the write retried.
func NewGoZK(ctx context.Context, cfg Config) (Recipe, error) {
	if !supports("gozk", cfg.Kind) {
		return nil, Fail(fmt.Errorf("recipe gozk does not support kind %s", cfg.Kind))
	}
	if cfg.Kind.HasCounter() && cfg.CounterPath == "" {
		return nil, Fail(errors.New("recipe gozk: kind counter needs a counter path"))
	}
	if cfg.Permits > 1 {
		return nil, Fail(fmt.Errorf("recipe gozk: a mutex has one permit, got permits %d", cfg.Permits))
	}
	if len(cfg.Servers) == 0 || cfg.SessionTimeout <= 0 || cfg.Path == "" {
		return nil, Fail(errors.New("recipe gozk: Config needs Servers, SessionTimeout and Path"))
	}
	logw := cfg.Log
	if logw == nil {
		logw = io.Discard
	}
	if cfg.Events == nil {
		cfg.Events = nopEvents{}
	}
	r := &goZK{
		cfg: cfg,
		log: log.New(logw, fmt.Sprintf("gozk[%d] ", cfg.Worker), log.LstdFlags|log.Lmicroseconds),
		acl: zk.WorldACL(zk.PermAll),
	}
	if err := r.connect(ctx, 2*cfg.SessionTimeout); err != nil {
		return nil, Fail(fmt.Errorf("recipe gozk: %w", err))
	}
	return r, nil
}

// goZK is the gozk recipe. Serve calls its methods one at a time; the client
// library's event callback runs concurrently and shares the fields under mu.
type goZK struct {
	cfg Config
	log *log.Logger
	acl []zk.ACL

	// lock is used by the request goroutine only.
	lock *zk.Lock
	// node is the lock node of the last successful acquire, found by its ephemeral
	// owner; "" after a release. Used by the request goroutine only.
	node string

	mu sync.Mutex
	// conn is the current connection; written under mu by the request goroutine,
	// which may read it without mu.
	conn *zk.Conn
	// gen numbers connections; callbacks of a retired connection are ignored.
	gen uint64
	// expiries counts session expiries of the current connection.
	expiries uint64
	// holding: the last acquire succeeded and nothing has released or lost it.
	holding bool
	// stale: lock still names a node that is gone (after lost or a release that
	// found no node), so the next acquire needs a new zk.Lock.
	stale bool
	// reported is the last session id sent as a session event.
	reported int64

	// dead, once set, is why the recipe has no usable connection (after an
	// interrupted or failed abandon); used by the request goroutine only.
	dead error
}

// nopEvents discards events (a Config built outside Serve may have none).
type nopEvents struct{}

func (nopEvents) Lost(string)           {}
func (nopEvents) Session(int64, []byte) {}
func (nopEvents) Renewed()              {}

// connect opens a new connection, waits at most wait for its session and reports it.
func (r *goZK) connect(ctx context.Context, wait time.Duration) error {
	r.mu.Lock()
	r.gen++
	gen := r.gen
	r.conn = nil
	r.expiries = 0
	r.mu.Unlock()

	opts := append([]func(*zk.Conn){
		zk.WithLogger(r.log),
		zk.WithEventCallback(func(ev zk.Event) { r.onEvent(gen, ev) }),
	}, r.cfg.ZKOptions...)
	conn, _, err := zk.Connect(r.cfg.Servers, r.cfg.SessionTimeout, func(c *zk.Conn) {
		for _, o := range opts {
			o(c)
		}
	})
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	r.mu.Lock()
	r.conn = conn
	r.mu.Unlock()

	if err := waitSession(ctx, conn, wait); err != nil {
		r.retire()
		conn.Close()
		return err
	}
	r.mu.Lock()
	r.reportSessionLocked(conn.SessionID(), sessionPasswd(conn))
	r.mu.Unlock()
	r.lock = zk.NewLock(conn, r.cfg.Path, r.acl)
	return nil
}

// waitSession polls until conn has a session, wait passes or ctx ends.
func waitSession(ctx context.Context, conn *zk.Conn, wait time.Duration) error {
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for a session: %w", ctx.Err())
		case <-deadline.C:
			return fmt.Errorf("no session within %v", wait)
		case <-tick.C:
		}
	}
	return nil
}

// retire makes the current connection's callbacks irrelevant; nothing is held
// through a connection that is being closed.
func (r *goZK) retire() {
	r.mu.Lock()
	r.gen++
	r.holding = false
	r.mu.Unlock()
}

// onEvent is the client library's event callback; it must not block.
func (r *goZK) onEvent(gen uint64, ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if gen != r.gen {
		return
	}
	switch ev.State {
	case zk.StateExpired:
		r.expiries++
		if r.holding {
			r.holding = false
			r.stale = true
			r.cfg.Events.Lost("session expired")
		}
	case zk.StateHasSession:
		if r.conn != nil {
			r.reportSessionLocked(r.conn.SessionID(), sessionPasswd(r.conn))
		}
	}
}

// reportSessionLocked sends a session event for id unless it was sent already.
func (r *goZK) reportSessionLocked(id int64, passwd []byte) {
	if id == 0 || id == r.reported {
		return
	}
	r.reported = id
	r.cfg.Events.Session(id, passwd)
}

// sessionPasswd reads the session password go-zookeeper keeps in the unexported field
// passwd of *zk.Conn. The library offers no accessor; the nemesis needs the password
// to expire the worker's session on the servers (the closeSession trick). This reaches
// into the library's internals on purpose and degrades to nil (no password reported)
// if a future version renames the field. The field is written before the library
// announces StateHasSession, which is when this is called.
func sessionPasswd(conn *zk.Conn) []byte {
	f := reflect.ValueOf(conn).Elem().FieldByName("passwd")
	if !f.IsValid() || f.Kind() != reflect.Slice || f.Type().Elem().Kind() != reflect.Uint8 {
		return nil
	}
	b := *(*[]byte)(unsafe.Pointer(f.UnsafeAddr()))
	return append([]byte(nil), b...)
}

// Acquire implements Recipe.
func (r *goZK) Acquire(ctx context.Context, req AcquireRequest) (Grant, error) {
	if req.Mode != "" {
		return Grant{}, Fail(fmt.Errorf("kind mutex has no modes, got mode %q", req.Mode))
	}
	if r.dead != nil {
		return Grant{}, Info(r.dead)
	}
	r.node = ""
	r.mu.Lock()
	if r.stale {
		r.lock = zk.NewLock(r.conn, r.cfg.Path, r.acl)
		r.stale = false
	}
	r.mu.Unlock()

	lk := r.lock
	result := make(chan error, 1)
	go func() { result <- lk.Lock() }()

	var timeout <-chan time.Time
	if req.Timeout > 0 {
		t := time.NewTimer(req.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	select {
	case err := <-result:
		return r.locked(err)
	case <-timeout:
	case <-ctx.Done():
	}
	// A result that is already there wins over the timeout.
	select {
	case err := <-result:
		return r.locked(err)
	default:
	}
	return Grant{}, r.abandon(ctx, result)
}

// locked turns the result of zk.Lock.Lock into the acquire's outcome.
func (r *goZK) locked(err error) (Grant, error) {
	if err != nil {
		if errors.Is(err, zk.ErrDeadlock) {
			return Grant{}, Fail(err)
		}
		// The lock node may have been created; only a new worker can go on.
		return Grant{}, Info(fmt.Errorf("lock: %w", err))
	}
	r.mu.Lock()
	expiries := r.expiries
	r.mu.Unlock()
	if !r.cfg.Fenced {
		// zk.Lock does not say which node it holds by; finding it costs two round
		// trips per cycle (5 points of the harness/plain ratio, BENCHMARKS.md), so
		// only a fenced run, whose writes check the node, looks it up.
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.expiries != expiries {
			return Grant{}, Info(errors.New("locked, but the session expired right after"))
		}
		r.holding = true
		return Grant{}, nil
	}

	sid := r.conn.SessionID()
	nodes, err := r.holderNode(sid)
	switch {
	case err != nil:
		return Grant{}, Info(fmt.Errorf("locked, but looking up the lock node failed: %w", err))
	case len(nodes) != 1:
		return Grant{}, Info(fmt.Errorf("locked, but session %s owns %d nodes under %s", FormatSessionID(sid), len(nodes), r.cfg.Path))
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if r.expiries != expiries {
		return Grant{}, Info(errors.New("locked, but the session expired right after"))
	}
	r.holding = true
	r.node = nodes[0].path
	r.log.Printf("holding %s (czxid %d)", nodes[0].path, nodes[0].czxid)
	return Grant{Token: json.RawMessage(strconv.FormatInt(nodes[0].czxid, 10))}, nil
}

// abandon ends an acquire that ran out of time: it closes the connection, opens a
// new one, and returns Fail(ErrTimeout) only if the abandoned session certainly
// holds no lock node. Each wait (for Lock to return, for the new session) is bounded
// by the session timeout, so the reply comes at most about 1s (closing) plus twice
// the session timeout after the acquire's own timeout.
func (r *goZK) abandon(ctx context.Context, result <-chan error) error {
	old := r.conn
	r.retire()
	old.Close()

	wait := r.cfg.SessionTimeout
	var lockErr error
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case lockErr = <-result:
	case <-t.C:
		r.dead = fmt.Errorf("timeout, and Lock did not return within %v of closing its connection", wait)
		return Info(r.dead)
	}
	oldSID := old.SessionID()

	if ctx.Err() != nil {
		r.dead = fmt.Errorf("acquire interrupted: %w", ctx.Err())
		return Info(r.dead)
	}
	if err := r.connect(ctx, wait); err != nil {
		r.dead = fmt.Errorf("timeout, and reconnecting to check the abandoned session failed: %w", err)
		return Info(r.dead)
	}
	if err := r.checkGone(oldSID); err != nil {
		return Info(fmt.Errorf("timeout, and %w", err))
	}
	r.log.Printf("acquire timed out (Lock returned %v); session %s closed, none of its nodes left",
		lockErr, FormatSessionID(oldSID))
	return Fail(ErrTimeout)
}

// checkGone returns nil if no node under the lock path is owned by session sid,
// as seen after a sync through the current connection.
func (r *goZK) checkGone(sid int64) error {
	if sid == 0 {
		return nil // the connection never had a live session to own a node
	}
	if _, err := r.conn.Sync(r.cfg.Path); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("checking the abandoned session: sync: %w", err)
	}
	nodes, err := r.nodesOwnedBy(sid)
	if err != nil {
		return fmt.Errorf("checking the abandoned session: %w", err)
	}
	if len(nodes) > 0 {
		return fmt.Errorf("abandoned session %s still owns %s", FormatSessionID(sid), nodes[0].path)
	}
	return nil
}

// lockNode is a child of the lock path.
type lockNode struct {
	path  string
	czxid int64
}

// holderNode finds the node zk.Lock just acquired with: the child with the lowest
// sequence number, if session sid owns it (two round trips, however long the queue);
// otherwise, for the diagnosis, every node sid owns.
func (r *goZK) holderNode(sid int64) ([]lockNode, error) {
	children, _, err := r.conn.Children(r.cfg.Path)
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", r.cfg.Path, err)
	}
	lowest, lowestSeq := "", int64(-1)
	for _, c := range children {
		if seq, ok := sequenceOf(c); ok && (lowestSeq < 0 || seq < lowestSeq) {
			lowest, lowestSeq = c, seq
		}
	}
	if lowest != "" {
		p := r.cfg.Path + "/" + lowest
		ok, st, err := r.conn.Exists(p)
		if err != nil {
			return nil, fmt.Errorf("exists %s: %w", p, err)
		}
		if ok && st.EphemeralOwner == sid {
			return []lockNode{{path: p, czxid: st.Czxid}}, nil
		}
	}
	return r.nodesOwnedBy(sid)
}

// sequenceOf returns the sequence number a sequential node's name ends with.
func sequenceOf(name string) (int64, bool) {
	i := len(name)
	for i > 0 && name[i-1] >= '0' && name[i-1] <= '9' {
		i--
	}
	if len(name)-i != 10 {
		return 0, false
	}
	seq, err := strconv.ParseInt(name[i:], 10, 64)
	return seq, err == nil
}

// nodesOwnedBy lists the children of the lock path that are ephemeral nodes of
// session sid.
func (r *goZK) nodesOwnedBy(sid int64) ([]lockNode, error) {
	children, _, err := r.conn.Children(r.cfg.Path)
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("children of %s: %w", r.cfg.Path, err)
	}
	var owned []lockNode
	for _, c := range children {
		p := r.cfg.Path + "/" + c
		ok, st, err := r.conn.Exists(p)
		if err != nil {
			return nil, fmt.Errorf("exists %s: %w", p, err)
		}
		if ok && st.EphemeralOwner == sid {
			owned = append(owned, lockNode{path: p, czxid: st.Czxid})
		}
	}
	return owned, nil
}

// Release implements Recipe. zk.Lock.Unlock cannot be interrupted, so ctx is unused;
// the client library bounds it by failing requests when the connection drops.
func (r *goZK) Release(ctx context.Context) error {
	if r.dead != nil {
		return Info(r.dead)
	}
	err := r.lock.Unlock()
	r.node = ""
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case err == nil:
		r.holding = false
		return nil
	case errors.Is(err, zk.ErrNotLocked):
		r.holding = false
		return Fail(errors.New("not held"))
	case errors.Is(err, zk.ErrNoNode):
		r.holding = false
		r.stale = true
		return Fail(errors.New("not held: the lock node was already gone"))
	default:
		return Info(fmt.Errorf("unlock: %w", err))
	}
}

var (
	_ Recipe  = (*goZK)(nil)
	_ Counter = (*goZK)(nil)
)

// Read implements Counter.
func (r *goZK) Read(ctx context.Context) (int64, error) {
	if r.dead != nil {
		return 0, Info(r.dead)
	}
	if r.cfg.CounterPath == "" {
		return 0, Fail(errors.New("no counter path in init"))
	}
	data, _, err := r.conn.Get(r.cfg.CounterPath)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0, nil
	case err != nil:
		// A read changes nothing: its failure is definite.
		return 0, Fail(fmt.Errorf("read %s: %w", r.cfg.CounterPath, err))
	}
	v, err := zlcmutex.ParseCounter(data)
	if err != nil {
		return 0, Fail(fmt.Errorf("read %s: %w", r.cfg.CounterPath, err))
	}
	return v, nil
}

// Write implements Counter.
func (r *goZK) Write(ctx context.Context, v int64) error {
	if r.dead != nil {
		return Info(r.dead)
	}
	if r.cfg.CounterPath == "" {
		return Fail(errors.New("no counter path in init"))
	}
	if r.cfg.Fenced && r.node == "" {
		return Fail(ErrFenced)
	}
	data := zlcmutex.FormatCounter(v)
	for attempt := 0; ; attempt++ {
		var err, counterErr error
		if r.cfg.Fenced {
			var res []zk.MultiResponse
			res, err = r.conn.Multi(
				&zk.CheckVersionRequest{Path: r.node, Version: -1},
				&zk.SetDataRequest{Path: r.cfg.CounterPath, Data: data, Version: -1})
			if err != nil && len(res) == 2 {
				// Refused by the server: nothing was applied; the op that failed says why.
				if errors.Is(res[0].Error, zk.ErrNoNode) {
					return Fail(ErrFenced)
				}
				counterErr = res[1].Error
				if counterErr == nil {
					counterErr = err
				}
			}
		} else {
			_, err = r.conn.Set(r.cfg.CounterPath, data, -1)
			counterErr = err
		}
		switch {
		case err == nil:
			return nil
		case errors.Is(counterErr, zk.ErrNoNode) && attempt < 2:
			if cerr := zkCreateAll(r.conn, r.cfg.CounterPath); cerr != nil {
				return Fail(fmt.Errorf("write: creating %s: %w", r.cfg.CounterPath, cerr))
			}
		case errors.Is(counterErr, zk.ErrNoNode), errors.Is(counterErr, zk.ErrBadVersion), errors.Is(counterErr, zk.ErrNoAuth):
			return Fail(fmt.Errorf("write %s: %w", r.cfg.CounterPath, err))
		default:
			return Info(fmt.Errorf("write %s: %w", r.cfg.CounterPath, err))
		}
	}
}

// zkCreateAll creates the persistent node p, empty, with its missing parents; a node
// that exists is left alone.
func zkCreateAll(conn *zk.Conn, p string) error {
	acl := zk.WorldACL(zk.PermAll)
	_, err := conn.Create(p, nil, 0, acl)
	if errors.Is(err, zk.ErrNoNode) {
		if parent := path.Dir(p); parent != "/" {
			if err := zkCreateAll(conn, parent); err != nil {
				return err
			}
		}
		_, err = conn.Create(p, nil, 0, acl)
	}
	if err == nil || errors.Is(err, zk.ErrNodeExists) {
		return nil
	}
	return err
}

// Close implements Recipe: it closes the connection, ending the session.
func (r *goZK) Close() error {
	r.retire()
	if r.conn != nil {
		r.conn.Close()
	}
	return nil
}
