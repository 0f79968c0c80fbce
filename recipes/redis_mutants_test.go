package recipes

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// Each Redis mutant shows its bug directly, next to its control (redis-lock, or the
// hand-written RedLock without the bug) under the same steps.

// newTestRedisLock builds a redis-lock variant for a test.
func newTestRedisLock(t *testing.T, m redisMutant, addrs []string, key string, ttl time.Duration, worker int) (*redisLock, *recordedEvents) {
	t.Helper()
	r, ev := newTestRedisRecipe(t, redisLockVariant(m), addrs, key, ttl, worker)
	return r.(*redisLock), ev
}

// newTestRedLock builds a hand-written RedLock variant for a test.
func newTestRedLock(t *testing.T, m redLockMutant, addrs []string, key string, ttl time.Duration, worker int) (*redLock, *recordedEvents) {
	t.Helper()
	r, ev := newTestRedisRecipe(t, redLockVariant(m), addrs, key, ttl, worker)
	return r.(*redLock), ev
}

// TestRedisMutantReleaseDeletesAnothersKey: A is cut off until its key expires, B
// locks, A releases. redis-lock's compare-and-delete leaves B's key;
// mutant-redis-blind-del's DEL and mutant-redis-static-value's shared token delete it,
// and C locks while B holds.
func TestRedisMutantReleaseDeletesAnothersKey(t *testing.T) {
	for _, c := range []struct {
		m   redisMutant
		bug bool
	}{{redisCorrect, false}, {redisBlindDel, true}, {redisStaticValue, true}} {
		t.Run(redisLockVariants[c.m].name, func(t *testing.T) {
			s := startRedis(t)
			key := testRedisKey(t)
			proxy := startDropProxy(t, s.addr)
			a, evA := newTestRedisLock(t, c.m, []string{proxy.addr}, key, 300*time.Millisecond, 1)
			b, _ := newTestRedisLock(t, c.m, []string{s.addr}, key, 5*time.Second, 2)
			cc, _ := newTestRedisLock(t, c.m, []string{s.addr}, key, 5*time.Second, 3)
			mustAcquire(t, a, "a")
			proxy.cut() // a's extends go nowhere
			waitLost(t, evA, 2*time.Second)
			waitGone(t, s, key)
			mustAcquire(t, b, "b after a's key expired")
			valueB := s.get(t, key)
			proxy.heal(t)
			waitReachable(t, a)
			a.Release(context.Background()) // fails (a lost it); what matters is its effect
			if got := s.get(t, key); (got == "") != c.bug {
				t.Fatalf("after a's release, b's key is %q; the bug deletes it: %v", got, c.bug)
			}
			if !c.bug {
				expectTimeout(t, cc, "c while b holds")
				return
			}
			mustAcquire(t, cc, "c while b still holds")
			if !b.lease.holding() || valueB == s.get(t, key) {
				t.Fatal("b should still believe it holds, c should have the key")
			}
		})
	}
}

// waitGone waits until key has expired on s.
func waitGone(t *testing.T, s *redisServer, key string) {
	t.Helper()
	for start := time.Now(); s.pttl(t, key) != -2; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 3*time.Second {
			t.Fatalf("%s did not expire", key)
		}
	}
}

// TestRedisMutantNoExpiry: a holder that dies (its connection closes, no release)
// leaves redis-lock's key until the TTL, mutant-redis-no-expiry's for ever.
func TestRedisMutantNoExpiry(t *testing.T) {
	for _, c := range []struct {
		m   redisMutant
		bug bool
	}{{redisCorrect, false}, {redisNoExpiry, true}} {
		t.Run(redisLockVariants[c.m].name, func(t *testing.T) {
			s := startRedis(t)
			key := testRedisKey(t)
			const ttl = 300 * time.Millisecond
			a, _ := newTestRedisLock(t, c.m, []string{s.addr}, key, ttl, 1)
			b, _ := newTestRedisLock(t, redisCorrect, []string{s.addr}, key, ttl, 2)
			mustAcquire(t, a, "a")
			if pttl := s.pttl(t, key); (pttl == -1) != c.bug {
				t.Fatalf("PTTL %v, want no expiry: %v", pttl, c.bug)
			}
			a.node.client.Close() // a dies holding
			time.Sleep(2 * ttl)
			if c.bug {
				expectTimeout(t, b, "b after a died")
				if s.get(t, key) == "" {
					t.Fatal("the dead holder's key is gone")
				}
				return
			}
			mustAcquire(t, b, "b after a died")
		})
	}
}

