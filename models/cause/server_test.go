package cause

import (
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// TestServerFaultClasses: overlap grants process 1 at 1 s and process 2 at 5 s; a
// server fault that forgot the earlier holder's key while it
// held is "server lost the lock" (restart without durable persistence, a failover) or
// "clock" (a clock jump); the same faults at other times, aimed elsewhere, with AOF
// always, or with a fault of the holder's own, are not.
func TestServerFaultClasses(t *testing.T) {
	restart := func(at int64, persistence string) []histories.Op {
		v := `{"fault":"restart","servers":["s1"],"persistence":"` + persistence + `"}`
		return []histories.Op{nem("start", at, v), nem("stop", at+s/10, v)}
	}
	failover := func(holder string) []histories.Op {
		v := `{"fault":"failover","primary":"s1","promoted":"s2"}`
		return []histories.Op{nem("start", s/2, v), nem("stop", 3*s, `{"fault":"failover","primary":"s1","promoted":"s2"`+holder+`}`)}
	}
	// The sentinels' own failover, as the run records it: promoted named at its stop,
	// or given up.
	sentinels := func(end string) []histories.Op {
		return []histories.Op{nem("start", 2*s, `{"fault":"failover","by":"sentinel","primary":"s1","persistence":"none"}`),
			nem("stop", 3*s, `{"fault":"failover","by":"sentinel","primary":"s1",`+end+`}`)}
	}
	// The cluster's own failover of the lock key's slot, as the run records it
	// ("by":"cluster"), from s2 to its replica s5.
	cluster := func(end string) []histories.Op {
		start := nem("start", 3*s, `{"fault":"failover","by":"cluster","primary":"s2","persistence":"none"}`)
		if end == "" {
			return []histories.Op{start} // in force at the second grant and after
		}
		return []histories.Op{start, nem("stop", 4*s, `{"fault":"failover","by":"cluster","primary":"s2",`+end+`}`)}
	}
	dbServer := func(class, frees string) []histories.Op {
		v := `{"fault":"` + class + `","servers":["s1"]` + frees + `}`
		return []histories.Op{nem("start", 3*s, v), nem("stop", 3*s+s/10, v)}
	}
	jump := func(at int64) []histories.Op {
		v := `{"fault":"clock-jump","servers":["s1"],"delta_ms":8000}`
		return []histories.Op{nem("start", at, v), nem("stop", at, v)}
	}
	// A kill of s1 at kill, back (its heal) at back.
	kill := func(kill, back int64, persistence string) []histories.Op {
		v := `{"fault":"kill","servers":["s1"],"persistence":"` + persistence + `"}`
		return []histories.Op{nem("start", kill, v), nem("stop", back, v)}
	}
	rv := `{"fault":"restart","servers":["s2"],"persistence":"none","forgetting":[]}`
	replicaRestart := []histories.Op{nem("start", 3*s, rv), nem("stop", 3*s, rv)}
	pausedToo := append(restart(3*s, "none"), nem("start", 2*s, `{"fault":"client-pause","process":1}`),
		nem("stop", 9*s, `{"fault":"client-pause","process":1}`))
	for _, tc := range []struct {
		name string
		mid  []histories.Op
		want Class
		fix  string
	}{
		{"restart, persistence none", restart(3*s, "none"), ServerLost, "aof-always"},
		{"restart, aof-everysec", restart(3*s, "aof-everysec"), ServerLost, "everysec loses"},
		{"restart, aof-always", restart(3*s, "aof-always"), RecipeBug, ""},
		{"restart on ZooKeeper (no persistence recorded)", restart(3*s, ""), RecipeBug, ""},
		{"restart of a replica only", replicaRestart, RecipeBug, ""},
		{"restart before the grant", restart(s/2, "none"), RecipeBug, ""},
		{"restart, holder paused too (released as its pause ended)", pausedToo, Unfenced, ""},
		{"failover, this holder's grant", failover(`,"holder":1`), ServerLost, "WAIT"},
		{"failover, no holder recorded", failover(""), ServerLost, "WAIT"},
		{"failover, another holder's grant", failover(`,"holder":7`), RecipeBug, ""},
		{"the sentinels' failover", sentinels(`"promoted":"s3"`), ServerLost, "min-replicas-to-write"},
		{"the sentinels' failover, given up", sentinels(`"aborted":true`), RecipeBug, ""},
		{"a second primary beside the sentinels' (restarted empty)", sentinels(`"primaries":["s1","s2"]`), ServerLost, "min-replicas-to-write"},
		{"the sentinels' failover in force since long before the grant", []histories.Op{nem("start", -20*s, `{"fault":"failover","by":"sentinel","primary":"s1"}`)}, ServerLost, "WAIT"},
		{"the cluster's failover in force at the second grant", cluster(""), ServerLost, "min-replicas-to-write"},
		{"the cluster's failover, s5 promoted", cluster(`"promoted":"s5","primaries":["s2","s5"]`), ServerLost, "min-replicas-to-write"},
		{"the cluster's failover, given up", cluster(`"aborted":true`), RecipeBug, ""},
		{"kill, back empty while held (persistence none)", kill(2*s, 3*s, "none"), ServerLost, "aof-always"},
		{"kill from before the hold, back empty while held", kill(s/2, 3*s, "none"), ServerLost, "aof-always"},
		{"kill, back with AOF always", kill(2*s, 3*s, "aof-always"), RecipeBug, ""},
		{"kill, back only after the second grant", kill(2*s, 6*s, "none"), RecipeBug, ""},
		{"kill on ZooKeeper (no persistence recorded)", kill(2*s, 3*s, ""), RecipeBug, ""},
		{"clock jump while held", jump(3 * s), Clock, "fence"},
		{"database restart, a session lock", dbServer("restart", `,"frees_locks":true`), ServerLost, "fence"},
		{"database kill, a session lock", dbServer("kill", `,"frees_locks":true`), ServerLost, "fence"},
		{"database restart, a lock table's row", dbServer("restart", ""), RecipeBug, ""},
		{"clock jump before the grant", jump(s / 2), RecipeBug, ""},
		{"restart a TTL before the next grant", restart(1*s, "none"), RecipeBug, ""},
	} {
		lostAt := 7 * s // the holder learns 4 s after the loss
		if tc.name == "restart, holder paused too (released as its pause ended)" {
			lostAt = 0 // it never learns: released at 9 s, after its pause
		}
		f, ok := Classify(overlap(tc.mid, lostAt), "l0", params)
		if !ok || f.Class != tc.want || !strings.Contains(f.Fix, tc.fix) {
			t.Errorf("%s: %+v (found %v), want %s with a fix saying %q", tc.name, f, ok, tc.want, tc.fix)
		}
	}
}

// TestServerLossNotLearned: the same server faults, but the holder goes on holding
// past LostBound (5 s) after the loss and never reports lost (its release at 9 s): a
// recipe that hid the loss from itself, such as an extend that re-creates a missing
// key. Lost at 7 s, or a history that ends before the bound, is the server's doing.
func TestServerLossNotLearned(t *testing.T) {
	restart := `{"fault":"restart","servers":["s1"],"persistence":"none"}`
	jump := `{"fault":"clock-jump","servers":["s1"],"delta_ms":8000}`
	for _, tc := range []struct {
		name string
		h    histories.History
		want Class
	}{
		{"restart, released 6 s after", overlap([]histories.Op{nem("start", 3*s, restart), nem("stop", 3*s, restart)}, 0), RecipeBug},
		{"clock jump, released 6.5 s after", overlap([]histories.Op{nem("start", 2500*s/1000, jump), nem("stop", 2500*s/1000, jump)}, 0), RecipeBug},
		{"restart, lost 4 s after", overlap([]histories.Op{nem("start", 3*s, restart), nem("stop", 3*s, restart)}, 7*s), ServerLost},
		{"restart, the history ends first", histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, 1*s), acq(2, histories.Invoke, 2*s),
			nem("start", 3*s, restart), nem("stop", 3*s, restart), acq(2, histories.OK, 5*s)}, ServerLost},
	} {
		f, ok := Classify(tc.h, "l0", params)
		if !ok || f.Class != tc.want {
			t.Errorf("%s: %+v (found %v), want %s", tc.name, f, ok, tc.want)
		}
		if tc.want == RecipeBug && !strings.Contains(f.Why, "never reported lost") {
			t.Errorf("%s: why %q should say it never reported lost", tc.name, f.Why)
		}
	}
}

