package cause

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// serverFault finds the server fault that made the servers forget a's key before b
// was granted, when a had no client fault of its own:
//
//   - a restart of Redis instances whose persistence is not aof-always, started while
//     a held, of an instance that can forget the key (not a replica, which resyncs);
//   - a restart or kill of a database server, started while a held, when the lock
//     lives in a session (its record says frees_locks): every session on it ends;
//   - a failover in force while a held and before b was granted, not recorded as
//     aimed at another holder (the promoted replica never saw a's grant);
//   - a clock jump started while a held (the key expired early).
//
// In each case b was granted within window (LostBound) of the loss: later, the holder
// should have learned of the loss (its next extend fails, its validity runs out), and
// holding on without reporting lost is the recipe's bug. It also returns when the key
// was lost.
func serverFault(faults []fault, a, b hold, window time.Duration) (fault, int64, bool) {
	for _, x := range faults {
		if x.process == a.process && x.start >= a.start && x.start <= b.start {
			return fault{}, 0, false // the holder had a client fault: not the servers' doing
		}
	}
	for _, x := range faults {
		during := x.start >= a.start && x.start <= b.start
		loss := x.start
		forgets := (x.forgetting == nil || len(x.forgetting) > 0) && x.persistence != "" && x.persistence != "aof-always"
		switch {
		case x.class == "failover":
			// The grant is lost when the primary has resynced; in a failover still in
			// force at b's grant (the sentinels' may last the run), at the latest then.
			loss = min(x.stop, b.start)
		case x.class == "kill" && forgets && !x.freesLocks:
			// A killed instance that keeps no durable copy comes back empty at the
			// kill's heal: the key is lost then, if it serves the key again (one
			// instance, or a primary restarted before its failover).
			loss, during = x.stop, x.stop >= a.start && x.stop <= b.start
		}
		if window > 0 && b.start-loss >= window.Nanoseconds() {
			continue
		}
		switch x.class {
		case "restart", "kill":
			if during && forgets && !x.freesLocks {
				return x, loss, true
			}
			if during && x.freesLocks {
				return x, loss, true // a database server's sessions, and their locks, end with it
			}
		case "failover":
			if x.start <= b.start && x.stop >= a.start && (x.holder < 0 || x.holder == a.process) {
				return x, loss, true
			}
		case "clock-jump":
			if during {
				return x, loss, true
			}
		}
	}
	return fault{}, 0, false
}

// serversSplit finds a failover the servers made themselves (the sentinels', the
// cluster's) under way at b's grant: until it settles, the old primary may serve its
// clients beside the promoted one (Jepsen's minority primary), each with a lock state
// of its own, so a holder there renews its own key with success, a renewal that checks
// whose lease it renews included, and can learn of the loss only once the servers
// settled.
func serversSplit(faults []fault, b hold) (fault, bool) {
	for _, x := range faults {
		if x.class == "failover" && x.by != "" && x.start <= b.start && x.stop >= b.start {
			return x, true
		}
	}
	return fault{}, false
}

// grantLostInFailover finds the failover that lost b's grant before b heard of it: b's
// acquire was invoked before the failover ended and answered after it, and a was
// granted only after it ended, on the resynced primary. b's grant was written on the
// old primary during the split and acknowledged (its reply held back, by a WAIT after
// the write, say) after the resync had dropped it, so the two grants arrive together
// and neither holder could know: the servers lost b's grant, not a's.
func grantLostInFailover(faults []fault, a, b hold) (fault, bool) {
	for _, x := range faults {
		if x.class == "failover" && b.invoke < x.stop && x.stop <= a.start && x.stop <= b.start && (x.holder < 0 || x.holder == b.process) {
			return x, true
		}
	}
	return fault{}, false
}

// failoverFix is the setting that keeps a failover from losing acknowledged writes:
// on a database standby (its record names the replication), synchronous
// replication; on Redis, WAIT.
func failoverFix(x fault) string {
	if x.replication != "" {
		return "synchronous replication: synchronous_standby_names naming the standby, with synchronous_commit on or remote_apply, so that a commit (a grant, a release) is on the standby before it is acknowledged"
	}
	return "WAIT 1 <timeout> after the grant, so that a replica has the key before the grant counts (a failover then promotes a replica that has it)"
}

// own says how a finding names the servers that failed over on their own, by the
// failover record's "by": "sentinel" (Redis's sentinels) or "cluster" (a Redis
// Cluster's own election); its fields read "<who> failed over", "<whose> primary",
// "<who> <were> failing over". Another maker is named by its word.
type own struct {
	who, whose, were string
	// second says how a second primary came to serve beside the one it named.
	second string
	// fix is the setting that keeps its failover from losing a grant.
	fix string
}

// owns are the makers of the servers' own failovers the history names.
var owns = map[string]own{
	"sentinel": {who: "the sentinels", whose: "the sentinels'", were: "were",
		second: "a primary restarted empty, or cut off from the sentinels, before they made it a replica",
		fix:    sentinelFix},
	"cluster": {who: "the cluster", whose: "the cluster's", were: "was",
		second: "a primary restarted with its old slots, or cut off from the other primaries, before it learned of the newer epoch",
		fix:    clusterFix},
}

// ownOf is how a finding names the maker by ("sentinel", "cluster", or another word
// a later history writes).
func ownOf(by string) own {
	if o, ok := owns[by]; ok {
		return o
	}
	return own{who: "the servers (" + by + ")", whose: "the servers' (" + by + ")", were: "were",
		second: "a primary that had not heard of the failover yet", fix: sentinelFix}
}

