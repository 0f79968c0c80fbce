package explore

import (
	"slices"
	"time"

	"github.com/zlockcheck/zlockcheck/harness"
	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// Menu is explore's menu for the base run, its kind's (menus.go), each probe less
// the fault classes the base refuses with that probe's setup (harness.Config.Runnable:
// a class the service or topology cannot have, such as failover off the replicas
// topology or a partition of one instance); a probe left with no class it had is
// dropped.
func Menu(base harness.Config) []Probe {
	var out []Probe
	for _, p := range menuOf(base.Service).probes(base) {
		s, err := base.Runnable(p.Setup)
		if err == nil {
			p.Setup = s
			out = append(out, p)
		}
	}
	return out
}

// LeaseTTL is the session timeout explore gives a recipe on Redis or a database
// unless told otherwise (a Redis lock's TTL, a database lock's heartbeat bound and
// expiry): short, so that a 20 s round spans ten TTLs, and a key or row that expires,
// a holder cut off past it and a late request all fit in one round.
const LeaseTTL = 2 * time.Second

// RedisProbes is explore's menu on Redis for a lock whose TTL is ttl (the session
// timeout), in the order the mutants' families are found fastest: races and holds
// past the TTL, holders cut off, then instances that lose or expire a key early and
// stay up (an overlap no recipe prevents, "server lost the lock" or "clock", which a
// recipe's extend must learn of: the extend families' probe, third), a holder paused
// past its TTL (an unfenced overlap, then its release), then servers slowed or cut
// off, under short holds and under long ones, dead holders, instances killed or
// failed over (a key gone past the holder's validity), and paused acquirers. With
// four lanes (the menu's), the first four start together. When the servers fail over
// on their own (selfFailover: Sentinel), one probe more, second, cuts the primary off
// from them.
func RedisProbes(ttl time.Duration, selfFailover bool) []Probe {
	race, pastTTL, shortHolds := redisRegimes(ttl)
	holder := []nemesis.ClientTarget{nemesis.TargetHolder}
	minority := []nemesis.Target{nemesis.TargetOne, nemesis.TargetMinority}
	probes := []Probe{
		{Setup: nemesis.Setup{Name: "racing and overlong holds"}, Regimes: []workloads.Regime{race, overlong(ttl)},
			Aims: []string{coverage.RowContention, coverage.RowLost, coverage.RowLongHold}},
		// A holder cut off has its release's DEL delivered when the cut heals, late (a
		// TCP retransmission): only a compare-and-delete leaves the next holder's key
		// alone. A quiet time after the heal (one to three TTLs) lets it land on a
		// holder not cut off. Then long holds: a holder cut off past its TTL must
		// report lost. A cut lasts about two TTLs, so an 18 s look has three.
		{Setup: nemesis.Setup{Name: "holders cut off", Classes: []nemesis.Class{nemesis.ClassClientPartition},
			ClientTargets: holder, Interval: ttl},
			Regimes: []workloads.Regime{shortHolds, pastTTL}, Aims: []string{coverage.RowFaultHolding, coverage.RowGrantAfterLoss},
			FirstLook: cutOffFirstLook},
		// A server that loses a long holder's key at once and stays up: a waiter
		// takes the key, and the long holder's next extend, a third of a TTL later at
		// most, must find it gone (a short holder took and released it: an extend
		// that sets it again takes it back) or another's (a long one holds it: a plain
		// PEXPIRE renews the other's key). A clock jump deletes every lock key; a
		// restart without persistence does too, and is back within the holder's
		// validity. Every fault here makes an honest overlap, so the round runs to
		// its end: the bug comes after one. Kills and failovers, which leave the key
		// gone for longer than a validity (the holder learns it lost), come later.
		{Setup: nemesis.Setup{Name: "keys lost under a long holder",
			Classes:       []nemesis.Class{nemesis.ClassClockJump, nemesis.ClassRestart},
			ServerTargets: minority, Interval: 2 * time.Second},
			Regimes: []workloads.Regime{lostKey(ttl)}, Aims: []string{coverage.RowServerFaultHeld, coverage.RowGrantAfterLoss},
			RunThrough: true, FirstLook: lostKeyFirstLook},
		// A holder paused past its TTL: the overlap with the next holder is the
		// unfenced one no recipe prevents, but what the holder does when it resumes
		// is the recipe's: its release must not delete the next holder's key (a
		// plain DEL, a value every client shares). Fourth since issue 38's lanes,
		// where it was last: the cut-off holders' late DEL misses now and then (2
		// seeds of 5 on 2026-11-30), a resumed holder's release never does.
		{Setup: nemesis.Setup{Name: "holders paused past the TTL", Classes: []nemesis.Class{nemesis.ClassClientPause},
			ClientTargets: holder, Interval: 2 * time.Second},
			Regimes: []workloads.Regime{shortHolds, pastTTL}, Aims: []string{coverage.RowFaultHolding, coverage.RowLongHold}},
		{Setup: nemesis.Setup{Name: "instances slowed, paused, cut off",
			Classes:       []nemesis.Class{nemesis.ClassPacket, nemesis.ClassPause, nemesis.ClassPartition},
			ServerTargets: minority, Shapes: []nemesis.Shape{nemesis.IsolateOne}, Interval: 2 * time.Second},
			Regimes: []workloads.Regime{race}, Aims: []string{coverage.RowServerFaultHeld, coverage.RowAcquireInfo}},
		// An instance slowed (packets lost, resent after the kernel's timeout) or
		// paused while holders hold past the TTL: an acquire that waits for its
		// reply ends late, and a validity counted from the replies rather than from
		// before the request outlasts the keys the other instances expire (a
		// RedLock without the elapsed-time check); the waiters racing for the key
		// take it at its expiry.
		{Setup: nemesis.Setup{Name: "instances slowed under long holds",
			Classes:       []nemesis.Class{nemesis.ClassPacket, nemesis.ClassPause},
			ServerTargets: []nemesis.Target{nemesis.TargetOne}, Interval: 2 * time.Second},
			Regimes: []workloads.Regime{overlong(ttl)}, Aims: []string{coverage.RowServerFaultHeld, coverage.RowLongHold}},
		{Setup: nemesis.Setup{Name: "holders killed", Classes: []nemesis.Class{nemesis.ClassClientKill, nemesis.ClassConnectionKill},
			ClientTargets: holder, Interval: time.Second},
			Regimes: []workloads.Regime{shortHolds}, Aims: []string{coverage.RowFaultHolding, coverage.RowOrphans}},
		{Setup: nemesis.Setup{Name: "instances lost or failed over",
			Classes:       []nemesis.Class{nemesis.ClassKill, nemesis.ClassRestart, nemesis.ClassFailover},
			ServerTargets: minority, Interval: 3 * time.Second},
			Regimes: []workloads.Regime{lostKey(ttl), shortHolds}, Aims: []string{coverage.RowServerFaultHeld, coverage.RowGrantAfterLoss},
			RunThrough: true},
		{Setup: nemesis.Setup{Name: "acquirers paused", Classes: []nemesis.Class{nemesis.ClassClientPause},
			ClientTargets: []nemesis.ClientTarget{nemesis.TargetWaiter}, Interval: time.Second},
			Regimes: []workloads.Regime{race}, Aims: []string{coverage.RowFaultAcquiring}},
	}
	if selfFailover {
		probes = slices.Insert(probes, 1, primaryCutOff(shortHolds, overlong(ttl)))
	}
	return probes
}

// primaryCutOff is the probe of servers that fail over on their own: the primary
// cut off from the other servers (and, on Sentinel, from their sentinels) but not
// from its clients, Jepsen's minority primary. The majority promotes a replica; the
// old primary goes on granting to the clients that have not followed. A cut lasts
// long enough for the failover (Sentinel: down-after, then an election, about 2 s
// with the run's defaults) and the faults come a few seconds apart, so that the
// topology settles between two. Every overlap it makes is the servers' (honest), so
// the round runs through them. Its regimes, half the round each: short holds (a
// Sentinel's cut-off primary grants until the heal, so a grant there soon meets
// one on the promoted replica), then holds of more than a TTL (a cluster's cut-off
// primary grants only for about its node timeout, then answers CLUSTERDOWN: only a
// hold granted there that outlives the promotion, 2.5 to 4 s after the cut, meets
// a grant on the promoted replica).
func primaryCutOff(shortHolds, longHolds workloads.Regime) Probe {
	return Probe{Setup: nemesis.Setup{Name: "the primary cut off from its failover",
		Classes: []nemesis.Class{nemesis.ClassPartition}, Shapes: []nemesis.Shape{nemesis.IsolateLeader}, Interval: 6 * time.Second},
		Regimes: []workloads.Regime{shortHolds, longHolds}, Aims: []string{coverage.RowServerFaultHeld, coverage.RowGrantAfterLoss},
		RunThrough: true, FirstLook: primaryCutOffFirstLook}
}

// primaryCutOffFirstLook is the first look of *the primary cut off from its
// failover*: two cuts, each with its failover.
const primaryCutOffFirstLook = 20 * time.Second

// cutOffFirstLook is the first look of *holders cut off*. A cut (about two TTLs,
// after a quiet time of about two TTLs) takes about 8 s: a 14 s look has two, where
// 8 s had one. Measured on 2026-11-29 (BENCHMARKS.md): with 8 s, mutant-redis-blind-del
// and mutant-redis-static-value were each missed in one seed of two; with 14 s, caught
// in both. 18 s since the workload's end cuts its cycles (Cycle.FitIn): the second cut
// starts about 11 s in and lasts about 4 s, and its late DEL must meet a holder after
// the heal; with 14 s the workload's end cut it short and left no time after it, and
// blind-del was missed in one seed of five (2026-11-30). Its quiet times are one to
// three TTLs (Interval ttl, where they were two to six): three cuts in the look, not
// two, since a cut may land on a holder already releasing, and one of two then fell in
// the long holds, where a holder lets its lease run out and sends no DEL (blind-del
// missed in seed 2 with two cuts).
const cutOffFirstLook = 18 * time.Second

// lostKeyFirstLook is the first look of *keys lost under a long holder*: the fault
// must come while a long holder holds and the worker that takes the key must be short
// (long, for a blind extend), so the look needs several faults. Measured on
// 2026-11-29 (BENCHMARKS.md): with 8 s looks the extend mutants were caught at about
// 38 s in 5 of 6 sessions (extend-recreates 2 of 3); with 20 s looks at about 48 s
// (the round runs to its end) in 7 of 8 (extend-recreates 4 of 5).
const lostKeyFirstLook = 20 * time.Second

// overlong is a regime of holds that all outlive a TTL of ttl, by a quarter to once
// more, with waiters racing for the key when it expires: a lock that does not extend
// runs out at every hold, and one whose validity outlasts its keys (not measured from
// before the request) is granted to a waiter while it still holds.
func overlong(ttl time.Duration) workloads.Regime {
	return workloads.Regime{Name: "overlong holds", Timeouts: []workloads.Span{{Weight: 1, Min: 2 * ttl, Max: 4 * ttl}},
		Holds: []workloads.Span{{Weight: 1, Min: ttl * 5 / 4, Max: 2 * ttl}}, Active: 0.6}
}

// lostKey is a regime for servers that lose keys: few workers (two of five), half of
// the holds 2-4 TTLs of ttl long, the others short with long thinks. The lock is
// mostly held by a long holder. When a server loses its key, the waiter that takes it
// is as often a short holder, who releases it at once and thinks, so the key is free
// at the long holder's next extend, which must find it gone, not set it again; as a
// long one, still holding at that extend, which must find the key another's, not
// renew it. (Tried on 2026-11-29 and dropped: holds of 3-5 TTLs, which leave a first
// look one or two holds, and thinks of half a TTL to a TTL; each missed
// extend-recreates in a seed this regime caught.)
func lostKey(ttl time.Duration) workloads.Regime {
	ms := time.Millisecond
	return workloads.Regime{Name: "a long holder, short ones thinking", Timeouts: []workloads.Span{{Weight: 1, Min: 2 * ttl, Max: 4 * ttl}},
		Holds:  []workloads.Span{{Weight: 1, Min: 2 * ttl, Max: 4 * ttl}, {Weight: 1, Min: ms, Max: 20 * ms}},
		Thinks: []workloads.Span{{Weight: 1, Min: 300 * ms, Max: time.Second}}, Active: 0.4}
}

// redisRegimes are the Redis probes' workload regimes for a TTL of ttl: racing
// acquires (every release or expiry sets the waiters racing); holds that outlive the
// TTL, a quarter of them, among short ones with think times (the holder must extend,
// or learn it lost the lock, and what it does after must not touch the next holder's
// key; the lock is mostly held by a long holder, and when a server loses its key, the
// worker that takes it is mostly a short holder, who releases it and thinks, so the
// key is free at the long holder's next extend); and short holds with think times.
func redisRegimes(ttl time.Duration) (race, pastTTL, shortHolds workloads.Regime) {
	ms := time.Millisecond
	timeouts := []workloads.Span{{Weight: 1, Min: 2 * ttl, Max: 4 * ttl}}
	race = workloads.Regime{Name: "racing acquires", Timeouts: timeouts,
		Holds: []workloads.Span{{Weight: 1, Min: ms, Max: 20 * ms}}, Thinks: []workloads.Span{{Weight: 1, Max: 10 * ms}}, Active: 1}
	pastTTL = workloads.Regime{Name: "holds past the TTL", Timeouts: timeouts,
		Holds:  []workloads.Span{{Weight: 1, Min: 2 * ttl, Max: 4 * ttl}, {Weight: 3, Min: ms, Max: 20 * ms}},
		Thinks: []workloads.Span{{Weight: 1, Min: 50 * ms, Max: 300 * ms}}, Active: 0.6}
	shortHolds = workloads.Regime{Name: "short holds", Timeouts: timeouts,
		Holds: []workloads.Span{{Weight: 1, Min: ms, Max: 200 * ms}}, Thinks: []workloads.Span{{Weight: 1, Max: 50 * ms}}, Active: 1}
	return race, pastTTL, shortHolds
}