// TestGrantInFlightThroughTheSentinelsFailover: process 2's acquire, invoked before
// the sentinels named the promoted replica and acknowledged after, was granted on the
// old primary; process 1, granted on the promoted one after the switch, overlaps it.
// The servers lost process 2's grant, and the story names the sentinels' primaries;
// with the failover given up, it is the recipe's.
func TestGrantInFlightThroughTheSentinelsFailover(t *testing.T) {
	h := func(end string) histories.History {
		return histories.History{
			nem("start", 1*s, `{"fault":"failover","by":"sentinel","primary":"s1"}`),
			acq(2, histories.Invoke, 2*s), acq(1, histories.Invoke, 2*s+1),
			nem("stop", 3*s, `{"fault":"failover","by":"sentinel","primary":"s1",`+end+`}`),
			acq(1, histories.OK, 4*s), acq(2, histories.OK, 5*s),
		}
	}
	f, ok := Classify(h(`"promoted":"s2"`), "l0", params)
	if !ok || f.Class != ServerLost || f.Holder != 2 || !strings.Contains(f.Why, "failed over from s1 to s2") || !strings.Contains(f.Fix, "min-replicas-to-write") {
		t.Errorf("promoted s2: %+v (found %v), want process 2's grant lost by the sentinels' failover", f, ok)
	}
	if f, ok := Classify(h(`"aborted":true`), "l0", params); !ok || f.Class != RecipeBug {
		t.Errorf("given up: %+v (found %v), want a recipe bug", f, ok)
	}
}

