// Package cause says why a lock's mutual exclusion broke, from the history alone: it
// sorts each moment two workers held the same exclusive lock into one of five
// classes, by the rule docs/checking.md states (Verdicts: what broke), and names the
// first, unless a later one is a recipe bug:
//
//   - Unfenced overlap: the earlier holder could not have known yet (the nemesis had
//     stopped its process, client-pause; or the servers had closed its session under
//     it, session-expire, or a connection-kill that freed its locks, a database
//     session's) and its hold ended (it reported lost, or released) within
//     LostBound of the moment it could know (the pause ended, the session was
//     expired). No lock recipe can prevent such an overlap; only fencing the
//     protected resource can.
//   - Configuration: the earlier holder had no fault of its own while a partition cut
//     a follower or an observer off from the quorum, and the servers' sync window
//     (syncLimit x tickTime, a learner's read timeout on its leader, an observer's as
//     a follower's) exceeded the session timeout, so that server may go on serving a
//     session the leader has already expired.
//   - Server lost the lock: the earlier holder had no fault of its own while the
//     server forgot its key (a Redis restart with persistence other than aof-always,
//     started while it held; a failover in force while it held, whose promoted
//     replica never saw the grant: the nemesis's, or one the servers made on their
//     own, whose record names its maker in "by", "sentinel" or "cluster"), the
//     next holder was granted within LostBound of the loss, and the earlier
//     holder's hold ended within LostBound of it. The finding names the setting
//     that would have kept the key (AOF always or a delayed restart; WAIT after the
//     grant, and min-replicas-to-write against the servers' own failovers).
//   - Clock: the same, after a clock jump on a server expired its key early.
//   - Recipe bug, whatever the faults: the earlier holder reported its lease renewed
//     (the protocol's renewed event) twice or more after the next was granted: a
//     renewal that checks whose lease it renews fails once the lock is another's.
//   - Recipe bug: everything else (a holder that kept running, was cut off, and did
//     not report lost before its session could expire; a holder that never reported
//     lost at all; a holder whose key the server lost or a clock jump expired, that
//     went on holding more than LostBound after the loss without reporting lost; two
//     holders with no fault at all).
//
// The package reads op names and the nemesis's fault records; it knows nothing of
// ZooKeeper's API.
package cause

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

// Class is a violation's cause class.
type Class string

// The cause classes.
const (
	Unfenced      Class = "unfenced overlap"
	Configuration Class = "configuration"
	RecipeBug     Class = "recipe bug"
	// ServerLost: the server forgot the earlier holder's key under it (a Redis
	// restart without durable persistence, a failover to a replica that never saw the
	// grant).
	ServerLost Class = "server lost the lock"
	// Clock: a server's clock jumped forward and expired the earlier holder's key
	// early (clock-jump).
	Clock Class = "clock"
)

// Honest reports whether an overlap of class c is the truth about the service or its
// settings, which no lock recipe can prevent (unfenced, configuration, server lost
// the lock, clock), rather than a recipe's bug.
func (c Class) Honest() bool {
	switch c {
	case Unfenced, Configuration, ServerLost, Clock:
		return true
	}
	return false
}

// Params are the run's settings the rule needs.
type Params struct {
	// SessionTimeout is the workers' session timeout.
	SessionTimeout time.Duration
	// Tick and SyncLimit are the servers' tickTime and syncLimit (zero: unknown).
	Tick      time.Duration
	SyncLimit int
	// Lease: the session is a lease the holder renews (Redis, a lock table with an
	// expiry): a renewal or a release that checks the lock's value tells a holder its
	// lease ran out, so a release that succeeds after it did shows a holder that
	// never learned.
	Lease bool
}

// SyncWindow is how long a follower or an observer cut off from the leader goes on
// serving its clients: syncLimit x tickTime.
func (p Params) SyncWindow() time.Duration { return time.Duration(p.SyncLimit) * p.Tick }

