package redsim

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	redsyncredigo "github.com/go-redsync/redsync/v4/redis/redigo"
	redigo "github.com/gomodule/redigo/redis"
)

// TestRedsyncOnRedigo: a second Go client library in the simulator. redsync over
// redigo pools, one an instance, as redsync's README shows teams on redigo, each
// pool dialling through the simulator (redigo's DialContextFunc), passes the lock
// property on three instances, as redsync on go-redis does (TestRealRecipes).
// 10,000 schedules: go test ./redsim/ -run TestRedsyncOnRedigo -rapid.checks=10000.
func TestRedsyncOnRedigo(t *testing.T) {
	CheckLock(t, LockConfig{Recipe: redigoRedsync(false), Instances: 3})
}

// TestRedsyncOnRedigoIgnoringUntil: the same recipe, but a holder that ignores
// Until (believes it holds until it unlocks), fails mutual exclusion on
// TestExclusionChecked's schedule (a holder paused past its TTL): the recipe does
// lock through the simulator.
func TestRedsyncOnRedigoIgnoringUntil(t *testing.T) {
	for _, c := range []struct {
		ignore bool
		want   FailureKind
	}{{false, ""}, {true, FailExclusion}} {
		s, err := ParseSchedule(pausedPastTTL3)
		if err != nil {
			t.Fatal(err)
		}
		info, err := ReplayLock(t, LockConfig{Recipe: redigoRedsync(c.ignore), Instances: 3}, s)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, info, c.want)
	}
}

// pausedPastTTL3: c0 locks three instances, is paused past the TTL, and c1 locks.
const pausedPastTTL3 = `clients 2
instances 3
acquire c0
run c0
tick 2s
acquire c1
run c1
`

// redigoRedsync is TestRedsyncOnRedigo's recipe: redsync v4.18.1 on redigo v1.9.3,
// their defaults but the TTL (redsync's expiry), valid until the mutex's Until
// (or, ignoringUntil, until it unlocks: a broken use, for the test that shows the
// recipe locks).
func redigoRedsync(ignoringUntil bool) Recipe {
	return Recipe{
		Name: "redsync on redigo",
		New: func(env Env) (Locker, error) {
			pools := make([]redsyncredis.Pool, len(env.Addrs))
			var closers []func() error
			for i, addr := range env.Addrs {
				p := &redigo.Pool{
					MaxIdle: 3,
					DialContext: func(ctx context.Context) (redigo.Conn, error) {
						return redigo.DialContext(ctx, "tcp", addr, redigo.DialContextFunc(env.Dialer()))
					},
				}
				pools[i], closers = redsyncredigo.NewPool(p), append(closers, p.Close)
			}
			m := redsync.New(pools...).NewMutex(env.Key, redsync.WithExpiry(env.TTL))
			lock := func(ctx context.Context) (time.Time, error) {
				if err := m.LockContext(ctx); err != nil {
					return time.Time{}, err
				}
				if ignoringUntil {
					return time.Time{}, nil
				}
				return m.Until(), nil
			}
			unlock := func() error {
				_, err := m.Unlock()
				return err
			}
			closeAll := func() error {
				var errs []error
				for _, c := range closers {
					errs = append(errs, c())
				}
				return errors.Join(errs...)
			}
			return LockUnlock(closeAll, lock, unlock), nil
		},
	}
}