// TestTheClustersOwnFailover: a Redis Cluster's own failover of the lock key's
// slot ("by":"cluster"), in force while process 1 held and at process 2's grant, is
// the servers' loss told in the cluster's words, with the cluster's fix (WAIT;
// min-replicas-to-write narrowing the window; not cluster-replica-validity-factor); a grant in flight
// through it is the servers' loss of that grant. Before the cluster had words of its
// own, these were told as the nemesis's failover ("promoted ," with no one named),
// with WAIT alone as the fix.
func TestTheClustersOwnFailover(t *testing.T) {
	start := nem("start", 3*s, `{"fault":"failover","by":"cluster","primary":"s2","persistence":"none"}`)
	stop := func(end string) histories.Op {
		return nem("stop", 4*s, `{"fault":"failover","by":"cluster","primary":"s2",`+end+`}`)
	}
	for _, tc := range []struct {
		name string
		mid  []histories.Op
		why  string
	}{
		{"in force at the second grant", []histories.Op{start}, "the cluster was failing over from s2 (from 3.00s to the end of the history): process 1's key"},
		{"s5 promoted", []histories.Op{start, stop(`"promoted":"s5","primaries":["s5"]`)}, "the cluster failed over from s2 to s5 (from 3.00s to 4.00s): process 1's key"},
		{"s2 beside s5", []histories.Op{start, stop(`"promoted":"s5","primaries":["s2","s5"]`)}, "the cluster failed over from s2 to s5 (from 3.00s to 4.00s), and s2 and s5 each served as a primary"},
		{"a second primary, s2 kept", []histories.Op{start, stop(`"primaries":["s2","s5"]`)}, "the cluster's primary s2 was not the only one"},
	} {
		f, ok := Classify(overlap(tc.mid, 7*s), "l0", params)
		if !ok || f.Class != ServerLost || !strings.Contains(f.Why, tc.why) || !strings.Contains(f.Fix, "min-replicas-to-write") ||
			!strings.Contains(f.Fix, "WAIT 1") || !strings.Contains(f.Fix, "cluster-replica-validity-factor is no fix") || strings.Contains(f.Why, "sentinel") {
			t.Errorf("%s: %+v (found %v), want server lost the lock saying %q, fixed by WAIT and min-replicas-to-write", tc.name, f, ok, tc.why)
		}
	}
	inFlight := histories.History{start, acq(2, histories.Invoke, 3*s+1), acq(1, histories.Invoke, 3*s+2), stop(`"promoted":"s5"`),
		acq(1, histories.OK, 5*s), acq(2, histories.OK, 6*s)}
	f, ok := Classify(inFlight, "l0", params)
	if !ok || f.Class != ServerLost || f.Holder != 2 || !strings.Contains(f.Why, "in flight as the cluster failed over from s2 to s5") || !strings.Contains(f.Fix, "min-replicas-to-write") {
		t.Errorf("a grant in flight: %+v (found %v), want process 2's grant lost by the cluster's failover", f, ok)
	}
}

