package zlcmutex

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// protectedPrefix starts the name of a protected lock node, as in Curator.
const protectedPrefix = "_c_"

// Config is what a Lock is built from.
type Config struct {
	// Client is the ZooKeeper client; the Lock never closes it.
	Client Client
	// Path is the lock's znode; lock nodes are its children. It is created (with its
	// parents) when missing.
	Path string
	// CounterPath is the counter znode of the counter workload; empty when unused.
	CounterPath string
	// Fenced makes counter writes conditional on the lock node still existing.
	Fenced bool
	// Mutant selects a deliberate bug; MutantNone (zero) is the correct recipe.
	Mutant Mutant
	// OnLost is called, at most once per hold, when the lock is lost while held. It
	// must not block; it may be called from another goroutine. Nil ignores it.
	OnLost func(reason string)
	// Logf receives diagnostics; nil discards them.
	Logf func(format string, args ...any)
	// NewGUID returns the unique part of a protected node name; nil uses 16 random
	// bytes in hex. A simulator can make it deterministic.
	NewGUID func() string
	// Retry is the pause before retrying after an error while the client still says
	// it is connected; zero means 20ms. (While it is not connected, the lock waits for
	// the session state to change instead.)
	Retry time.Duration
}

// Grant is a successful acquire.
type Grant struct {
	// Node is the lock node's path.
	Node string
	// Token is the lock node's czxid: it grows with every grant of the lock.
	Token int64
}

// Lock is one client's handle on one lock. Acquire, Release, Read, Write and Close
// must be called one at a time; OnLost may run concurrently with them.
type Lock struct {
	cfg Config

	// Used by the calling goroutine only.
	parentReady bool
	// withdrawn is the predecessor watch a given-up acquire left armed
	// (mutant-withdrawn-watch only).
	withdrawn <-chan Event
	// stale are nodes of ours whose deletion is uncertain; they are deleted before
	// the next acquire.
	stale []string

	mu sync.Mutex
	// node is the held lock node ("" when nothing is held); lost says the hold ended
	// without a release (OnLost was called, or a fenced write found the node gone).
	node  string
	lost  bool
	stop  chan struct{}
	watch chan struct{} // closed when the hold's monitor has returned
}

// New returns a Lock; it does not talk to ZooKeeper yet.
func New(cfg Config) (*Lock, error) {
	if cfg.Client == nil {
		return nil, errors.New("zlcmutex: Config needs a Client")
	}
	if !validPath(cfg.Path) {
		return nil, fmt.Errorf("zlcmutex: lock path %q is not an absolute znode path", cfg.Path)
	}
	if cfg.CounterPath != "" && !validPath(cfg.CounterPath) {
		return nil, fmt.Errorf("zlcmutex: counter path %q is not an absolute znode path", cfg.CounterPath)
	}
	if cfg.CounterPath != "" && strings.HasPrefix(cfg.CounterPath+"/", cfg.Path+"/") {
		return nil, fmt.Errorf("zlcmutex: counter path %q must not be under the lock path %q", cfg.CounterPath, cfg.Path)
	}
	if _, ok := cfg.Client.(ChildWatcher); cfg.Mutant == MutantHerd && !ok {
		return nil, fmt.Errorf("zlcmutex: %s needs a Client that can watch children (ChildWatcher)", cfg.Mutant)
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	if cfg.OnLost == nil {
		cfg.OnLost = func(string) {}
	}
	if cfg.NewGUID == nil {
		cfg.NewGUID = randomGUID
	}
	if cfg.Retry <= 0 {
		cfg.Retry = 20 * time.Millisecond
	}
	return &Lock{cfg: cfg}, nil
}

func validPath(p string) bool {
	return strings.HasPrefix(p, "/") && len(p) > 1 && !strings.HasSuffix(p, "/") && !strings.Contains(p, "//")
}

func randomGUID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Acquire waits until the lock is held or ctx ends. A ctx that ends leaves nothing
// behind when the error is definite: ErrTimeout when ctx's deadline passed (or its
// cause is ErrTimeout), otherwise the cause. Definite reports which errors certainly
// had no effect; after any other error a lock node of this client may exist.
func (l *Lock) Acquire(ctx context.Context) (Grant, error) {
	l.mu.Lock()
	held, lost := l.node, l.lost
	l.mu.Unlock()
	l.lateWake()
	if held != "" && !lost {
		return Grant{}, definite(ErrAlreadyHeld)
	}
	if held != "" {
		// A lost hold's node may still exist (a disconnect does not end the session).
		l.endHold()
		l.stale = append(l.stale, held)
	}
	// Nothing of this acquire exists yet: whatever goes wrong now is definite.
	if err := l.retry(ctx, l.deleteStale); err != nil {
		return Grant{}, l.failBeforeCreate(ctx, fmt.Errorf("deleting an earlier lock node: %w", err))
	}
	if err := l.retry(ctx, l.ensureParent); err != nil {
		return Grant{}, l.failBeforeCreate(ctx, fmt.Errorf("creating the lock path %s: %w", l.cfg.Path, err))
	}
	for {
		node, err := l.create(ctx)
		if err != nil {
			return Grant{}, err
		}
		g, again, err := l.wait(ctx, node)
		if again {
			continue
		}
		return g, err
	}
}

// failBeforeCreate is the definite error of an acquire that stopped before it created
// a node: the timeout (or other cause) when ctx ended, err otherwise.
func (l *Lock) failBeforeCreate(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		l.cfg.Logf("gave up (%v): %v", context.Cause(ctx), err)
		return gaveUp(ctx)
	}
	return definite(err)
}

