package cause

import (
	"fmt"
	"strings"

	"github.com/zlockcheck/zlockcheck/histories"
)

// ClassifyBlocked says why a lock stayed blocked after the faults healed (the
// liveness verdict), when the history can: entries are the lock's entries that the
// final phase found (histories.LockChild; Process -1 for an entry of no known
// worker). It classes two situations, and for anything else ok is false:
//
//   - An owner whose last release of key was acknowledged while a failover had cut
//     the standby off from the primary, before the primary crashed, released the lock
//     on a primary whose data was then lost: the promoted standby has the entry back,
//     and a lock without expiry stays blocked for ever. That is the server losing a
//     write (ServerLost), not the recipe.
//   - An owner that a client-vanish fault took while it held (its host gone without
//     a word), that client-kill killed, or whose last op ended unknown (the harness
//     retired it: it never acts again). While the server still has a vanished owner's
//     session, it keeps the session's locks until its TCP keepalive gives up on the
//     connection: Configuration, with the setting the fault recorded ("kept_until").
//     An entry that outlives its session (LockChild.OutlivesSession: a lock table's
//     row), or one still there once the owner's session has ended, outlives its
//     owner: nothing but an expiry would remove it (RecipeBug).
func ClassifyBlocked(h histories.History, key string, entries []histories.LockChild) (Finding, bool) {
	faults := faults(h)
	for _, e := range entries {
		if e.Process < 0 {
			continue
		}
		if f, ok := releaseLostInFailover(h, key, e.Process, faults); ok {
			return f, true
		}
		if f, ok := ownerGone(h, e, faults); ok {
			return f, true
		}
	}
	return Finding{}, false
}

// ClassifyStarved says why workers could not even be started after the faults healed
// (the liveness verdict's final cycles that answered histories.FinalNoWorker), when
// the history can: the last start failed because the server refused a connection at
// its limit (the error's words: "too many connections", "too many clients", "max
// number of clients"), and clients had vanished with their hosts during the run. A
// server keeps a vanished client's connections until its TCP keepalive gives up
// (the fault's record says when: kept_until), so every client that vanished keeps its
// whole connection pool open, and enough of them use up the server's limit:
// Configuration. Anything else: ok is false.
func ClassifyStarved(h histories.History, finals []histories.FinalCycle) (Finding, bool) {
	var starved *histories.FinalCycle
	for i, c := range finals {
		if c.Reply == histories.FinalNoWorker && atLimit(c.Error) {
			starved = &finals[i]
			break
		}
	}
	if starved == nil {
		return Finding{}, false
	}
	var vanished []fault
	for _, x := range faults(h) {
		if x.class == "client-vanish" && x.keptUntil != "" {
			vanished = append(vanished, x)
		}
	}
	if len(vanished) == 0 {
		return Finding{}, false
	}
	last := vanished[len(vanished)-1]
	f := Finding{Class: Configuration, Holder: -1, Next: -1, At: last.start}
	f.Why = fmt.Sprintf("no worker of slot %d could be started: the server refused its connections at its limit (%s); %d clients vanished with their hosts during the run, the last at %s, and the server keeps a vanished client's connections, its whole pool, until its TCP keepalive gives up on them",
		starved.Slot, brief(limitWords(starved.Error)), len(vanished), at(last.start))
	f.Fix = "a server keepalive that gives up on a vanished client sooner (" + last.keptUntil + "), a connection limit above what the clients' pools open, or smaller pools"
	return f, true
}

// limitPhrases are how servers word a connection refused at their limit (MariaDB's
// and MySQL's "Too many connections", PostgreSQL's "sorry, too many clients already",
// Redis's "max number of clients reached").
var limitPhrases = []string{"too many connections", "too many clients", "max number of clients"}

// atLimit reports whether err says a server refused a connection at its limit.
func atLimit(err string) bool {
	return limitWords(err) != ""
}

// limitWords is the part of err from the limit's phrase to the next parenthesis ("" when
// it has none).
func limitWords(err string) string {
	lower := strings.ToLower(err)
	for _, p := range limitPhrases {
		if i := strings.Index(lower, p); i >= 0 {
			words, _, _ := strings.Cut(err[i:], " (")
			return words
		}
	}
	return ""
}

// releaseLostInFailover: process p's last release of key was acknowledged during a
// failover that promoted a standby which never saw it.
func releaseLostInFailover(h histories.History, key string, p int, faults []fault) (Finding, bool) {
	released, ok := lastRelease(h, key, p)
	if !ok {
		return Finding{}, false
	}
	for _, x := range faults {
		if x.class != "failover" || released < x.start || released > x.stop {
			continue
		}
		f := Finding{Class: ServerLost, Holder: p, Next: -1, At: x.stop}
		f.Why = fmt.Sprintf("process %d's release was acknowledged at %s, during a failover (from %s) that promoted %s, which never saw it; the promoted server has process %d's entry again and nothing removes it",
			p, at(released), at(x.start), x.promoted, p)
		f.Fix = failoverFix(x) + "; or a lock whose entries expire"
		return f, true
	}
	return Finding{}, false
}

