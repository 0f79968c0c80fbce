package zlcmutex

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/zlockcheck/zlockcheck/internal/testenv"
)

func TestZKErrorMapping(t *testing.T) {
	c := &ZKClient{}
	for _, tc := range []struct{ in, want error }{
		{nil, nil},
		{zk.ErrNoNode, ErrNoNode},
		{zk.ErrNodeExists, ErrNodeExists},
		{zk.ErrBadVersion, ErrBadVersion},
		{zk.ErrNotEmpty, ErrNotEmpty},
		{zk.ErrSessionExpired, ErrSessionExpired},
		{zk.ErrConnectionClosed, ErrConnectionLoss},
		{zk.ErrNoServer, ErrConnectionLoss},
		{zk.ErrSessionMoved, ErrConnectionLoss},
		{zk.ErrNoAuth, ErrUnknown},
	} {
		if got := c.mapErr(tc.in); !errors.Is(got, tc.want) || (tc.want == nil) != (got == nil) {
			t.Errorf("mapErr(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	c.closed = true
	if got := c.mapErr(zk.ErrConnectionClosed); !errors.Is(got, ErrClosed) {
		t.Errorf("mapErr after Close = %v, want ErrClosed", got)
	}
	if got := c.mapErr(zk.ErrNoNode); !errors.Is(got, ErrNoNode) {
		t.Errorf("mapErr(ErrNoNode) after Close = %v", got)
	}
}

// dialTestZK connects to the ZooKeeper named by ZLC_ZK_CONNECT (skipping without
// one) and waits for the session.
func dialTestZK(t *testing.T) *ZKClient {
	t.Helper()
	c, err := DialZK(ZKConfig{Servers: testenv.ZKServers(t), SessionTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	deadline := time.After(10 * time.Second)
	for {
		s, changed := c.Session()
		if s.State == StateConnected {
			if s.ID == 0 {
				t.Fatal("connected without a session id")
			}
			return c
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatal("no session")
		}
	}
}

// TestZKClientAgainstZooKeeper checks the adapter's mapping on a real server: which
// op of a refused multi failed, watches, sequential and ephemeral creates, session
// states.
func TestZKClientAgainstZooKeeper(t *testing.T) {
	c := dialTestZK(t)
	var b [6]byte
	rand.Read(b[:])
	root := "/zlc-test/" + hex.EncodeToString(b[:])
	if err := createAll(c, root, nil); err != nil {
		t.Fatal(err)
	}
	counter, node := root+"/counter", ""
	if _, err := c.Create(counter, []byte("3"), 0); err != nil {
		t.Fatal(err)
	}
	node, err := c.Create(root+"/n-", nil, FlagEphemeral|FlagSequential)
	if err != nil || !strings.HasPrefix(node, root+"/n-") || len(node) != len(root+"/n-")+10 {
		t.Fatalf("create = %q, %v", node, err)
	}
	sess, _ := c.Session()
	_, st, err := c.Get(node)
	if err != nil || st.EphemeralOwner != sess.ID || st.Czxid == 0 {
		t.Fatalf("get = %+v, %v (session 0x%x)", st, err, sess.ID)
	}
	if err := c.Sync(root); err != nil {
		t.Fatal(err)
	}
	if err := c.Multi(CheckOp(node, -1), SetOp(counter, []byte("4"), -1)); err != nil {
		t.Fatalf("multi: %v", err)
	}
	if _, err := c.Create(counter, nil, 0); !errors.Is(err, ErrNodeExists) {
		t.Fatalf("create of an existing node = %v", err)
	}
	var me *MultiError
	err = c.Multi(CheckOp(node, -1), SetOp(root+"/missing", nil, -1))
	if !errors.As(err, &me) || me.Index != 1 || !errors.Is(err, ErrNoNode) {
		t.Fatalf("multi with a missing set target = %v, want op 1 ErrNoNode", err)
	}
	err = c.Multi(CheckOp(node, 7), SetOp(counter, nil, -1))
	if !errors.As(err, &me) || me.Index != 0 || !errors.Is(err, ErrBadVersion) {
		t.Fatalf("multi with a wrong check version = %v, want op 0 ErrBadVersion", err)
	}
	_, _, ev, err := c.GetW(node)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(node, -1); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ev:
		if e.Type != EventNodeDeleted || e.Path != node {
			t.Errorf("watch event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not fire")
	}
	err = c.Multi(CheckOp(node, -1), SetOp(counter, []byte("5"), -1))
	if !errors.As(err, &me) || me.Index != 0 || !errors.Is(err, ErrNoNode) {
		t.Fatalf("multi with a deleted check node = %v, want op 0 ErrNoNode", err)
	}
	if data, _, err := c.Get(counter); err != nil || string(data) != "4" {
		t.Fatalf("counter = %q, %v; want the refused multis to have written nothing", data, err)
	}
	if _, _, _, err := c.GetW(node); !errors.Is(err, ErrNoNode) {
		t.Fatalf("GetW of a missing node = %v", err)
	}
	if err := c.Delete(root, -1); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("delete of a parent = %v", err)
	}
	_, changed := c.Session()
	c.Close()
	<-changed
	if s, _ := c.Session(); s.State != StateClosed {
		t.Fatalf("state after Close = %v", s.State)
	}
	if _, err := c.Children(root); !errors.Is(err, ErrClosed) {
		t.Fatalf("children after Close = %v, want ErrClosed", err)
	}
}

// TestMutantHerdAgainstZooKeeper: ChildrenW's watch fires on a new child, and
// mutant-herd, whose waiter waits on that watch, still hands the lock over on release.
func TestMutantHerdAgainstZooKeeper(t *testing.T) {
	a, b := dialTestZK(t), dialTestZK(t)
	var r [6]byte
	rand.Read(r[:])
	root := "/zlc-test/" + hex.EncodeToString(r[:])
	if err := createAll(a, root, nil); err != nil {
		t.Fatal(err)
	}
	kids, ev, err := a.ChildrenW(root)
	if err != nil || len(kids) != 0 {
		t.Fatalf("ChildrenW = %v, %v", kids, err)
	}
	if _, err := b.Create(root+"/x", nil, FlagEphemeral); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-ev:
		if e.Type != EventNodeChildrenChanged || e.Path != root {
			t.Errorf("watch event %+v", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the children watch did not fire")
	}
	if err := b.Delete(root+"/x", -1); err != nil {
		t.Fatal(err)
	}
	lock := root + "/lock"
	la, err := New(Config{Client: a, Path: lock, Mutant: MutantHerd})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := New(Config{Client: b, Path: lock, Mutant: MutantHerd})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := la.Acquire(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { _, err := lb.Acquire(ctx); got <- err }()
	time.Sleep(300 * time.Millisecond) // b queues and watches the children
	select {
	case err := <-got:
		t.Fatalf("b acquired while a held (%v)", err)
	default:
	}
	if err := la.Release(); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("b's acquire after a's release: %v", err)
	}
	if err := lb.Release(); err != nil {
		t.Fatal(err)
	}
}