// create makes this acquire's lock node and returns its path. When a create's reply
// is lost, it looks for the node by its GUID (after a sync) before trying again.
func (l *Lock) create(ctx context.Context) (string, error) {
	c := l.cfg.Client
	protected := l.cfg.Mutant != MutantUnprotectedCreate
	guid, name := "", l.cfg.Path+"/lock-"
	if protected {
		guid = l.cfg.NewGUID()
		name = l.cfg.Path + "/" + protectedPrefix + guid + "-lock-"
	}
	// uncertain: an earlier attempt may have created a node.
	uncertain := false
	var doubt error
	for {
		if uncertain && protected {
			node, err := l.findOwn(guid)
			switch {
			case err == nil && node != "":
				l.cfg.Logf("create of %s: reply lost (%v), found the node %s", name, doubt, node)
				return node, nil
			case err == nil:
				uncertain = false
			case errors.Is(err, ErrClosed):
				return "", fmt.Errorf("creating the lock node: %v, then looking for it: %w", doubt, err)
			default:
				if perr := l.pause(ctx); perr != nil {
					return "", fmt.Errorf("gave up (%v) while the create of the lock node is in doubt: %v; looking for it: %w", perr, doubt, err)
				}
				continue
			}
		}
		if err := ctx.Err(); err != nil {
			if uncertain {
				return "", fmt.Errorf("gave up (%v) while the create of the lock node is in doubt: %w", context.Cause(ctx), doubt)
			}
			return "", gaveUp(ctx)
		}
		node, err := c.Create(name, nil, FlagEphemeral|FlagSequential)
		switch {
		case err == nil:
			return node, nil
		case errors.Is(err, ErrNoNode):
			// The lock path is gone, and with it any node of ours.
			uncertain = false
			l.parentReady = false
			if err := l.retry(ctx, l.ensureParent); err != nil {
				return "", l.failBeforeCreate(ctx, fmt.Errorf("creating the lock path %s: %w", l.cfg.Path, err))
			}
		case errors.Is(err, ErrSessionExpired):
			// Whatever the expired session created died with it.
			uncertain = false
			if perr := l.pause(ctx); errors.Is(perr, ErrClosed) {
				return "", fmt.Errorf("creating the lock node: %w", perr)
			} else if perr != nil {
				return "", gaveUp(ctx)
			}
		case definiteClientError(err) && !uncertain:
			return "", definite(fmt.Errorf("creating the lock node: %w", err))
		case errors.Is(err, ErrClosed):
			return "", fmt.Errorf("creating the lock node: %w", err)
		default:
			uncertain, doubt = true, err
			l.cfg.Logf("create of %s: %v", name, err)
			if !protected {
				// The mutant retries blindly; the node it may have created stays.
				if perr := l.pause(ctx); perr != nil {
					return "", fmt.Errorf("gave up (%v) while the create of the lock node is in doubt: %w", perr, doubt)
				}
			}
		}
	}
}