// LostBound is how soon after it could know a holder must report lost for an
// overlap to count as unfenced: one session timeout (a client hears of its expired
// session at its next exchange with a server, within a third of it) plus a second
// of slack for a busy machine.
func (p Params) LostBound() time.Duration { return p.SessionTimeout + time.Second }

// Finding is the overlap of a key Classify names (the first, or a later recipe bug)
// and its class.
type Finding struct {
	Class Class `json:"class"`
	// Why says it in a sentence, with the times and the fault.
	Why string `json:"why"`
	// Holder is the earlier holder's process, Next the one granted while it held; At
	// is when Next was granted (ns since the run's start).
	Holder int   `json:"holder"`
	Next   int   `json:"next"`
	At     int64 `json:"at_ns"`
	// Fix says what would close the window, for a configuration, server-lost or clock
	// finding.
	Fix string `json:"fix,omitempty"`
}

// hold is one process's tenure of a key: from its acquire's ok to its release's
// invoke (math.MaxInt64 when it never released).
type hold struct {
	process    int
	start, end int64
	// invoke is when the acquire that granted the hold was invoked.
	invoke int64
}

// fault is one nemesis fault: its class, target process, shape, and when it started
// and stopped (math.MaxInt64 when it never stopped).
type fault struct {
	class       string
	process     int
	shape       string
	start, stop int64
	// holder and server: a partition aimed at the server the lock holder was
	// connected to names them, a failover the holder whose grant it lost (holder -1
	// otherwise).
	holder int
	server string
	// cutOff and role: the server an isolate-follower-quorum partition cut off and
	// its role, follower or observer ("": a record from before observers).
	cutOff, role string
	// persistence, servers, promoted and delta are a Redis fault's: the instances'
	// persistence setting, the instances it acted on, a failover's promoted replica, a
	// clock jump's Δ.
	persistence string
	// replication is a database failover's ("asynchronous": its standby may lack
	// the last commits).
	replication string
	servers     []string
	forgetting  []string // a restart's instances that can forget a key (nil: unrecorded, all)
	promoted    string
	primary     string // a failover's primary, the server it replaced
	// primaries are the servers that served as primaries during the servers' own
	// failover (its stop's record).
	primaries []string
	delta     time.Duration
	// keptUntil is a client-vanish's: what bounds how long the servers keep the
	// vanished client's session ("": they keep none).
	keptUntil string
	// by is what made a failover the servers made on their own ("sentinel",
	// "cluster"; "": the nemesis).
	by string
	// freesLocks: a database server's restart or kill (or a session's kill) that
	// ends sessions whose locks go with them (the record's frees_locks).
	freesLocks bool
}

// Classify finds the overlaps of two holders of key and says the cause of the first,
// unless a later one (of the first maxPairs) is a recipe bug: then that one, since a
// recipe bug found anywhere is what the recipe's owner must hear (an honest overlap
// first, a clock jump's, must not hide it). False when no two holds of key overlap
// for certain (both acquires had completed before either release began).
func Classify(h histories.History, key string, p Params) (Finding, bool) {
	pairs := overlaps(holds(h, key), maxPairs)
	if len(pairs) == 0 {
		return Finding{}, false
	}
	faults, renewals := faults(h), renewals(h, key)
	first := classifyPair(h, key, pairs[0], faults, renewals, p)
	if first.Class == RecipeBug {
		return first, true
	}
	for _, pair := range pairs[1:] {
		if f := classifyPair(h, key, pair, faults, renewals, p); f.Class == RecipeBug {
			return f, true
		}
	}
	return first, true
}

// sessionKill is the class this package gives a connection-kill that freed the
// session's locks (its record says frees_locks: a database's session lock): like
// session-expire, the holder can know from the moment the server ended its session.
const sessionKill = "connection-kill (session ended)"