// TestRecordedRedisFaults: redis-lock under restart (one instance, persistence
// none), failover (replicas) and clock-jump, redislock on the sentinel topology
// under a partition of the primary (the minority primary) and under kills, and
// redislock and redsync-one-cluster on the cluster topology under a partition of
// the lock's primary (testdata/histories/README.md).
func TestRecordedRedisFaults(t *testing.T) {
	for _, tc := range []struct {
		file     string
		want     Class
		why, fix string
	}{
		{"redis-lock-restart-none.jsonl", ServerLost, "persistence none", "aof-always"},
		{"redis-lock-failover.jsonl", ServerLost, "promoted s2", "WAIT 1"},
		{"redis-lock-clock-jump.jsonl", Clock, "jumped forward 8s", "fence"},
		{"redislock-sentinel-minority-primary.jsonl", ServerLost, "the sentinels failed over from s1 to s2", "min-replicas-to-write"},
		{"redislock-sentinel-kills-two-primaries.jsonl", ServerLost, "the sentinels were failing over from s3 (from 6.44s to the end of the history)", "min-replicas-to-write"},
		{"redislock-cluster-minority-primary.jsonl", ServerLost, "the cluster failed over from s2 to s5 (from 5.40s to 12.79s), and s2 and s5 each served as a primary", "cluster-replica-validity-factor is no fix"},
		// RedLock over three keys of that cluster, two on the cut-off primary: the
		// promoted replica alone gave the next client a majority.
		{"redsync-one-cluster-minority-primary.jsonl", ServerLost, "the cluster failed over from s3 to s6 (from 4.80s to 13.26s), and s3 and s6 each served as a primary", "cluster-replica-validity-factor is no fix"},
	} {
		f, ok := Classify(load(t, tc.file), "l0", params)
		if !ok || f.Class != tc.want || !strings.Contains(f.Why, tc.why) || !strings.Contains(f.Fix, tc.fix) {
			t.Errorf("%s: %+v (found %v), want %s saying %q, fixed by %q", tc.file, f, ok, tc.want, tc.why, tc.fix)
		}
	}
}

// TestRecordedClusterFailoverNeedsItsRecord: the cluster's minority primary
// (testdata/histories/redislock-cluster-minority-primary.jsonl, and
// redsync-one-cluster-minority-primary.jsonl, RedLock over keys of that cluster)
// is the servers' loss only through the cluster's failover the run recorded:
// without its records, as a run recorded it before the watch, the partition alone
// leaves the overlap a recipe bug.
func TestRecordedClusterFailoverNeedsItsRecord(t *testing.T) {
	for _, file := range []string{"redislock-cluster-minority-primary.jsonl", "redsync-one-cluster-minority-primary.jsonl"} {
		var unwatched histories.History
		for _, op := range load(t, file) {
			if !op.Process.Nemesis || !strings.Contains(string(op.Value), `"by":"cluster"`) {
				unwatched = append(unwatched, op)
			}
		}
		if f, ok := Classify(unwatched, "l0", params); !ok || f.Class != RecipeBug {
			t.Errorf("%s without the cluster's failover: %+v (found %v), want a recipe bug", file, f, ok)
		}
	}
}

// TestGrantInFlightThroughAFailover: Redisson's lease lock (a WAIT after each write
// holds the reply back) had an acquire in flight through a failover: its grant,
// written on the old primary during the split, was acknowledged after the resync had
// dropped it, together with another's grant on the resynced primary. The servers lost
// the in-flight grant (testdata/histories/redisson-lock-lease-failover-grant-in-flight.jsonl),
// not a recipe bug; without the failover the same overlap is one.
func TestGrantInFlightThroughAFailover(t *testing.T) {
	ttl4 := Params{SessionTimeout: 4 * time.Second, Lease: true}
	h := load(t, "redisson-lock-lease-failover-grant-in-flight.jsonl")
	f, ok := Classify(h, "l0", ttl4)
	if !ok || f.Class != ServerLost || f.Holder != 0 || f.Next != 1 || !strings.Contains(f.Why, "in flight through a failover") {
		t.Errorf("recorded: %+v (found %v), want the servers' loss of process 0's grant", f, ok)
	}
	var noFailover histories.History
	for _, op := range h {
		if !op.Process.Nemesis {
			noFailover = append(noFailover, op)
		}
	}
	if f, ok := Classify(noFailover, "l0", ttl4); !ok || f.Class != RecipeBug {
		t.Errorf("without the failover: %+v (found %v), want a recipe bug", f, ok)
	}
}