// findOwn syncs, then returns the child of the lock path whose name carries guid,
// or "" when there is none.
func (l *Lock) findOwn(guid string) (string, error) {
	c := l.cfg.Client
	if err := c.Sync(l.cfg.Path); err != nil && !errors.Is(err, ErrNoNode) {
		return "", fmt.Errorf("sync: %w", err)
	}
	children, err := c.Children(l.cfg.Path)
	if errors.Is(err, ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("children: %w", err)
	}
	for _, ch := range children {
		if strings.HasPrefix(ch, protectedPrefix+guid+"-") {
			return l.cfg.Path + "/" + ch, nil
		}
	}
	return "", nil
}

// wait waits until node is the lock holder and returns the grant. again says node
// is gone (its session expired, or someone deleted it) and the acquire must start
// over with a new node.
func (l *Lock) wait(ctx context.Context, node string) (g Grant, again bool, err error) {
	c := l.cfg.Client
	name := path.Base(node)
	var armed <-chan Event // the predecessor watch set last (mutant-withdrawn-watch)
	for {
		if ctx.Err() != nil {
			err := l.abandon(ctx, node)
			if l.cfg.Mutant == MutantWithdrawnWatch {
				l.withdrawn = armed
			}
			return Grant{}, false, err
		}
		children, childWatch, err := l.children()
		switch {
		case errors.Is(err, ErrNoNode):
			l.cfg.Logf("lock path %s is gone, and with it %s", l.cfg.Path, node)
			return Grant{}, true, nil
		case errors.Is(err, ErrClosed):
			return Grant{}, false, fmt.Errorf("reading the queue: %w", err)
		case err != nil:
			l.cfg.Logf("children of %s: %v", l.cfg.Path, err)
			l.pause(ctx)
			continue
		}
		queue := sortQueue(children)
		i := slices.Index(queue, name)
		if i < 0 {
			l.cfg.Logf("lock node %s is gone; creating a new one", node)
			return Grant{}, true, nil
		}
		holds := i == 0 || (l.cfg.Mutant == MutantOffByOne && i == 1)
		if !holds && childWatch != nil {
			l.awaitChildren(ctx, childWatch)
			continue
		}
		if !holds {
			pred := l.cfg.Path + "/" + queue[i-1]
			_, changed := c.Session()
			_, _, ev, err := c.GetW(pred)
			switch {
			case errors.Is(err, ErrNoNode) && l.cfg.Mutant == MutantMissedWakeup:
				// No watch was set, and the mutant waits for it all the same.
				l.cfg.Logf("predecessor %s already gone; waiting for its deletion", pred)
				select {
				case <-changed:
				case <-ctx.Done():
				}
			case errors.Is(err, ErrNoNode):
				// Gone already: read the queue again (the mutant takes the lock).
				holds = l.cfg.Mutant == MutantNoRecheck
			case err != nil:
				l.cfg.Logf("watching %s: %v", pred, err)
				l.pause(ctx)
			default:
				armed = ev
				select {
				case e := <-ev:
					l.cfg.Logf("woken: %s %s", e.Path, e.Type)
					holds = l.cfg.Mutant == MutantNoRecheck
					armed = nil
				case <-changed:
				case <-ctx.Done():
				}
			}
			if !holds {
				continue
			}
		}
		g, again, retry, err := l.grant(node)
		if retry {
			l.pause(ctx)
			continue
		}
		return g, again, err
	}
}

// lateWake is mutant-withdrawn-watch's handler of a given-up acquire's predecessor
// watch, run as the next acquire starts: when the watch fired since the give-up (the
// predecessor left between the two acquires), it takes the wake-up for its own and
// starts the withdrawn attempt over, creating a lock node nobody waits with. (A watch
// that fires later, during an acquire, is ignored.) Running it here, not in a
// goroutine of its own, keeps the mutant deterministic under the simulator.
func (l *Lock) lateWake() {
	watch := l.withdrawn
	l.withdrawn = nil
	if watch == nil {
		return
	}
	select {
	case e, ok := <-watch:
		if !ok || e.Type != EventNodeDeleted {
			return
		}
		name := l.cfg.Path + "/" + protectedPrefix + l.cfg.NewGUID() + "-lock-"
		node, err := l.cfg.Client.Create(name, nil, FlagEphemeral|FlagSequential)
		l.cfg.Logf("woken after giving up (%s %s): created %s (%v)", e.Path, e.Type, node, err)
	default:
	}
}

// children reads the lock node's children; mutant-herd also watches them (a nil
// channel otherwise).
func (l *Lock) children() ([]string, <-chan Event, error) {
	if l.cfg.Mutant == MutantHerd {
		return l.cfg.Client.(ChildWatcher).ChildrenW(l.cfg.Path)
	}
	children, err := l.cfg.Client.Children(l.cfg.Path)
	return children, nil, err
}