// inForceAtGrant reports whether x, begun before hold a, was still under way when the
// hold began, and is a fault that counts then: one that ends the holder's session
// (the server may have ended it just after it granted the lock: a kill sent while
// the acquire's reply was on its way), so the holder could know from the grant on;
// or a pause of the holder (begun while its acquire was in flight: the grant came
// in as the process stopped, and it could know only once it ran again).
func inForceAtGrant(x fault, a hold) bool {
	return (x.class == "session-expire" || x.class == sessionKill || x.class == "client-pause") && x.stop >= a.start
}

// maxPairs bounds how many overlapping pairs Classify looks at.
const maxPairs = 1000

// classifyPair says the cause of one overlap: b granted while a held.
func classifyPair(h histories.History, key string, pair [2]hold, faults []fault, renewals map[int][]int64, p Params) Finding {
	a, b := pair[0], pair[1]
	f := Finding{Holder: a.process, Next: b.process, At: b.start}
	_, split := serversSplit(faults, b)
	if r := renewedAfter(renewals[a.process], a, b); len(r) > 0 && !split {
		f.Class = RecipeBug
		f.Why = fmt.Sprintf("process %d reported its lease renewed %d times after process %d was granted at %s (the last at %s) and held on until %s: a renewal that checks whose lease it renews fails once the lock is another's (its renewal does not check, or brings a lost key back; or the grant to process %d did not check a lease that was still process %d's)",
			a.process, len(r), b.process, at(b.start), at(r[len(r)-1]), endOf(a), b.process, a.process)
		return f
	}
	lost, lostAt := lostReport(h, key, a)
	for _, x := range faults {
		if x.process != a.process || x.start > b.start || x.start < a.start && !inForceAtGrant(x, a) {
			continue
		}
		switch x.class {
		case "client-pause", "session-expire", sessionKill:
			know := x.stop
			if x.class != "client-pause" {
				know = max(x.start, a.start)
			}
			end, how := holdEnd(a, lost, lostAt)
			if x.class == "client-pause" && p.Lease && how == "released" && releasedOK(h, key, a) {
				return pausedLeaseHeldOn(f, a, b, x)
			}
			if end-know <= p.LostBound().Nanoseconds() {
				f.Class = Unfenced
				f.Why = fmt.Sprintf("process %d could not know it had lost the lock (%s at %s) and %s %s after it could; process %d was granted at %s. No lock recipe can prevent this; only fencing can",
					a.process, x.class, at(x.start), how, dur(end-know), b.process, at(b.start))
				return f
			}
		}
	}
	if x, found := grantLostInFailover(faults, a, b); found {
		f.Class, f.Holder, f.Next = ServerLost, b.process, a.process
		f.Why = fmt.Sprintf("process %d's acquire, invoked at %s, was in flight through a failover (from %s to %s) that promoted %s: its grant was written on the old primary, which then resynced from %s without it, and was acknowledged at %s, after the key was gone; process %d was granted on the resynced primary at %s",
			b.process, at(b.invoke), at(x.start), at(x.stop), x.promoted, x.promoted, at(b.start), a.process, at(a.start))
		f.Fix = failoverFix(x)
		if x.by != "" {
			o := ownOf(x.by)
			f.Why = fmt.Sprintf("process %d's acquire, invoked at %s, was in flight as %s failed over from %s to %s (under way from %s, %s named at %s): its grant was written on %s and acknowledged at %s, but %s never had it; process %d was granted on %s at %s",
				b.process, at(b.invoke), o.who, x.primary, x.promoted, at(x.start), x.promoted, at(x.stop), x.primary, at(b.start), x.promoted, a.process, x.promoted, at(a.start))
			f.Fix = o.fix
		}
		return f
	}
	if x, loss, found := serverFault(faults, a, b, p.LostBound()); found {
		if y, ok := serversSplit(faults, b); ok && x.class == "failover" {
			// The old primary served its clients until the servers settled: a holder
			// there could learn only then (or by the history's end, if never).
			loss = max(loss, min(y.stop, h[len(h)-1].Time))
		}
		if learned(h, a, lost, lostAt, loss, p) {
			f.Class, f.Why, f.Fix = serverLoss(x, a, b)
			return f
		}
		f.Class = RecipeBug
		f.Why = fmt.Sprintf("the servers lost process %d's key (%s at %s), but it went on holding until %s and never reported lost; process %d was granted at %s while it held (a recipe must learn of it at its next extend, or when its validity runs out: within %s)",
			a.process, x.class, at(loss), endOf(a), b.process, at(b.start), p.LostBound())
		return f
	}
	if cut, found := followerCut(faults, a, b); found && p.SyncWindow() > p.SessionTimeout {
		f.Class = Configuration
		role := cut.role
		if role == "" {
			role = "follower" // a record from before observers
		}
		server := "a " + role
		switch {
		case cut.server != "":
			server = fmt.Sprintf("its %s %s", role, cut.server)
		case cut.cutOff != "":
			server = fmt.Sprintf("the %s %s", role, cut.cutOff)
		}
		f.Why = fmt.Sprintf("process %d had no fault of its own while a partition (%s, from %s) cut %s off from the quorum; with a sync window of %s past the session timeout %s, the %s kept serving a session the leader had expired; process %d was granted at %s",
			a.process, cut.shape, at(cut.start), server, p.SyncWindow(), p.SessionTimeout, role, b.process, at(b.start))
		f.Fix = fmt.Sprintf("a sync window of at most half the session timeout %s: --sync-limit %d (now %d) with tickTime %s",
			p.SessionTimeout, max(1, int(p.SessionTimeout/2/p.Tick)), p.SyncLimit, p.Tick)
		return f
	}
	f.Class = RecipeBug
	f.Why = recipeWhy(a, b, faults, lost, lostAt, p)
	return f
}

