package explore

import (
	"time"

	"github.com/zlockcheck/zlockcheck/models/coverage"
	"github.com/zlockcheck/zlockcheck/nemesis"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// DatabaseProbes is explore's menu on PostgreSQL and MariaDB for a lock whose
// session timeout (its heartbeat bound, a lock row's expiry) is ttl. The regimes are
// Redis's (redisRegimes): a database lock is a lease or a session, polled or waited
// for in the server, never a queue of nodes. In the order a session first runs
// them: races (short holds only: a lock left held is called blocked soonest); a
// holder killed or whose session the server ends (second since issue 38: it finds
// five mutants' families); a holder paused past its row's expiry, with the fenced
// counter when the recipe can (FencedCounter: a takeover must change the token, or
// the resource takes the stale holder's writes), third since issue 38, where it was
// eighth: the resumed holder's release must not remove the next holder's row (a
// DELETE by name), and its honest overlap no longer ends a session; a holder cut off,
// whose release the kernel delivers late; an INSERT whose reply is lost; servers
// slowed or paused; acquirers paused; a primary lost with the grants its standby
// never saw (an honest overlap, then what the recipe does after it); and last the
// holders' hosts vanished.
func DatabaseProbes(ttl time.Duration) []Probe {
	race, pastTTL, shortHolds := redisRegimes(ttl)
	holder := []nemesis.ClientTarget{nemesis.TargetHolder}
	ms := time.Millisecond
	return []Probe{
		// Short holds only: a lock left held (a session lock released one level too
		// few, or on another connection) stalls the waiters, and the final phase's
		// bound grows with the round's longest hold (harness.Config.FinalBound): with
		// the overlong holds Redis's first probe has, it took about 35 s to call the
		// lock blocked, the random baseline's short holds 7 s (BENCHMARKS.md). Holds
		// past the TTL come in the next probe.
		{Setup: nemesis.Setup{Name: "racing acquires"}, Regimes: []workloads.Regime{race},
			Aims: []string{coverage.RowContention, coverage.RowNested}},
		{Setup: nemesis.Setup{Name: "holders killed", Classes: []nemesis.Class{nemesis.ClassClientKill, nemesis.ClassConnectionKill},
			ClientTargets: holder, Interval: time.Second},
			Regimes: []workloads.Regime{pastTTL, shortHolds}, Aims: []string{coverage.RowFaultHolding, coverage.RowLost, coverage.RowOrphans, coverage.RowLongHold}},
		{Setup: nemesis.Setup{Name: "holders paused past the TTL", Classes: []nemesis.Class{nemesis.ClassClientPause},
			ClientTargets: holder, Interval: 2 * time.Second},
			Regimes: []workloads.Regime{shortHolds, pastTTL}, Aims: []string{coverage.RowFaultHolding, coverage.RowLongHold},
			FencedCounter: true},
		{Setup: nemesis.Setup{Name: "holders cut off", Classes: []nemesis.Class{nemesis.ClassClientPartition},
			ClientTargets: holder, Interval: 2 * ttl},
			Regimes: []workloads.Regime{shortHolds, pastTTL}, Aims: []string{coverage.RowFaultHolding, coverage.RowGrantAfterLoss}},
		// An INSERT or a lock request whose reply is lost: the recipe must find out
		// whether it holds (read the row back) rather than ask again.
		{Setup: nemesis.Setup{Name: "replies lost", Classes: []nemesis.Class{nemesis.ClassReplyLoss},
			ClientTargets: []nemesis.ClientTarget{nemesis.TargetIdle}, Interval: time.Second},
			KeepWorkers: true, Regimes: []workloads.Regime{{Name: "requests in flight",
				Timeouts: []workloads.Span{{Weight: 1, Min: 2 * ttl, Max: 4 * ttl}},
				Holds:    []workloads.Span{{Weight: 1, Min: ms, Max: 50 * ms}},
				Thinks:   []workloads.Span{{Weight: 1, Max: 200 * ms}}, Active: 1}},
			Aims: []string{coverage.RowFaultAcquiring, coverage.RowAcquireInfo, coverage.RowReleaseInfo}},
		{Setup: nemesis.Setup{Name: "servers slowed, paused, cut off",
			Classes:       []nemesis.Class{nemesis.ClassPacket, nemesis.ClassPause, nemesis.ClassPartition, nemesis.ClassClientServerPartition},
			ServerTargets: []nemesis.Target{nemesis.TargetOne}, Interval: 2 * time.Second},
			Regimes: []workloads.Regime{race}, Aims: []string{coverage.RowServerFaultHeld, coverage.RowAcquireInfo}},
		{Setup: nemesis.Setup{Name: "acquirers paused", Classes: []nemesis.Class{nemesis.ClassClientPause},
			ClientTargets: []nemesis.ClientTarget{nemesis.TargetWaiter}, Interval: time.Second},
			Regimes: []workloads.Regime{race}, Aims: []string{coverage.RowFaultAcquiring}},
		{Setup: nemesis.Setup{Name: "servers lost or restarted",
			Classes:       []nemesis.Class{nemesis.ClassKill, nemesis.ClassRestart, nemesis.ClassFailover},
			ServerTargets: []nemesis.Target{nemesis.TargetOne}, Interval: 3 * time.Second},
			Regimes: []workloads.Regime{lostKey(ttl), shortHolds}, Aims: []string{coverage.RowServerFaultHeld, coverage.RowGrantAfterLoss},
			RunThrough: true},
		// A holder whose host vanishes: no FIN or reset reaches the server, which keeps
		// the session, and its lock, until its TCP keepalive gives up. With the
		// kernel's defaults that is 2 h 11 min: an honest configuration finding on every
		// session lock (--db-keepalive closes it), a recipe bug on a lock whose entries
		// never expire. Last, so a session on a correct recipe reaches it last.
		{Setup: nemesis.Setup{Name: "holders vanished", Classes: []nemesis.Class{nemesis.ClassClientVanish},
			ClientTargets: holder, Interval: 2 * time.Second},
			Regimes: []workloads.Regime{shortHolds}, Aims: []string{coverage.RowFaultHolding, coverage.RowOrphans}},
	}
}