// awaitChildren is mutant-herd's wait: until the children watch fires (any waiter's
// node came or went: every waiter wakes), the session changes or ctx ends.
func (l *Lock) awaitChildren(ctx context.Context, watch <-chan Event) {
	_, changed := l.cfg.Client.Session()
	select {
	case e := <-watch:
		l.cfg.Logf("woken: %s %s", e.Path, e.Type)
	case <-changed:
	case <-ctx.Done():
	}
}

// grant takes the lock with node: it reads the node and requires its ephemeral owner
// to be the client's current, connected session. The session state read before that
// check is the one the hold's monitor compares with. retry says the check could not
// be made now; again that node is not (or no longer) ours.
func (l *Lock) grant(node string) (g Grant, again, retry bool, err error) {
	c := l.cfg.Client
	sess, changed := c.Session()
	if sess.State != StateConnected {
		return Grant{}, false, true, nil
	}
	_, st, err := c.Get(node)
	switch {
	case errors.Is(err, ErrNoNode):
		l.cfg.Logf("lock node %s is gone; creating a new one", node)
		return Grant{}, true, false, nil
	case errors.Is(err, ErrClosed):
		return Grant{}, false, false, fmt.Errorf("reading the lock node: %w", err)
	case err != nil:
		l.cfg.Logf("reading %s: %v", node, err)
		return Grant{}, false, true, nil
	case st.EphemeralOwner != sess.ID:
		// Not ours to delete: a node of an earlier session of ours goes with it.
		l.cfg.Logf("lock node %s belongs to session 0x%x, not to ours (0x%x); creating a new one",
			node, uint64(st.EphemeralOwner), uint64(sess.ID))
		return Grant{}, true, false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.node, l.lost = node, false
	if l.cfg.Mutant != MutantIgnoreLost {
		l.stop, l.watch = make(chan struct{}), make(chan struct{})
		go l.monitor(node, sess, changed, l.stop, l.watch)
	}
	l.cfg.Logf("holding %s (czxid %d, session 0x%x)", node, st.Czxid, uint64(sess.ID))
	return Grant{Node: node, Token: st.Czxid}, false, false, nil
}

// monitor ends the hold of node at the first change of the session state after held
// was read: a disconnect or an expiry. It returns when stop is closed.
func (l *Lock) monitor(node string, held Session, changed <-chan struct{}, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	select {
	case <-stop:
		return
	case <-changed:
	}
	now, _ := l.cfg.Client.Session()
	reason := "connection lost while holding"
	switch {
	case now.State == StateClosed:
		reason = "client closed"
	case now.State == StateExpired || now.ID != held.ID:
		reason = "session expired"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-stop:
		return
	default:
	}
	if l.node == node && !l.lost {
		l.lost = true
		l.cfg.Logf("lost %s: %s", node, reason)
		l.cfg.OnLost(reason)
	}
}

// endHold forgets the hold, stops its monitor and waits until it has returned.
func (l *Lock) endHold() {
	l.mu.Lock()
	l.node, l.lost = "", false
	watch := l.watch
	if l.stop != nil {
		close(l.stop)
		l.stop, l.watch = nil, nil
	}
	l.mu.Unlock()
	if watch != nil {
		<-watch
	}
}

// abandon gives up an acquire whose ctx ended while node waited: it deletes node (the
// mutant deletes the lowest child instead) and reports a definite timeout only when
// the delete certainly took effect.
func (l *Lock) abandon(ctx context.Context, node string) error {
	c := l.cfg.Client
	victim := node
	if l.cfg.Mutant == MutantDeleteLowest {
		children, err := c.Children(l.cfg.Path)
		if err != nil {
			return fmt.Errorf("gave up (%v), and listing the queue failed: %w", context.Cause(ctx), err)
		}
		if queue := sortQueue(children); len(queue) > 0 {
			victim = l.cfg.Path + "/" + queue[0]
		}
	}
	err := c.Delete(victim, -1)
	if err == nil || errors.Is(err, ErrNoNode) {
		l.cfg.Logf("gave up waiting (%v); deleted %s", context.Cause(ctx), victim)
		return gaveUp(ctx)
	}
	if victim == node {
		l.stale = append(l.stale, node)
	}
	return fmt.Errorf("gave up (%v), and deleting the lock node %s failed: %w", context.Cause(ctx), victim, err)
}

// Release gives up the lock by deleting its node. It fails definitely (ErrNotHeld)
// when nothing is held, the hold was lost, or the node was already gone.
func (l *Lock) Release() error {
	l.mu.Lock()
	node, lost := l.node, l.lost
	l.mu.Unlock()
	l.endHold()
	switch {
	case node == "":
		return definite(ErrNotHeld)
	case lost:
		l.stale = append(l.stale, node)
		if err := l.deleteStale(); err != nil {
			l.cfg.Logf("deleting the lost lock node %s: %v", node, err)
		}
		return definite(fmt.Errorf("%w: the lock was lost", ErrNotHeld))
	}
	err := l.cfg.Client.Delete(node, -1)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrNoNode):
		return definite(fmt.Errorf("%w: the lock node was already gone", ErrNotHeld))
	case l.cfg.Mutant == MutantSwallowedRelease:
		l.cfg.Logf("release: deleting %s: %v (swallowed)", node, err)
		return nil
	}
	l.stale = append(l.stale, node)
	return fmt.Errorf("release: deleting %s: %w", node, err)
}