// TestRecordedRedisMutants: explore's findings on the Redis mutants
// (testdata/histories/README.md, 2 s TTL) are recipe bugs, not honest overlaps.
func TestRecordedRedisMutants(t *testing.T) {
	ttl2 := Params{SessionTimeout: 2 * time.Second}
	for _, file := range []string{"mutant-redis-ignore-validity-cut-off.jsonl", "mutant-redis-blind-del-late-del.jsonl",
		"mutant-redis-static-value-late-del.jsonl", "mutant-redlock-minority-race.jsonl", "mutant-redlock-no-elapsed-check-expiry-race.jsonl",
		"mutant-redis-extend-recreates-clock-jump.jsonl", "mutant-redis-blind-extend-renewed.jsonl",
		// Not mutants: Redisson's locks, whose watchdog stops renewing a key the
		// instance lost (a restart) or that ran out (a holder cut off) and tells the
		// holder nothing.
		"redisson-lock-watchdog-restart.jsonl", "redisson-fenced-clock-jump-restart.jsonl", "redisson-redlock-cut-off-holder.jsonl",
		// Nor Spring Integration's RedisLockRegistry with its renewal scheduler, whose
		// renewal stops as quietly.
		"spring-redis-lock-renewed-clock-jump.jsonl",
		// Nor python-redis-lock's renewal thread, which ends on the key's loss.
		"python-redis-lock-renewal-clock-jump.jsonl",
		// Nor redis-semaphore's refresh, which waits for ever in ioredis's queue while
		// its holder is cut off: onLockLost comes only with its answer.
		"redis-semaphore-mutex-cut-off-holder.jsonl",
		// Nor etcd's concurrency.Session, whose Done() counts a TTL from the last
		// keep-alive answer, checked once a second: a cut-off holder is told after
		// the servers expired its lease and granted another; Election's leader too.
		"etcd-mutex-done-late-cut-off-holder.jsonl", "etcd-election-done-late-cut-off-holder.jsonl"} {
		if f, ok := Classify(load(t, file), "l0", ttl2); !ok || f.Class != RecipeBug {
			t.Errorf("%s: %+v (found %v), want a recipe bug", file, f, ok)
		}
	}
	// redis-semaphore's release, which does not read its compare-and-delete's answer,
	// after a pause past the TTL (the matrix's run: a 4 s TTL; a lease, whose checked
	// release would have told).
	for _, file := range []string{"redis-semaphore-mutex-client-pause-release-unchecked.jsonl"} {
		if f, ok := Classify(load(t, file), "l0", Params{SessionTimeout: 4 * time.Second, Lease: true}); !ok || f.Class != RecipeBug {
			t.Errorf("%s: %+v (found %v), want a recipe bug", file, f, ok)
		}
	}
}

// TestRenewalsThroughTheServersSplit: while the servers' own failover is under way
// (the sentinels', the cluster's), the old primary serves its clients beside the
// promoted one, so a holder there renews its own key with success after the next
// grant; that is the servers' split, not a renewal that does not check the owner,
// and the holder can learn only once the servers settled. Recorded: redis-lock on
// Sentinel, its primary cut off (explore's round 2, 2026-11-30), where the renewal rule
// called it a recipe bug before (testdata/histories/redis-lock-sentinel-split-renewals.jsonl).
func TestRenewalsThroughTheServersSplit(t *testing.T) {
	lease := Params{SessionTimeout: 2 * time.Second, Lease: true}
	split := func(stop int64) []histories.Op {
		start := nem("start", 3*s, `{"fault":"failover","by":"sentinel","primary":"s1","persistence":"none"}`)
		if stop == 0 {
			return []histories.Op{start}
		}
		return []histories.Op{start, nem("stop", stop, `{"fault":"failover","by":"sentinel","primary":"s1","promoted":"s2","primaries":["s1","s2"]}`)}
	}
	for _, tc := range []struct {
		name string
		h    histories.History
		want Class
	}{
		{"renewed during the split, released 1 s after it settled", renewed(releasedAt(overlap(split(8*s), 0), 9*s), 1, "l0", 6*s, 6*s+s/2, 7*s), ServerLost},
		{"renewed during a split that lasts the run", renewed(overlap(split(0), 0), 1, "l0", 6*s, 6*s+s/2, 7*s), ServerLost},
		{"renewed with no split", renewed(overlap(nil, 0), 1, "l0", 6*s, 6*s+s/2, 7*s), RecipeBug},
		{"renewed after a split that settled before the grant", renewed(overlap([]histories.Op{nem("start", 2*s, `{"fault":"failover","by":"sentinel","primary":"s1"}`),
			nem("stop", 4*s, `{"fault":"failover","by":"sentinel","primary":"s1","promoted":"s2"}`)}, 0), 1, "l0", 6*s, 6*s+s/2, 7*s), RecipeBug},
		{"held on 5 s past the split's end", renewed(releasedAt(overlap(split(5*s+s/2), 0), 12*s), 1, "l0", 6*s, 6*s+s/2), RecipeBug},
	} {
		if f, ok := Classify(tc.h, "l0", lease); !ok || f.Class != tc.want {
			t.Errorf("%s: %+v (found %v), want %s", tc.name, f, ok, tc.want)
		}
	}
	if f, ok := Classify(load(t, "redis-lock-sentinel-split-renewals.jsonl"), "l0", lease); !ok || f.Class != ServerLost || !strings.Contains(f.Why, "the sentinels were failing over from s1") {
		t.Errorf("recorded: %+v (found %v), want the sentinels' failover", f, ok)
	}
}