// ownerGone: entry e's owner was killed, its host vanished, or its last op ended
// unknown and it did nothing after (the harness retired it: a client that died), and e
// is still there.
func ownerGone(h histories.History, e histories.LockChild, faults []fault) (Finding, bool) {
	var gone *fault
	for i, x := range faults {
		if x.process == e.Process && (x.class == "client-kill" || x.class == "client-vanish") {
			gone = &faults[i] // the last one: a process dies once
		}
	}
	f := Finding{Holder: e.Process, Next: -1}
	var how string
	switch last, retired := lastOp(h, e.Process); {
	case gone != nil && gone.class == "client-vanish":
		f.At, how = gone.start, fmt.Sprintf("vanished with its host at %s (no FIN or reset reached the server)", at(gone.start))
	case gone != nil:
		f.At, how = gone.start, fmt.Sprintf("was killed at %s", at(gone.start))
	case retired:
		f.At, how = last.Time, fmt.Sprintf("ended with its %s unknown at %s (%s) and did nothing after", last.F, at(last.Time), brief(last.Error))
	default:
		return Finding{}, false
	}
	switch {
	case e.OutlivesSession:
		f.Class = RecipeBug
		f.Why = fmt.Sprintf("process %d %s; the lock's entry %s stays whether its session %s lives or not: nothing removes the entry of an owner that died",
			e.Process, how, e.Node, e.EphemeralOwner)
		f.Fix = "entries that expire (a lock table's row with an expiry that waiters take over), or a lock the session holds (an advisory lock, GET_LOCK)"
	case e.SessionAlive && gone != nil && gone.keptUntil != "":
		f.Class = Configuration
		f.Why = fmt.Sprintf("process %d %s; the server still has its session %s, and with it the lock's entry %s: a server ends the session of a client that vanished only when its TCP keepalive gives up on the connection",
			e.Process, how, e.EphemeralOwner, e.Node)
		f.Fix = "a server keepalive that gives up within the session timeout: " + gone.keptUntil
	case !e.SessionAlive:
		f.Class = RecipeBug
		f.Why = fmt.Sprintf("process %d %s; its session %s has ended, but the lock's entry %s is still there: nothing removes the entry of an owner that died",
			e.Process, how, e.EphemeralOwner, e.Node)
		f.Fix = "entries that expire (a lock table's row with an expiry that waiters take over), or a lock the session holds (an advisory lock, GET_LOCK)"
	default:
		return Finding{}, false
	}
	return f, true
}

// brief is the first line of an op's error, at most 100 characters.
func brief(err string) string {
	err, _, _ = strings.Cut(err, "\n")
	if len(err) > 100 {
		err = err[:100] + "…"
	}
	return err
}

// lastOp is process p's last op; retired is set when it completed as info (its worker
// crashed or was replaced: it never acts again).
func lastOp(h histories.History, p int) (histories.Op, bool) {
	for i := len(h) - 1; i >= 0; i-- {
		if op := h[i]; !op.Process.Nemesis && op.Process.ID == p {
			return op, op.Type == histories.Info
		}
	}
	return histories.Op{}, false
}

// lastRelease is when process p's last release of key was acknowledged (ok, not a
// lost report), if it had one.
func lastRelease(h histories.History, key string, p int) (int64, bool) {
	var at int64
	found := false
	for _, op := range h {
		if !op.Process.Nemesis && op.Process.ID == p && op.Key == key && op.F == histories.FRelease && op.Type == histories.OK && !op.Lost {
			at, found = op.Time, true
		}
	}
	return at, found
}

// ClassifyTokens says why a grant (later) carries a fencing token no greater than
// that of a grant (earlier) that had completed before it was asked for
// (models.CheckTokens). A server fault that can set the token's counter back, in
// force at some time between the two grants, is the server's doing: a restart or
// failover, a kill of a Redis instance that comes back without what it had (its record
// names it "forgetting"), losing a Redis INCR key or a sequence (ServerLost); a clock jump
// (which expires a counter key that has a TTL: Clock). Otherwise the recipe drew or
// kept a token it must not (RecipeBug: a takeover that kept the displaced holder's
// token, a token from a clock or a per-client counter).
func ClassifyTokens(h histories.History, earlier, later histories.Op) Finding {
	a, b := earlier.Process.ID, later.Process.ID
	f := Finding{Holder: a, Next: b, At: later.Time}
	for _, x := range faults(h) {
		if x.start > later.Time || x.stop < earlier.Time {
			continue
		}
		switch {
		case x.class == "failover", x.class == "restart" && (x.forgetting == nil || len(x.forgetting) > 0),
			x.class == "kill" && len(x.forgetting) > 0:
			f.Class = ServerLost
			f.Fix = "a token counter the servers do not lose: durable persistence, synchronous replication"
		case x.class == "clock-jump":
			f.Class = Clock
			f.Fix = "a token counter without an expiry"
		default:
			continue
		}
		f.Why = fmt.Sprintf("a %s at %s, in force between process %d's grant at %s and process %d's at %s, can have set the servers' token counter back", x.class, at(x.start), a, at(earlier.Time), b, at(later.Time))
		return f
	}
	f.Class = RecipeBug
	f.Why = fmt.Sprintf("process %d was granted at %s with a fencing token no greater than process %d's, whose grant had completed at %s, with no server fault between them that could lose the token's counter: the recipe reused or kept a token (a takeover that keeps the displaced holder's token lets a fenced resource take that holder's stale writes)", b, at(later.Time), a, at(earlier.Time))
	f.Fix = "draw a new token from one counter on every grant, takeovers included"
	return f
}