// Close ends the current hold without touching ZooKeeper (closing the client ends the
// session, which deletes the node) and stops the monitor.
func (l *Lock) Close() { l.endHold() }

// retry runs op until it succeeds, fails definitely, or ctx ends (or the client is
// closed), pausing between attempts; it returns op's last error.
func (l *Lock) retry(ctx context.Context, op func() error) error {
	for {
		err := op()
		if err == nil || definiteClientError(err) || errors.Is(err, ErrClosed) {
			return err
		}
		l.cfg.Logf("%v; retrying", err)
		if perr := l.pause(ctx); perr != nil {
			return err
		}
	}
}

// deleteStale deletes the nodes whose deletion was uncertain; those it cannot delete
// stay listed.
func (l *Lock) deleteStale() error {
	for len(l.stale) > 0 {
		node := l.stale[0]
		if err := l.cfg.Client.Delete(node, -1); err != nil && !errors.Is(err, ErrNoNode) {
			return fmt.Errorf("%s: %w", node, err)
		}
		l.stale = l.stale[1:]
	}
	return nil
}

// ensureParent creates the lock path and its parents unless known to exist.
func (l *Lock) ensureParent() error {
	if l.parentReady {
		return nil
	}
	if err := createAll(l.cfg.Client, l.cfg.Path, nil); err != nil {
		return err
	}
	l.parentReady = true
	return nil
}

// createAll creates the persistent node p with data, and its missing parents with no
// data; a node that exists already is left alone.
func createAll(c Client, p string, data []byte) error {
	_, err := c.Create(p, data, 0)
	if errors.Is(err, ErrNoNode) {
		if parent := path.Dir(p); parent != "/" {
			if err := createAll(c, parent, nil); err != nil {
				return err
			}
		}
		_, err = c.Create(p, data, 0)
	}
	if err == nil || errors.Is(err, ErrNodeExists) {
		return nil
	}
	return err
}

// pause waits before a retry: until the session state changes when the client is not
// connected, otherwise for cfg.Retry; at most until ctx ends.
func (l *Lock) pause(ctx context.Context) error {
	sess, changed := l.cfg.Client.Session()
	if sess.State == StateClosed {
		return ErrClosed
	}
	var timer <-chan time.Time
	if sess.State == StateConnected {
		t := time.NewTimer(l.cfg.Retry)
		defer t.Stop()
		timer = t.C
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-changed:
	case <-timer:
	}
	return nil
}

// sortQueue returns the lock nodes among children in queue order (by sequence
// number); names that do not end in a sequence number are not lock nodes.
func sortQueue(children []string) []string {
	type entry struct {
		seq  int64
		name string
	}
	var q []entry
	for _, ch := range children {
		if seq, ok := sequence(ch); ok {
			q = append(q, entry{seq, ch})
		}
	}
	slices.SortFunc(q, func(a, b entry) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	names := make([]string, len(q))
	for i, e := range q {
		names[i] = e.name
	}
	return names
}

// sequence parses the ten-digit sequence number at the end of a node name.
func sequence(name string) (int64, bool) {
	if len(name) < 10 {
		return 0, false
	}
	n, err := strconv.ParseInt(name[len(name)-10:], 10, 64)
	return n, err == nil && n >= 0
}