// sentinelFix is what keeps the sentinels' failover from losing a grant: the
// promoted replica has it, and a primary cut off from its replicas stops granting.
const sentinelFix = "WAIT 1 <timeout> after the grant, giving it back when no replica acknowledges it (as redis-lock-wait does: a replica has the key before the grant counts, and the sentinels promote the most up-to-date replica), and min-replicas-to-write 1 with min-replicas-max-lag (--redis-min-replicas-to-write), so that a primary cut off from its replicas refuses grants the failover would lose; fencing the resource covers what remains"

// clusterFix is what keeps a Redis Cluster's own failover from losing a grant: WAIT,
// since the cluster too promotes a replica that replicated asynchronously;
// min-replicas-to-write only narrows the window, as the node timeout does, and
// cluster-replica-validity-factor is not a fix: it keeps a replica long parted from
// its primary from standing, not one that missed the last grant.
const clusterFix = "WAIT 1 <timeout> after the grant, giving it back when no replica acknowledges it (as redis-lock-wait does: a grant counts only once a replica has the key, and the cluster's election favours the most up-to-date replica); min-replicas-to-write 1 with min-replicas-max-lag on the primaries (--redis-min-replicas-to-write) narrows the window (a primary cut off from its replicas refuses grants once their acknowledgements are older than the lag), as cluster-node-timeout does (a primary cut off from the other primaries refuses writes after it), but neither closes it: a grant in the first moments of the cut is still lost; cluster-replica-validity-factor is no fix (it bars a replica long parted from its primary, not one that missed the last grant); fencing the resource covers what remains"

// ownWhy says what the servers' own failover x (its maker in x.by) did to process
// p's key.
func ownWhy(x fault, p int) string {
	o := ownOf(x.by)
	span := fmt.Sprintf("from %s to %s", at(x.start), at(x.stop))
	if x.stop == math.MaxInt64 {
		span = fmt.Sprintf("from %s to the end of the history", at(x.start))
	}
	served := ""
	if n := len(x.primaries); n > 1 {
		served = fmt.Sprintf(", and %s and %s each served as a primary", strings.Join(x.primaries[:n-1], ", "), x.primaries[n-1])
	}
	switch {
	case x.promoted != "":
		return fmt.Sprintf("%s failed over from %s to %s (%s)%s: process %d's key was not on the primary the next client found",
			o.who, x.primary, x.promoted, span, served, p)
	case len(x.primaries) > 1:
		return fmt.Sprintf("%s primary %s was not the only one (%s)%s (%s): process %d's key was on one of them only",
			o.whose, x.primary, span, served, o.second, p)
	}
	return fmt.Sprintf("%s %s failing over from %s (%s): process %d's key was not on the primary the next client found", o.who, o.were, x.primary, span, p)
}

// serverLoss says what the server fault x did to a's key and which setting would have
// kept it.
func serverLoss(x fault, a, b hold) (Class, string, string) {
	granted := fmt.Sprintf("process %d was granted at %s while process %d held", b.process, at(b.start), a.process)
	on := strings.Join(x.servers, ", ")
	if len(x.forgetting) > 0 {
		on = strings.Join(x.forgetting, ", ")
	}
	switch {
	case x.freesLocks && (x.class == "restart" || x.class == "kill"):
		why := fmt.Sprintf("%s was %s at %s, which ended every session on it, process %d's and its lock with it; %s",
			on, map[string]string{"restart": "restarted", "kill": "killed"}[x.class], at(x.start), a.process, granted)
		return ServerLost, why, "no server setting keeps a session lock across its server's crash: fence the resource (a lock table's token), or use a lock that lives in durable, replicated state"
	case x.class == "restart" || x.class == "kill":
		why := fmt.Sprintf("%s restarted at %s with persistence %s and came back without process %d's key; %s",
			on, at(x.start), x.persistence, a.process, granted)
		if x.class == "kill" {
			why = fmt.Sprintf("%s was killed at %s and came back at %s with persistence %s, without process %d's key; %s",
				on, at(x.start), at(x.stop), x.persistence, a.process, granted)
		}
		fix := "appendfsync always (--redis-persistence aof-always), or a delayed restart: an instance that stays down at least the lock's TTL before it serves again"
		if x.persistence == "aof-everysec" {
			fix = "appendfsync always (--redis-persistence aof-always: everysec loses up to a second of acknowledged writes), or a delayed restart of at least the lock's TTL"
		}
		return ServerLost, why, fix
	case x.class == "failover" && x.by != "":
		return ServerLost, ownWhy(x, a.process) + "; " + granted, ownOf(x.by).fix
	case x.class == "failover":
		why := fmt.Sprintf("a failover at %s promoted %s, which never saw process %d's grant, and the primary went on with its data; %s",
			at(x.start), x.promoted, a.process, granted)
		if x.replication != "" {
			why = fmt.Sprintf("a failover at %s promoted %s, a standby with %s replication that never saw process %d's grant; %s",
				at(x.start), x.promoted, x.replication, a.process, granted)
		}
		return ServerLost, why, failoverFix(x)
	}
	why := fmt.Sprintf("%s's clock jumped forward %s at %s and expired process %d's key early; %s",
		on, x.delta, at(x.start), a.process, granted)
	return Clock, why, "no Redis setting: expiry follows the server's wall clock; fence the resource (a token it checks), or keep server clocks from jumping (slewing NTP)"
}