// renewals are the times at which each process reported its lease on key renewed
// (the renewed records).
func renewals(h histories.History, key string) map[int][]int64 {
	out := map[int][]int64{}
	for _, op := range h {
		if !op.Process.Nemesis || op.F != histories.FRenewed {
			continue
		}
		var r histories.Renewal
		if json.Unmarshal(op.Value, &r) == nil && r.Key == key {
			out[r.Process] = append(out[r.Process], op.Time)
		}
	}
	return out
}

// renewedAfter is the renewals (times, of hold a's process) after b was granted and
// before a's hold ended, when there are two or more: each renewal is reported once
// it is over, so a first one reported after b's grant may have been done before it
// (its report read late, or the holder paused in between), but the next one began
// after that report. None otherwise.
func renewedAfter(times []int64, a, b hold) []int64 {
	var after []int64
	for _, t := range times {
		if t > b.start && t > a.start && t <= a.end {
			after = append(after, t)
		}
	}
	if len(after) < 2 {
		return nil
	}
	return after
}

// pausedLeaseHeldOn is a lease holder, paused while another was granted, that
// released with success after it resumed: its release, which in a recipe that checks
// the lock's value says the lease is gone, said nothing, and neither did its
// renewals (one that does not check whose lease it renews keeps the next holder's
// alive): it never learned.
func pausedLeaseHeldOn(f Finding, a, b hold, x fault) Finding {
	f.Class = RecipeBug
	f.Why = fmt.Sprintf("process %d was paused (client-pause from %s to %s) while process %d was granted at %s; it resumed, went on holding until %s and released with success, never reporting lost (a renewal or a release that checks the lock's value tells a holder its lease ran out)",
		a.process, at(x.start), at(x.stop), b.process, at(b.start), endOf(a))
	return f
}

// releasedOK reports whether hold a ended with a release of key that completed ok
// and did not report lost.
func releasedOK(h histories.History, key string, a hold) bool {
	for _, op := range h {
		if !op.Process.Nemesis && op.Process.ID == a.process && op.Key == key && op.F == histories.FRelease &&
			op.Type != histories.Invoke && op.Time >= a.end {
			return op.Type == histories.OK && !op.Lost
		}
	}
	return false
}

