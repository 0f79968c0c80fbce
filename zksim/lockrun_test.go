package zksim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/recipes/zlcmutex"
)

func mustParse(t *testing.T, text string) Schedule {
	t.Helper()
	s, err := ParseSchedule(text)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHistoryIsRecordedAsTheHarnessDoes: acquire and release ops with the grant's
// token; a lost event as a release invoked and ok at once, marked lost; a crash as
// info for the open op; a new process for the slot afterwards.
func TestHistoryIsRecordedAsTheHarnessDoes(t *testing.T) {
	sched := mustParse(t, "clients 2\nacquire c0\nrun c0\nacquire c1\nrun c1\ndrop c0\ncrash c1\nacquire c1\n")
	var hist histories.History
	inBubble(t, func() error {
		run, err := newLockRun(LockConfig{Recipe: ZLCMutex(zlcmutex.MutantNone)}, sched.Clients, nil)
		if err != nil {
			return err
		}
		defer run.Teardown()
		for _, st := range sched.Steps {
			if err := run.Do(st); err != nil {
				t.Fatal(err)
			}
		}
		hist = slices.Clone(run.hist)
		return nil
	})
	type rec struct {
		typ     histories.Type
		f       string
		process int
		lost    bool
		value   string
	}
	var got []rec
	for i, op := range hist {
		if op.Index != int64(i) || op.Time != int64(i) {
			t.Fatalf("op %d: index %d time %d", i, op.Index, op.Time)
		}
		got = append(got, rec{op.Type, op.F, op.Process.ID, op.Lost, string(op.Value)})
	}
	want := []rec{
		{histories.Invoke, histories.FAcquire, 0, false, ""},
		// zxids 1 to 3: the lock path's creates (the first fails: no parent).
		{histories.OK, histories.FAcquire, 0, false, `{"token":4}`},
		{histories.Invoke, histories.FAcquire, 1, false, ""},
		{histories.Invoke, histories.FRelease, 0, true, ""},
		{histories.OK, histories.FRelease, 0, true, ""},
		{histories.Info, histories.FAcquire, 1, false, ""},
		{histories.Invoke, histories.FAcquire, 2, false, ""},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("history\n got %+v\nwant %+v", got, want)
	}
	if err := histories.Validate(hist); err != nil {
		t.Fatal(err)
	}
}

// TestStrictCleanup: zlc-mutex leaves a lost hold's node behind when its release
// cannot delete it (the connection drops again), and deletes it only at its next
// acquire. With the liveness phase's last acquire (the default) it passes; with
// StrictCleanup, the node is an orphan that blocks every other client for as long as
// the idle client's session lives.
func TestStrictCleanup(t *testing.T) {
	sched := mustParse(t, `clients 2
acquire c0
run c0
drop c0
reconnect c0
release c0
drop c0
reconnect c0
acquire c1
run c1
`)
	info, err := ReplayLock(t, LockConfig{Recipe: ZLCMutex(zlcmutex.MutantNone)}, sched)
	if err != nil || info.Failure != nil {
		t.Fatalf("zlc-mutex: %v %v\n%s", err, info.Failure, strings.Join(info.Trace(), "\n"))
	}
	info, err = ReplayLock(t, LockConfig{Recipe: ZLCMutex(zlcmutex.MutantNone), StrictCleanup: true}, sched)
	if err != nil {
		t.Fatal(err)
	}
	if info.Failure == nil || info.Failure.Kind != FailLiveness || !strings.Contains(info.Failure.Msg, "c1's acquire is blocked forever") {
		t.Fatalf("zlc-mutex with StrictCleanup: %v, want c1 blocked forever behind c0's node\n%s", info.Failure, strings.Join(info.Trace(), "\n"))
	}
	t.Logf("%v", info.Failure)
	// Without a waiter, the node is left over.
	info, _ = ReplayLock(t, LockConfig{Recipe: ZLCMutex(zlcmutex.MutantNone), StrictCleanup: true},
		Schedule{Clients: 1, Steps: sched.Steps[:7]})
	if info.Failure == nil || info.Failure.Kind != FailOrphan {
		t.Fatalf("zlc-mutex with StrictCleanup and one client: %v, want an orphan", info.Failure)
	}
}

// deafLock is a toy recipe that waits its turn without a watch: once it is queued
// behind another node, nothing but its context wakes it.
type deafLock struct {
	env  LockEnv
	node string
}

var _ Locker = (*deafLock)(nil)

func (d *deafLock) Acquire(ctx context.Context) (Hold, error) {
	c := d.env.Client
	for _, p := range []string{path.Dir(d.env.Path), d.env.Path} {
		if _, err := c.Create(p, nil, 0); err != nil && !errors.Is(err, zlcmutex.ErrNodeExists) {
			return Hold{}, err
		}
	}
	node, err := c.Create(d.env.Path+"/n-", nil, zlcmutex.FlagEphemeral|zlcmutex.FlagSequential)
	if err != nil {
		return Hold{}, err
	}
	children, err := c.Children(d.env.Path)
	if err != nil {
		return Hold{}, err
	}
	slices.Sort(children)
	if d.env.Path+"/"+children[0] != node {
		<-ctx.Done()
		c.Delete(node, -1)
		return Hold{}, errDeaf
	}
	d.node = node
	return Hold{Node: node}, nil
}

var errDeaf = errors.New("gave up")

func (d *deafLock) Release() error { return d.env.Client.Delete(d.node, -1) }
func (d *deafLock) Close()         {}

// TestBlockedForeverIsReported: a client that waits where nothing can wake it is a
// liveness failure that says so.
func TestBlockedForeverIsReported(t *testing.T) {
	deaf := Recipe{
		Name:     "deaf",
		New:      func(env LockEnv) (Locker, error) { return &deafLock{env: env}, nil },
		Definite: func(err error) bool { return errors.Is(err, errDeaf) },
	}
	info, err := ReplayLock(t, LockConfig{Recipe: deaf}, mustParse(t, "clients 2\nacquire c0\nrun c0\nacquire c1\nrun c1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Failure == nil || info.Failure.Kind != FailLiveness || !strings.Contains(info.Failure.Msg, "c1's acquire is blocked forever") {
		t.Fatalf("%v\n%s", info.Failure, strings.Join(info.Trace(), "\n"))
	}
}

// TestRunsAreDeterministic: a schedule replays step for step, down to every request,
// reply and log line of the recipe.
func TestRunsAreDeterministic(t *testing.T) {
	for _, m := range []zlcmutex.Mutant{zlcmutex.MutantNone, zlcmutex.MutantNoRecheck} {
		for seed := range uint64(20) {
			var traces [2][]string
			var hists [2]histories.History
			var fails [2]string
			for i := range 2 {
				inBubble(t, func() error {
					run, f := randomRun(rand.New(rand.NewPCG(seed, 3)), LockConfig{Recipe: ZLCMutex(m)}, 90)
					traces[i], hists[i], fails[i] = run.Trace(), run.hist, fmt.Sprint(f)
					return nil
				})
			}
			if !slices.Equal(traces[0], traces[1]) || fails[0] != fails[1] {
				for j := range min(len(traces[0]), len(traces[1])) {
					if traces[0][j] != traces[1][j] {
						t.Fatalf("%s seed %d: line %d differs:\n%s\n%s", m, seed, j, traces[0][j], traces[1][j])
					}
				}
				t.Fatalf("%s seed %d: %d and %d lines, %s and %s", m, seed, len(traces[0]), len(traces[1]), fails[0], fails[1])
			}
			a, _ := json.Marshal(hists[0])
			b, _ := json.Marshal(hists[1])
			if string(a) != string(b) {
				t.Fatalf("%s seed %d: histories differ", m, seed)
			}
		}
	}
}
