package zksim

import (
	"errors"
	"github.com/zlockcheck/zlockcheck/internal/rapidrec"
	"strings"
	"testing"
	"time"

	dubbozk "github.com/dubbogo/go-zookeeper/zk"
	samuelzk "github.com/samuel/go-zookeeper/zk"
	"pgregory.net/rapid"
)

// Two lock recipes not written here, from the module proxy, on go-zookeeper's forks:
// samuel/go-zookeeper (the library go-zookeeper was forked from, still imported by
// many projects) and dubbogo/go-zookeeper (Apache Dubbo-go's fork). Each connects
// with its own zk.Connect through the simulator's Dialer and HostProvider and runs
// its own zk.Lock unchanged.

// forkLock builds a wire recipe on a fork's connect and lock.
func forkLock(name string, connect func(env ConnEnv) (closer func(), lock, unlock func() error, err error)) Recipe {
	return Recipe{
		Name: name,
		NewConn: func(env ConnEnv) (Locker, error) {
			closeConn, lock, unlock, err := connect(env)
			if err != nil {
				return nil, err
			}
			return lockUnlock(closeConn, lock, unlock), nil
		},
		Definite: func(err error) bool {
			var oe *OpError
			return errors.As(err, &oe) && oe.Op == "lock"
		},
	}
}

func samuelLock() Recipe {
	return forkLock("samuel/go-zookeeper zk.Lock", func(env ConnEnv) (func(), func() error, func() error, error) {
		conn, _, err := samuelzk.Connect(env.Servers, 10*time.Second,
			samuelzk.WithDialer(env.Dialer()), samuelzk.WithHostProvider(env.HostProvider()), samuelzk.WithLogger(discardLogger{}))
		if err != nil {
			return nil, nil, nil, err
		}
		l := samuelzk.NewLock(conn, env.Path, samuelzk.WorldACL(samuelzk.PermAll))
		return conn.Close, l.Lock, l.Unlock, nil
	})
}

func dubboLock() Recipe {
	return forkLock("dubbogo/go-zookeeper zk.Lock", func(env ConnEnv) (func(), func() error, func() error, error) {
		conn, _, err := dubbozk.Connect(env.Servers, 10*time.Second,
			dubbozk.WithDialer(env.Dialer()), dubbozk.WithHostProvider(env.HostProvider()), dubbozk.WithLogger(discardLogger{}))
		if err != nil {
			return nil, nil, nil, err
		}
		l := dubbozk.NewLock(conn, env.Path, dubbozk.WorldACL(dubbozk.PermAll))
		return conn.Close, l.Lock, l.Unlock, nil
	})
}

// TestWireForkLocks: both forks' zk.Lock leave the same orphan as go-zookeeper's
// (their Lock is the same code): found within rapid's default checks, shrunk.
//
// samuel/go-zookeeper also leaks a goroutine now and then: after a reconnection it
// re-sends its watches from a goroutine that waits for the reply, and when the
// connection closes before that request is sent the goroutine waits for ever
// (conn.go's sendSetWatches; the goroutine is parked on the request's reply channel).
// The bubble then cannot end ("main bubble goroutine has exited but blocked goroutines
// remain"), rapid reports that as a failure it cannot reproduce ("flaky test"), in
// about one run of the test in four (2026-11-28), and in five tries in a row once under
// make test's load. That is the library's defect, not the orphan this test is after:
// the test runs rapid's checks again, up to twelve times (a try takes well under a
// second), until a failure with a verdict comes.
func TestWireForkLocks(t *testing.T) {
	for _, r := range []Recipe{samuelLock(), dubboLock()} {
		t.Run(strings.Fields(r.Name)[0], func(t *testing.T) {
			t.Chdir(t.TempDir())
			shrinkFor(t, 8*time.Second)
			rec, last := checkUntilVerdict(t, LockConfig{Recipe: r, Without: []StepKind{StepExpire}}, 12)
			if !rec.Failed() || last.Failure == nil {
				t.Fatalf("%s passed every check: %q", r.Name, rec.Errs())
			}
			if k := last.Failure.Kind; k != FailLiveness && k != FailOrphan {
				t.Errorf("%s broke %s, want liveness or orphan: %v", r.Name, k, last.Failure)
			}
			t.Logf("caught after %d passing checks, shrunk to %d steps: %v\n%s\n%s", rec.ChecksBefore(), len(last.Schedule.Steps),
				last.Failure, last.Schedule, strings.Join(last.Trace(), "\n"))
		})
	}
}

// checkUntilVerdict runs rapid's checks of cfg up to tries times, until one round
// fails with a verdict (a Failure), and returns that round's recorder and last run.
// A round that passed, or failed without a verdict (a library's leaked goroutine that
// rapid cannot reproduce), is logged and run again.
func checkUntilVerdict(t *testing.T, cfg LockConfig, tries int) (*rapidrec.Recorder, RunInfo) {
	t.Helper()
	var rec *rapidrec.Recorder
	var last RunInfo
	for try := 0; try < tries && (rec == nil || !rec.Failed() || last.Failure == nil); try++ {
		if rec != nil {
			t.Logf("try %d gave no verdict (failed %v): %q; logs %q", try, rec.Failed(), rec.Errs(), rec.Logs())
		}
		rec, last = rapidrec.New(t.Name()), RunInfo{}
		rapid.Check(rec, LockProperty(t, cfg, func(ri RunInfo) { last = ri }))
	}
	return rec, last
}