// TestRedisMutantSetNXThenExpire: when the second command fails (here the server
// refuses PEXPIRE: ACL), mutant-redis-setnx-then-expire holds a key with no TTL and
// answers info; redis-lock sets key and TTL in one command.
func TestRedisMutantSetNXThenExpire(t *testing.T) {
	for _, c := range []struct {
		m   redisMutant
		bug bool
	}{{redisCorrect, false}, {redisSetNXThenExpire, true}} {
		t.Run(redisLockVariants[c.m].name, func(t *testing.T) {
			s := startRedis(t)
			key := testRedisKey(t)
			s.do(t, "ACL", "SETUSER", "default", "-pexpire")
			a, _ := newTestRedisLock(t, c.m, []string{s.addr}, key, time.Second, 1)
			_, typ, msg := acquire(t, a, time.Second)
			pttl := s.pttl(t, key)
			if !c.bug {
				if typ != workloads.ReplyOK || pttl <= 0 {
					t.Fatalf("acquire %s %q, PTTL %v: want ok with a TTL", typ, msg, pttl)
				}
				return
			}
			if typ != workloads.ReplyInfo || !strings.Contains(msg, "PEXPIRE failed") || pttl != -1 {
				t.Fatalf("acquire %s %q, PTTL %v: want info, a key without TTL", typ, msg, pttl)
			}
		})
	}
}

// waitReachable waits until r's client reaches its server again (after dial errors,
// go-redis's pool retries dialling only once a second).
func waitReachable(t *testing.T, r *redisLock) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for r.node.client.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the client does not reach its server again")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRedisMutantIgnoreValidity: cut off past its TTL, redis-lock reports lost;
// mutant-redis-ignore-validity goes on holding while another client locks.
func TestRedisMutantIgnoreValidity(t *testing.T) {
	for _, c := range []struct {
		m   redisMutant
		bug bool
	}{{redisCorrect, false}, {redisIgnoreValidity, true}} {
		t.Run(redisLockVariants[c.m].name, func(t *testing.T) {
			s := startRedis(t)
			key := testRedisKey(t)
			proxy := startDropProxy(t, s.addr)
			a, evA := newTestRedisLock(t, c.m, []string{proxy.addr}, key, 300*time.Millisecond, 1)
			b, _ := newTestRedisLock(t, redisCorrect, []string{s.addr}, key, 5*time.Second, 2)
			mustAcquire(t, a, "a")
			proxy.cut() // a's extends go nowhere
			if c.bug {
				expectNoLost(t, evA, 600*time.Millisecond)
			} else {
				waitLost(t, evA, 2*time.Second)
			}
			waitGone(t, s, key)
			mustAcquire(t, b, "b after a's key expired")
			if a.lease.holding() != c.bug {
				t.Fatalf("a holds: %v, want %v", a.lease.holding(), c.bug)
			}
		})
	}
}

// TestRedisMutantExtendAfterTheKeyWasLost: the server loses A's key (as a restart
// without persistence does) and B locks. redis-lock's next extend finds the key
// another's, or gone once B released, and reports lost. mutant-redis-blind-extend's
// PEXPIRE renews B's key, reporting the renewals; mutant-redis-extend-recreates, after
// B released, sets the key again. Either goes on holding, never told that B held the
// lock.
func TestRedisMutantExtendAfterTheKeyWasLost(t *testing.T) {
	for _, c := range []struct {
		m        redisMutant
		bRelease bool
		bug      bool
	}{
		{redisCorrect, false, false}, {redisBlindExtend, false, true},
		{redisCorrect, true, false}, {redisExtendRecreates, true, true},
	} {
		t.Run(fmt.Sprintf("%s/b-releases=%v", redisLockVariants[c.m].name, c.bRelease), func(t *testing.T) {
			s := startRedis(t)
			key := testRedisKey(t)
			const ttl = 900 * time.Millisecond
			a, evA := newTestRedisLock(t, c.m, []string{s.addr}, key, ttl, 1)
			b, _ := newTestRedisLock(t, redisCorrect, []string{s.addr}, key, 5*time.Second, 2)
			mustAcquire(t, a, "a")
			valueA := s.get(t, key)
			s.do(t, "DEL", key) // the server forgets a's key
			mustAcquire(t, b, "b after the server lost a's key")
			want := s.get(t, key) // b's: blind-extend renews it
			if c.bRelease {
				mustRelease(t, b, "b")
				want = valueA // extend-recreates sets a's again
			}
			renewed := func() int { evA.mu.Lock(); defer evA.mu.Unlock(); return evA.renewed }
			before := renewed()
			if !c.bug {
				if reason := waitLost(t, evA, ttl); !strings.Contains(reason, "extend") {
					t.Errorf("lost %q, want the extend's", reason)
				}
				return
			}
			expectNoLost(t, evA, ttl)
			if got, n := s.get(t, key), renewed()-before; got != want || !a.lease.holding() || n < 2 {
				t.Fatalf("the key is %q (want %q), a holds: %v, renewed %d times since; the bug keeps a holding", got, want, a.lease.holding(), n)
			}
		})
	}
}