// learned reports whether a's hold ended (a lost report or its release) within
// LostBound of loss, when the servers forgot its key; a history that ends sooner
// cannot say otherwise, and counts as learned.
func learned(h histories.History, a hold, lost bool, lostAt, loss int64, p Params) bool {
	end, _ := holdEnd(a, lost, lostAt)
	bound := loss + p.LostBound().Nanoseconds()
	return end <= bound || len(h) == 0 || h[len(h)-1].Time < bound
}

// holdEnd is when hold a ended, by a lost report (at lostAt, when lost) or its
// release, whichever came first, and which it was.
func holdEnd(a hold, lost bool, lostAt int64) (int64, string) {
	if lost && lostAt <= a.end {
		return lostAt, "reported lost"
	}
	return a.end, "released"
}

// endOf says when hold a ended.
func endOf(a hold) string {
	if a.end == math.MaxInt64 {
		return "the end of the run"
	}
	return at(a.end)
}

// recipeWhy says what the earlier holder did wrong.
func recipeWhy(a, b hold, faults []fault, lost bool, lostAt int64, p Params) string {
	what := "with no fault of its own"
	for _, x := range faults {
		if x.process == a.process && x.start >= a.start && x.start <= b.start {
			what = fmt.Sprintf("after %s at %s", x.class, at(x.start))
			break
		}
	}
	report := "never reported lost"
	if lost {
		report = fmt.Sprintf("reported lost only at %s", at(lostAt))
	}
	return fmt.Sprintf("process %d went on holding %s and %s; process %d was granted at %s while it held (a recipe must report lost once its session may have expired)",
		a.process, what, report, b.process, at(b.start))
}

// followerCut finds an isolate-follower-quorum partition in force when b was granted.
func followerCut(faults []fault, a, b hold) (fault, bool) {
	for _, x := range faults {
		if x.process == a.process && x.start >= a.start && x.start <= b.start {
			return fault{}, false // the holder had a client fault: not the servers' doing
		}
	}
	for _, x := range faults {
		aimedElsewhere := x.holder >= 0 && x.holder != a.process
		if x.class == "partition" && x.shape == "isolate-follower-quorum" && !aimedElsewhere && x.start <= b.start && x.stop >= a.start {
			return x, true
		}
	}
	return fault{}, false
}

// holds lists every tenure of key, in order of start. A hold never released whose
// process ended with an op of unknown outcome (info: the harness retired the worker,
// as Jepsen retires a crashed process) ends there: a dead worker holds nothing.
func holds(h histories.History, key string) []hold {
	var out []hold
	open := map[int]int{} // process -> index in out of its open hold
	depth := map[int]int{}
	released := map[int]int64{}    // process -> its last release invoke on key
	invoked := map[int]int64{}     // process -> its last acquire invoke on key
	last := map[int]histories.Op{} // process -> its last op, any key
	for _, op := range h {
		if !op.Process.Nemesis {
			last[op.Process.ID] = op
		}
		if op.Process.Nemesis || op.Key != key {
			continue
		}
		p := op.Process.ID
		switch {
		case op.F == histories.FAcquire && op.Type == histories.Invoke:
			invoked[p] = op.Time
		case op.F == histories.FAcquire && op.Type == histories.OK:
			if depth[p]++; depth[p] == 1 {
				open[p] = len(out)
				out = append(out, hold{process: p, start: op.Time, end: math.MaxInt64, invoke: invoked[p]})
			}
		case op.F == histories.FRelease && op.Type == histories.Invoke && depth[p] > 0:
			released[p] = op.Time
			if depth[p]--; depth[p] == 0 || op.Lost {
				out[open[p]].end, depth[p] = op.Time, 0
			}
		case op.F == histories.FRelease && op.Type == histories.Info && depth[p] > 0:
			// The worker crashed or was retired mid-release: every level it held ends
			// from that release's invoke on (a nested lock's outer levels too).
			out[open[p]].end, depth[p] = released[p], 0
		}
	}
	for i := range out {
		if l := last[out[i].process]; out[i].end == math.MaxInt64 && l.Type == histories.Info && l.Time >= out[i].start {
			out[i].end = l.Time
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].start < out[j].start })
	return out
}

