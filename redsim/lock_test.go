package redsim

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/redis/go-redis/v9"
)

func catalog(t *testing.T, name string) Recipe {
	t.Helper()
	r, err := CatalogRecipe(name)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// replay runs a schedule's text on recipe and returns the run.
func replay(t *testing.T, recipe Recipe, text string) RunInfo {
	t.Helper()
	s, err := ParseSchedule(text)
	if err != nil {
		t.Fatal(err)
	}
	info, err := ReplayLock(t, LockConfig{Recipe: recipe}, s)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// expect checks that a run broke want ("" for none).
func expect(t *testing.T, info RunInfo, want FailureKind) {
	t.Helper()
	var got FailureKind
	if info.Failure != nil {
		got = info.Failure.Kind
	}
	if got != want {
		t.Errorf("failure %v, want %q\n%s", info.Failure, want, strings.Join(info.Trace, "\n"))
	}
}

// pausedPastTTL: c0 holds, is paused (no step) for two TTLs while its extends
// time out, and c1 acquires the expired key.
const pausedPastTTL = `clients 2
acquire c0
run c0
tick 2s
acquire c1
run c1
`

// TestExclusionChecked: a holder paused past its TTL overlaps the next holder
// unless the recipe tells it it lost the lock. redis-lock does (its validity
// watch); mutant-redis-ignore-validity does not.
func TestExclusionChecked(t *testing.T) {
	expect(t, replay(t, catalog(t, "redis-lock"), pausedPastTTL), "")
	expect(t, replay(t, catalog(t, "mutant-redis-ignore-validity"), pausedPastTTL), FailExclusion)
}

// restartUnderHolder: c0 holds when the instance restarts and loses its key; c1
// acquires (its first try fails: the restart broke its idle connection) and
// releases; c0's first extend fails the same way, and its second finds the key
// missing.
const restartUnderHolder = `clients 2
acquire c0
run c0
restart i0
acquire c1
run c1
acquire c1
run c1
release c1
run c1
tick 500ms
tick 250ms
run c0
`

// restartUnderHolders is restartUnderHolder with c1 still holding when c0
// extends.
const restartUnderHolders = `clients 2
acquire c0
run c0
restart i0
acquire c1
run c1
acquire c1
run c1
tick 500ms
tick 250ms
run c0
`

// TestFaultExcuses: no recipe keeps a lock whose key the server lost, so the
// holder is excused until it learns; but a holder that takes its key back after
// another held it (mutant-redis-extend-recreates), or renews another's key
// (mutant-redis-blind-extend), fails.
func TestFaultExcuses(t *testing.T) {
	expect(t, replay(t, catalog(t, "redis-lock"), restartUnderHolder), "")
	expect(t, replay(t, catalog(t, "mutant-redis-extend-recreates"), restartUnderHolder), FailExclusion)
	expect(t, replay(t, catalog(t, "redis-lock"), restartUnderHolders), "")
	expect(t, replay(t, catalog(t, "mutant-redis-blind-extend"), restartUnderHolders), FailExclusion)
}

// crashedHolder: c0 acquires and crashes; its key must expire for c1.
const crashedHolder = `clients 2
acquire c0
run c0
crash c0
`

// TestLivenessChecked: a crashed holder's key expires (redis-lock), or stays for
// ever (mutant-redis-no-expiry: nobody acquires again).
func TestLivenessChecked(t *testing.T) {
	expect(t, replay(t, catalog(t, "redis-lock"), crashedHolder), "")
	expect(t, replay(t, catalog(t, "mutant-redis-no-expiry"), crashedHolder), FailLiveness)
}

// setNXLocker is a fake recipe for TestOrphanChecked only: SET NX with no expiry,
// and an unlock that deletes the key or, with leak, does nothing.
func setNXLocker(leak bool) Recipe {
	return Recipe{Name: "fake set-nx lock", New: func(env Env) (Locker, error) {
		rdb := redis.NewClient(env.Options(0))
		lock := func(ctx context.Context) (time.Time, error) {
			for {
				ok, err := rdb.SetNX(ctx, env.Key, "x", 0).Result()
				if ok || err != nil {
					return time.Time{}, err
				}
				select {
				case <-ctx.Done():
					return time.Time{}, ctx.Err()
				case <-time.After(10 * time.Millisecond):
				}
			}
		}
		unlock := func() error {
			if leak {
				return nil
			}
			return rdb.Del(context.Background(), env.Key).Err()
		}
		return LockUnlock(rdb.Close, lock, unlock), nil
	}}
}

// TestOrphanChecked: a key with no expiry left once every client is done is an
// orphan. (The schedule is empty: the liveness phase's acquire and release are the
// run.)
func TestOrphanChecked(t *testing.T) {
	expect(t, replay(t, setNXLocker(false), "clients 1\n"), "")
	expect(t, replay(t, setNXLocker(true), "clients 1\n"), FailOrphan)
}

// TestUserRecipe is the test a user writes for a lock of their own on go-redis
// (here bsm/redislock's Obtain and Release, with go-redis's default options),
// as docs/property-testing.md shows it.
func TestUserRecipe(t *testing.T) {
	CheckLock(t, LockConfig{Recipe: userRecipe()})
}

// userRecipe is TestUserRecipe's recipe.
func userRecipe() Recipe {
	return Recipe{
		Name: "bsm/redislock with go-redis's defaults",
		New: func(env Env) (Locker, error) {
			rdb := redis.NewClient(env.Options(0))
			locker := redislock.New(rdb)
			var lock *redislock.Lock
			obtain := func(ctx context.Context) (time.Time, error) {
				start := time.Now()
				l, err := locker.Obtain(ctx, env.Key, env.TTL, &redislock.Options{RetryStrategy: redislock.LinearBackoff(5 * time.Millisecond)})
				if err != nil {
					return time.Time{}, err
				}
				lock = l
				return start.Add(env.TTL), nil // valid for the TTL from before the request
			}
			release := func() error { return lock.Release(context.Background()) }
			return LockUnlock(rdb.Close, obtain, release), nil
		},
	}
}

// lateGrant: c0's SETs reach two of three instances; the third times out 50 ms
// later (RedLock's per-instance timeout, a twentieth of the TTL); the clock is
// then 10 ms past the keys' expiry, and c1 takes all three.
const lateGrant = `clients 2
instances 3
acquire c0
step c0
step c0
tick 10ms
tick 1s
acquire c1
run c1
`

// TestRedLockValidityChecked: redsync counts the validity from before its
// requests and has let go when c1 acquires; mutant-redlock-no-elapsed-check
// counts it from the replies and overlaps c1.
func TestRedLockValidityChecked(t *testing.T) {
	for name, want := range map[string]FailureKind{"redsync": "", "mutant-redlock-no-elapsed-check": FailExclusion} {
		s, err := ParseSchedule(lateGrant)
		if err != nil {
			t.Fatal(err)
		}
		info, err := ReplayLock(t, LockConfig{Recipe: catalog(t, name)}, s)
		if err != nil {
			t.Fatal(err)
		}
		expect(t, info, want)
	}
}

// randomLogger is a fake recipe for TestDivergenceChecked only: setNXLocker that
// logs a number from math/rand/v2's global generator, which no run seeds.
func randomLogger() Recipe {
	r := setNXLocker(false)
	inner := r.New
	r.New = func(env Env) (Locker, error) {
		env.Logf("drawn %d", rand.Uint64())
		return inner(env)
	}
	return r
}

// TestDivergenceChecked: the determinism check finds the trace line where two
// runs of one schedule differ, and finds none for a recipe that replays.
func TestDivergenceChecked(t *testing.T) {
	s, err := ParseSchedule(crashedHolder)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		recipe  Recipe
		diverge bool
	}{{catalog(t, "redis-lock"), false}, {randomLogger(), true}} {
		cfg := LockConfig{Recipe: c.recipe}
		info, err := ReplayLock(t, cfg, s)
		if err != nil {
			t.Fatal(err)
		}
		d := divergence(t, cfg, info)
		if (d != "") != c.diverge || (c.diverge && !strings.Contains(d, "drawn")) {
			t.Errorf("%s: divergence %q, want one: %v", c.recipe.Name, d, c.diverge)
		}
	}
}

// releaseAfterLoss: c0 loses its hold (paused past its TTL), c1 acquires, c0
// releases anyway and acquires again.
const releaseAfterLoss = `clients 2
acquire c0
run c0
tick 2s
acquire c1
run c1
release c0
run c0
acquire c0
run c0
`

// TestReleaseAfterLossChecked: redis-lock's release compares the value and leaves
// c1's key; mutant-redis-blind-del deletes it, and so does
// mutant-redis-static-value (every client's value ends with the same token).
func TestReleaseAfterLossChecked(t *testing.T) {
	expect(t, replay(t, catalog(t, "redis-lock"), releaseAfterLoss), "")
	expect(t, replay(t, catalog(t, "mutant-redis-blind-del"), releaseAfterLoss), FailExclusion)
	expect(t, replay(t, catalog(t, "mutant-redis-static-value"), releaseAfterLoss), FailExclusion)
}

// TestKeptSchedules replays the schedules kept in testdata/schedules: each names
// its recipe ("# recipe: ...") and must pass; each once failed a real recipe
// through a fault in the checker, which it now guards.
func TestKeptSchedules(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "schedules", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no schedules in testdata/schedules: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			name := ""
			for _, l := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(l, "# recipe: "); ok {
					name = strings.TrimSpace(v)
				}
			}
			s, err := ParseSchedule(string(data))
			if err != nil {
				t.Fatal(err)
			}
			info, err := ReplayLock(t, LockConfig{Recipe: catalog(t, name)}, s)
			if err != nil {
				t.Fatal(err)
			}
			expect(t, info, "")
		})
	}
}