// TestRedisMutantRedLockMinority: after the clients started, instance 2 goes down, and
// A and B are cut off from each other's instance (A reaches only 0, B only 1).
// RedLock (and redsync) lock neither; mutant-redlock-minority, content with 1 of 3,
// locks both.
func TestRedisMutantRedLockMinority(t *testing.T) {
	for _, c := range []struct {
		m   redLockMutant
		bug bool
	}{{redLockCorrect, false}, {redLockMinority, true}} {
		t.Run(map[bool]string{false: "redlock", true: "mutant-redlock-minority"}[c.bug], func(t *testing.T) {
			servers, addrs := startRedises(t, 3)
			key := testRedisKey(t)
			aTo1, bTo0 := startDropProxy(t, addrs[1]), startDropProxy(t, addrs[0])
			aAddrs, bAddrs := []string{addrs[0], aTo1.addr, addrs[2]}, []string{bTo0.addr, addrs[1], addrs[2]}
			a, _ := newTestRedLock(t, c.m, aAddrs, key, 2*time.Second, 1)
			b, _ := newTestRedLock(t, c.m, bAddrs, key, 2*time.Second, 2)
			rs, _ := newTestRedisRecipe(t, NewRedsync, aAddrs, key, 2*time.Second, 3)
			servers[2].kill(t)
			aTo1.cut()
			bTo0.cut()
			if !c.bug {
				expectTimeout(t, a, "a")
				expectTimeout(t, b, "b")
				expectTimeout(t, rs, "redsync as a")
				return
			}
			mustAcquire(t, a, "a")
			mustAcquire(t, b, "b while a holds")
			if !a.lease.holding() || !b.lease.holding() {
				t.Fatal("both should hold")
			}
		})
	}
}

// TestRedisMutantRedLockNoElapsedCheck: A is paused between its replies and its check
// of the elapsed time, longer than the TTL. RedLock refuses that grant (and locks on
// its next try); mutant-redlock-no-elapsed-check takes it, with keys that have
// expired, and B locks too.
func TestRedisMutantRedLockNoElapsedCheck(t *testing.T) {
	for _, c := range []struct {
		m   redLockMutant
		bug bool
	}{{redLockCorrect, false}, {redLockNoElapsedCheck, true}} {
		t.Run(map[bool]string{false: "redlock", true: "mutant-redlock-no-elapsed-check"}[c.bug], func(t *testing.T) {
			_, addrs := startRedises(t, 3)
			key := testRedisKey(t)
			const ttl = 300 * time.Millisecond
			a, _ := newTestRedLock(t, c.m, addrs, key, ttl, 1)
			b, _ := newTestRedLock(t, redLockCorrect, addrs, key, 5*time.Second, 2)
			var once sync.Once
			a.afterReplies = func() { once.Do(func() { time.Sleep(ttl + 100*time.Millisecond) }) }
			mustAcquire(t, a, "a, paused once after its replies")
			if !c.bug {
				expectTimeout(t, b, "b while a holds")
				return
			}
			mustAcquire(t, b, "b while a holds")
			if !a.lease.holding() {
				t.Fatal("a should still believe it holds")
			}
		})
	}
}

// TestRedisLockWaitNeedsAReplica: redis-lock-wait on a primary with no replica gives
// every grant back (WAIT 1 finds none) and its acquire times out, leaving no key; with
// a replica (REPLICAOF), it is granted, and the replica has the key when the acquire
// returns.
func TestRedisLockWaitNeedsAReplica(t *testing.T) {
	primary, replica := startRedis(t), startRedis(t)
	key := testRedisKey(t)
	r, _ := newTestRedisLock(t, redisWait, []string{primary.addr}, key, 2*time.Second, 1)
	expectTimeout(t, r, "no replica")
	if v := primary.get(t, key); v != "" {
		t.Fatalf("after the timeout the key holds %q, want none", v)
	}
	host, port, _ := net.SplitHostPort(primary.addr)
	// Redis 7 waits repl-diskless-sync-delay (5 s) for more replicas before it sends
	// the first one its data: not here.
	primary.do(t, "CONFIG", "SET", "repl-diskless-sync-delay", "0")
	replica.do(t, "REPLICAOF", host, port)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if info, _ := replica.do(t, "INFO", "replication").(string); strings.Contains(info, "master_link_status:up") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replica's link never came up")
		}
	}
	g := mustAcquire(t, r, "with a replica")
	if got := replica.get(t, key); got == "" || got != g.Lock.Value {
		t.Fatalf("the replica has %q when the grant returned, want the grant's value %q", got, g.Lock.Value)
	}
	mustRelease(t, r, "with a replica")
}