// overlaps lists up to limit pairs of holds {a, b} with b granted while a held, in
// the order their overlaps begin (b's grant), the first first.
func overlaps(hs []hold, limit int) [][2]hold {
	var out [][2]hold
	for j, next := range hs {
		for _, prev := range hs[:j] {
			if prev.process != next.process && prev.start < next.start && next.start < prev.end {
				if out = append(out, [2]hold{prev, next}); len(out) == limit {
					return out
				}
			}
		}
	}
	return out
}

// lostReport is when a's process reported it lost the lock during or right after a.
func lostReport(h histories.History, key string, a hold) (bool, int64) {
	for _, op := range h {
		if !op.Process.Nemesis && op.Process.ID == a.process && op.Key == key && op.Lost && op.Time >= a.start {
			return true, op.Time
		}
	}
	return false, 0
}

// faults pairs the nemesis's start and stop records.
func faults(h histories.History) []fault {
	var out []fault
	for _, op := range h {
		if !op.Process.Nemesis || (op.F != histories.FStart && op.F != histories.FStop) {
			continue
		}
		var v struct {
			Fault        string   `json:"fault"`
			Process      *int     `json:"process"`
			Shape        string   `json:"shape"`
			Holder       *int     `json:"holder"`
			HolderServer string   `json:"holder_server"`
			CutOff       string   `json:"cut_off"`
			CutOffRole   string   `json:"cut_off_role"`
			Persistence  string   `json:"persistence"`
			Servers      []string `json:"servers"`
			Forgetting   []string `json:"forgetting"`
			Promoted     string   `json:"promoted"`
			Primary      string   `json:"primary"`
			Primaries    []string `json:"primaries"`
			DeltaMS      int64    `json:"delta_ms"`
			FreesLocks   bool     `json:"frees_locks"`
			Replication  string   `json:"replication"`
			KeptUntil    string   `json:"kept_until"`
			By           string   `json:"by"`
			Aborted      bool     `json:"aborted"`
		}
		if json.Unmarshal(op.Value, &v) != nil || v.Fault == "" {
			continue
		}
		proc := -1
		if v.Process != nil {
			proc = *v.Process
		}
		if v.Fault == "connection-kill" && v.FreesLocks {
			v.Fault = sessionKill
		}
		if op.F == histories.FStart {
			f := fault{class: v.Fault, process: proc, shape: v.Shape, start: op.Time, stop: math.MaxInt64, holder: -1, server: v.HolderServer,
				cutOff: v.CutOff, role: v.CutOffRole,
				persistence: v.Persistence, servers: v.Servers, forgetting: v.Forgetting, promoted: v.Promoted, primary: v.Primary, delta: time.Duration(v.DeltaMS) * time.Millisecond,
				replication: v.Replication, keptUntil: v.KeptUntil, freesLocks: v.FreesLocks, by: v.By}
			if v.Holder != nil {
				f.holder = *v.Holder
			}
			out = append(out, f)
			continue
		}
		for i := len(out) - 1; i >= 0; i-- {
			if out[i].class == v.Fault && out[i].process == proc && out[i].by == v.By && out[i].stop == math.MaxInt64 {
				if v.Aborted {
					out = slices.Delete(out, i, i+1) // a failover given up promoted nobody
					break
				}
				out[i].stop = op.Time
				if v.Holder != nil && out[i].holder < 0 {
					out[i].holder = *v.Holder // a failover learns its holder while applied
				}
				if out[i].promoted == "" {
					out[i].promoted = v.Promoted // the servers' own names it at its end
				}
				out[i].primaries = v.Primaries
				break
			}
		}
	}
	return out
}

func at(ns int64) string  { return fmt.Sprintf("%.2fs", float64(ns)/1e9) }
func dur(ns int64) string { return time.Duration(ns).Round(time.Millisecond).String() }
