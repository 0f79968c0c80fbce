package cause

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
)

var params = Params{SessionTimeout: 4 * time.Second, Tick: 200 * time.Millisecond, SyncLimit: 5}

// harnessDefaults are the run defaults (4 s sessions, 200 ms ticks, syncLimit 30): a
// 6 s sync window.
var harnessDefaults = Params{SessionTimeout: 4 * time.Second, Tick: 200 * time.Millisecond, SyncLimit: 30}

func load(t *testing.T, name string) histories.History {
	t.Helper()
	h, _, err := histories.Load("../../testdata/histories/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// Recorded runs (testdata/histories/README.md): a paused go-zookeeper holder that
// reported lost at once is an unfenced overlap, and so is a MariaDB holder whose
// connection was killed as its lock was granted, and a redislock holder paused as
// its grant came in; mutant-ignore-lost, cut off by a
// client partition and never reporting lost, is a recipe bug.
func TestRecordedOverlaps(t *testing.T) {
	for _, tc := range []struct {
		file string
		want Class
		why  string
	}{
		{"gozk-client-pause-overlap.jsonl", Unfenced, "only fencing"},
		{"ignore-lost-vary-client-partition.jsonl", RecipeBug, "never reported lost"},
		// The kill began as the holder's GET_LOCK was granted: it ended the session
		// from the grant on (once a recipe bug: the kill started before the hold).
		{"mariadb-getlock-kill-at-grant.jsonl", Unfenced, "connection-kill (session ended)"},
		// explore's *acquirers paused* stopped redislock's worker as its grant came in
		// (once a recipe bug: the pause started before the hold).
		{"redislock-sentinel-paused-at-grant.jsonl", Unfenced, "client-pause at 10.58s"},
	} {
		f, ok := Classify(load(t, tc.file), "l0", params)
		if !ok || f.Class != tc.want || !strings.Contains(f.Why, tc.why) {
			t.Errorf("%s: %+v (found %v), want %s saying %q", tc.file, f, ok, tc.want, tc.why)
		}
	}
	// Curator's holder on the follower cut off from the quorum: the configuration,
	// with the harness's default 6 s sync window and 4 s sessions.
	f, ok := Classify(load(t, "curator-zombie-follower.jsonl"), "l0", harnessDefaults)
	if !ok || f.Class != Configuration || !strings.Contains(f.Why, "its follower s2") || !strings.Contains(f.Fix, "--sync-limit 10") {
		t.Errorf("curator-zombie-follower.jsonl: %+v (found %v), want configuration naming s2 and --sync-limit 10", f, ok)
	}
	// zlc-mutex's holder on the observer s4 cut off from the quorum (explore, 3 voters
	// and 2 observers): the same configuration, the observer's sync window.
	f, ok = Classify(load(t, "zlc-mutex-zombie-observer.jsonl"), "l0", harnessDefaults)
	if !ok || f.Class != Configuration || !strings.Contains(f.Why, "its observer s4") || !strings.Contains(f.Why, "the observer kept serving") || !strings.Contains(f.Fix, "--sync-limit 10") {
		t.Errorf("zlc-mutex-zombie-observer.jsonl: %+v (found %v), want configuration naming the observer s4 and --sync-limit 10", f, ok)
	}
	if f, ok := Classify(load(t, "gozk-server-faults-valid.jsonl"), "l0", params); ok {
		t.Errorf("a valid history has an overlap: %+v", f)
	}
}

// op builders for hand-written histories.
func acq(p int, typ histories.Type, t int64) histories.Op {
	return histories.Op{Type: typ, F: histories.FAcquire, Process: histories.Client(p), Time: t, Key: "l0"}
}
func rel(p int, typ histories.Type, t int64, lost bool) histories.Op {
	return histories.Op{Type: typ, F: histories.FRelease, Process: histories.Client(p), Time: t, Key: "l0", Lost: lost}
}
func nem(f string, t int64, value string) histories.Op {
	return histories.Op{Type: histories.Info, F: f, Process: histories.NemesisProcess, Time: t, Value: []byte(value)}
}

const s = int64(time.Second)

// overlap: process 1 holds from 1 s, process 2 is granted at 5 s, process 1 releases
// (lost or not) at end.
func overlap(mid []histories.Op, lostAt int64) histories.History {
	h := histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, 1*s), acq(2, histories.Invoke, 2*s)}
	h = append(h, mid...)
	h = append(h, acq(2, histories.OK, 5*s))
	if lostAt > 0 {
		h = append(h, rel(1, histories.Invoke, lostAt, true), rel(1, histories.OK, lostAt, true))
	} else {
		h = append(h, rel(1, histories.Invoke, 9*s, false), rel(1, histories.OK, 9*s, false))
	}
	return h
}

func TestClassifyRule(t *testing.T) {
	pause := []histories.Op{nem("start", 2*s, `{"fault":"client-pause","process":1}`), nem("stop", 7*s, `{"fault":"client-pause","process":1}`)}
	expire := []histories.Op{nem("start", 3*s, `{"fault":"session-expire","process":1}`)}
	cut := []histories.Op{nem("start", 2*s, `{"fault":"client-partition","process":1}`), nem("stop", 7*s, `{"fault":"client-partition","process":1}`)}
	dbKill := []histories.Op{nem("start", 3*s, `{"fault":"connection-kill","process":1,"frees_locks":true}`), nem("stop", 3*s, `{"fault":"connection-kill","process":1,"frees_locks":true}`)}
	killAtGrant := []histories.Op{nem("start", s-s/10, `{"fault":"connection-kill","process":1,"frees_locks":true}`), nem("stop", s+s/10, `{"fault":"connection-kill","process":1,"frees_locks":true}`)}
	killBefore := []histories.Op{nem("start", s/2, `{"fault":"connection-kill","process":1,"frees_locks":true}`), nem("stop", s-s/10, `{"fault":"connection-kill","process":1,"frees_locks":true}`)}
	// A pause begun while the acquire was in flight: the grant came in as the
	// process stopped (its start is recorded before the process is stopped).
	pauseAtGrant := []histories.Op{nem("start", s-s/10, `{"fault":"client-pause","process":1}`), nem("stop", 7*s, `{"fault":"client-pause","process":1}`)}
	pauseBefore := []histories.Op{nem("start", s/2, `{"fault":"client-pause","process":1}`), nem("stop", s-s/10, `{"fault":"client-pause","process":1}`)}
	redisKill := []histories.Op{nem("start", 3*s, `{"fault":"connection-kill","process":1}`), nem("stop", 3*s, `{"fault":"connection-kill","process":1}`)}
	aimed := []histories.Op{nem("start", 2*s, `{"fault":"partition","shape":"isolate-follower-quorum","holder":1,"holder_server":"s2"}`), nem("stop", 8*s, `{"fault":"partition","shape":"isolate-follower-quorum","holder":1,"holder_server":"s2"}`)}
	elsewhere := []histories.Op{nem("start", 2*s, `{"fault":"partition","shape":"isolate-follower-quorum","holder":7,"holder_server":"s2"}`), nem("stop", 8*s, `{"fault":"partition","shape":"isolate-follower-quorum","holder":7,"holder_server":"s2"}`)}
	follower := []histories.Op{nem("start", 2*s, `{"fault":"partition","shape":"isolate-follower-quorum"}`), nem("stop", 8*s, `{"fault":"partition","shape":"isolate-follower-quorum"}`)}
	long := Params{SessionTimeout: 2 * time.Second, Tick: 500 * time.Millisecond, SyncLimit: 10}
	lease := params
	lease.Lease = true
	for _, tc := range []struct {
		name string
		h    histories.History
		p    Params
		want Class
	}{
		{"paused holder, lost at once", overlap(pause, 7*s+s/2), params, Unfenced},
		{"paused holder, lost too late", overlap(pause, 7*s+6*s), params, RecipeBug},
		{"paused holder, released at once, never lost", releasedAt(overlap(pause, 0), 7*s+s/2), params, Unfenced},
		{"paused holder, held on, never lost", releasedAt(overlap(pause, 0), 13*s), params, RecipeBug},
		{"paused as its acquire was granted, lost at once", overlap(pauseAtGrant, 7*s+s/2), params, Unfenced},
		{"paused and resumed before its grant, lost late", overlap(pauseBefore, 7*s+s/2), params, RecipeBug},
		// A lease: a release that succeeds after the pause shows a holder that never
		// learned (its renewals kept another's lease); one that fails, or reports
		// lost, learned at its release.
		{"paused lease holder, released with success at once", releasedAt(overlap(pause, 0), 7*s+s/2), lease, RecipeBug},
		{"paused lease holder, its release failed at once", failedAt(overlap(pause, 0), 7*s+s/2), lease, Unfenced},
		{"paused lease holder, lost at once", overlap(pause, 7*s+s/2), lease, Unfenced},
		// A lease renewed twice after the next grant: the holder's renewal does not
		// check whose lease it renews, however soon its release failed. Once is not
		// enough (its report may have been read late); renewals before the grant, or
		// another process's or key's, say nothing.
		{"paused lease holder, renewed twice after the grant, its release failed at once", renewed(failedAt(overlap(pause, 0), 7*s+s/2), 1, "l0", 7*s+s/10, 7*s+s/5), lease, RecipeBug},
		{"paused lease holder, renewed once after the grant, its release failed at once", renewed(failedAt(overlap(pause, 0), 7*s+s/2), 1, "l0", 7*s+s/10), lease, Unfenced},
		{"paused lease holder, renewed before the grant, its release failed at once", renewed(failedAt(overlap(pause, 0), 7*s+s/2), 1, "l0", 3*s, 4*s), lease, Unfenced},
		{"paused lease holder, another renewed after the grant", renewed(failedAt(overlap(pause, 0), 7*s+s/2), 2, "l0", 7*s+s/10, 7*s+s/5), lease, Unfenced},
		{"paused lease holder, renewed another key after the grant", renewed(failedAt(overlap(pause, 0), 7*s+s/2), 1, "l1", 7*s+s/10, 7*s+s/5), lease, Unfenced},
		{"expired session, lost at once", overlap(expire, 5*s+s/2), params, Unfenced},
		{"cut-off holder, lost late", overlap(cut, 8*s), params, RecipeBug},
		{"database session killed, lost at once", overlap(dbKill, 5*s+s/2), params, Unfenced},
		{"database session killed, released at once, never lost", releasedAt(overlap(dbKill, 0), 5*s+s/2), params, Unfenced},
		{"database session killed, held on, never lost", overlap(dbKill, 0), params, RecipeBug},
		{"database session killed as the grant was on its way, released at once", releasedAt(overlap(killAtGrant, 0), 5*s+s/2), params, Unfenced},
		{"database session kill over before the grant, held on", overlap(killBefore, 0), params, RecipeBug},
		{"Redis connection killed (the key lives on), lost at once", overlap(redisKill, 5*s+s/2), params, RecipeBug},
		{"no fault", overlap(nil, 0), params, RecipeBug},
		{"isolated follower, long sync window", overlap(follower, 0), long, Configuration},
		{"isolated follower, short sync window", overlap(follower, 0), params, RecipeBug},
		{"the holder's follower isolated", overlap(aimed, 0), long, Configuration},
		{"another holder's follower isolated", overlap(elsewhere, 0), long, RecipeBug},
	} {
		f, ok := Classify(tc.h, "l0", tc.p)
		if !ok || f.Class != tc.want {
			t.Errorf("%s: %+v (found %v), want %s", tc.name, f, ok, tc.want)
		}
		if ok && (f.Holder != 1 || f.Next != 2 || f.At != 5*s) {
			t.Errorf("%s: holder %d, next %d at %d; want 1, 2 at 5s", tc.name, f.Holder, f.Next, f.At)
		}
		if f.Class == Configuration && !strings.Contains(f.Fix, "--sync-limit 2") {
			t.Errorf("%s: fix %q, want --sync-limit 2 (2 s session, 500 ms tick)", tc.name, f.Fix)
		}
	}
}

// renewed inserts renewed records of process p on key at times, before h's last two
// ops (overlap's release of process 1), which come after them.
func renewed(h histories.History, p int, key string, times ...int64) histories.History {
	out := append(histories.History{}, h[:len(h)-2]...)
	for _, t := range times {
		out = append(out, histories.NemesisOp(histories.Renewal{Process: p, Key: key}, ""))
		out[len(out)-1].Time = t
	}
	return append(out, h[len(h)-2:]...)
}

// failedAt is releasedAt with the release failing (not held), not reporting lost.
func failedAt(h histories.History, at int64) histories.History {
	h = releasedAt(h, at)
	h[len(h)-1].Type = histories.Fail
	return h
}

// releasedAt moves the release of overlap's process 1 (its last two ops) to at.
func releasedAt(h histories.History, at int64) histories.History {
	h[len(h)-2].Time, h[len(h)-1].Time = at, at
	return h
}

func TestNoOverlapNoFinding(t *testing.T) {
	h := histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, s), acq(2, histories.Invoke, s),
		rel(1, histories.Invoke, 2*s, false), acq(2, histories.OK, 2*s+1), rel(1, histories.OK, 3*s, false)}
	if f, ok := Classify(h, "l0", params); ok {
		t.Errorf("sequential holds found as an overlap: %+v", f)
	}
	if _, ok := Classify(nil, "l0", params); ok {
		t.Error("an empty history has an overlap")
	}
}

// TestLaterRecipeBugWins: the first overlap is honest (a paused holder that reported
// lost at once), a later one has no fault at all: Classify names the recipe bug, so
// an honest overlap cannot hide it; with only the honest one, that one.
func TestLaterRecipeBugWins(t *testing.T) {
	pause := []histories.Op{nem("start", 2*s, `{"fault":"client-pause","process":1}`), nem("stop", 7*s, `{"fault":"client-pause","process":1}`)}
	honest := overlap(pause, 7*s+s/2)
	honest = append(honest, rel(2, histories.Invoke, 8*s, false), rel(2, histories.OK, 8*s, false))
	withBug := append(append(histories.History{}, honest...),
		acq(3, histories.Invoke, 10*s), acq(3, histories.OK, 11*s), acq(4, histories.Invoke, 11*s), acq(4, histories.OK, 12*s),
		rel(3, histories.Invoke, 13*s, false), rel(3, histories.OK, 13*s, false))
	if f, ok := Classify(honest, "l0", params); !ok || f.Class != Unfenced {
		t.Errorf("honest only: %+v (found %v), want unfenced", f, ok)
	}
	f, ok := Classify(withBug, "l0", params)
	if !ok || f.Class != RecipeBug || f.Holder != 3 || f.Next != 4 || f.At != 12*s {
		t.Errorf("with a later bug: %+v (found %v), want a recipe bug, 3 then 4 at 12s", f, ok)
	}
}

// TestRetiredHolderHoldsNothing: a holder whose last op is of unknown outcome (info:
// the harness retired the worker) holds nothing after it; a grant after that is no
// overlap. Had it gone on (a later op), the same grant would be one.
func TestRetiredHolderHoldsNothing(t *testing.T) {
	write := func(typ histories.Type, at int64) histories.Op {
		return histories.Op{Type: typ, F: "write", Process: histories.Client(1), Time: at, Key: "counter"}
	}
	retired := histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, s), write(histories.Invoke, 2*s), write(histories.Info, 3*s),
		acq(2, histories.Invoke, 2*s), acq(2, histories.OK, 5*s)}
	if f, ok := Classify(retired, "l0", params); ok {
		t.Errorf("a retired holder overlaps: %+v", f)
	}
	alive := append(append(histories.History{}, retired...), write(histories.Invoke, 6*s))
	if _, ok := Classify(alive, "l0", params); !ok {
		t.Error("a holder that went on found no overlap")
	}
}

// TestClassifyBlocked: a lock blocked by the entry of a process whose release was
// acknowledged during a failover (the promoted standby never saw it) is the server's
// loss, with synchronous replication as the fix; one released before the failover, or
// never, is not classed.
func TestClassifyBlocked(t *testing.T) {
	fo := []histories.Op{nem("start", 2*s, `{"fault":"failover","promoted":"s2","replication":"asynchronous"}`),
		nem("stop", 4*s, `{"fault":"failover","promoted":"s2","replication":"asynchronous","holder":2}`)}
	base := histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, s)}
	during := append(append(histories.History{}, base...), fo[0], rel(1, histories.Invoke, 3*s, false), rel(1, histories.OK, 3*s, false), fo[1])
	f, ok := ClassifyBlocked(during, "l0", entries(1))
	if !ok || f.Class != ServerLost || f.Holder != 1 || !strings.Contains(f.Fix, "synchronous_standby_names") {
		t.Errorf("released during the failover: %+v (found %v)", f, ok)
	}
	before := append(append(histories.History{}, base...), rel(1, histories.Invoke, s+1, false), rel(1, histories.OK, s+2, false), fo[0], fo[1])
	if f, ok := ClassifyBlocked(before, "l0", entries(1)); ok {
		t.Errorf("released before the failover: classed %+v", f)
	}
	if f, ok := ClassifyBlocked(during, "l0", entries(-1, 7)); ok {
		t.Errorf("an entry of another process: classed %+v", f)
	}
}

// entries are lock entries of the given processes, their sessions alive.
func entries(procs ...int) []histories.LockChild {
	var out []histories.LockChild
	for _, p := range procs {
		out = append(out, histories.LockChild{Node: fmt.Sprintf("advisory-%d", p), EphemeralOwner: fmt.Sprintf("0x%x", 100+p), Process: p, SessionAlive: true})
	}
	return out
}

// rowEntry is process 1's lock-table row, its session alive.
func rowEntry() []histories.LockChild {
	e := entries(1)
	e[0].Node, e[0].OutlivesSession = "row", true
	return e
}

// TestClassifyBlockedByAGoneOwner: a lock blocked by the live session of a holder
// whose host vanished is the servers' keepalive (configuration, naming the setting
// the fault recorded); by the entry of a holder that died and whose session ended, a
// lock whose entries never expire (recipe bug). A vanished holder on servers that keep
// no session (no kept_until), a gone process that owns no entry, and an entry whose
// owner no fault touched, are not classed.
func TestClassifyBlockedByAGoneOwner(t *testing.T) {
	const setting = "PostgreSQL's tcp_keepalives_idle (now 0)"
	held := histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, s)}
	vanish := func(value string) histories.History {
		return append(append(histories.History{}, held...), nem("start", 2*s, value), nem("stop", 2*s, value))
	}
	kept := vanish(`{"fault":"client-vanish","target":"holder","process":1,"kept_until":"` + setting + `"}`)
	dead := entries(1)
	dead[0].SessionAlive = false
	cases := []struct {
		name    string
		h       histories.History
		entries []histories.LockChild
		want    Class // "": not classed
	}{
		{"vanished, session kept", kept, entries(1), Configuration},
		{"vanished, session ended, entry left", kept, dead, RecipeBug},
		{"killed, session ended, entry left", vanish(`{"fault":"client-kill","target":"holder","process":1}`), dead, RecipeBug},
		{"killed, session alive (not yet expired)", vanish(`{"fault":"client-kill","target":"holder","process":1}`), entries(1), ""},
		{"vanished where no session is kept", vanish(`{"fault":"client-vanish","target":"holder","process":1}`), entries(1), ""},
		{"another process vanished", kept, entries(2), ""},
		{"no fault", held, dead, ""},
		{"vanished, a row that outlives its live session", kept, rowEntry(), RecipeBug},
		{"retired after an unknown release, session ended", append(append(histories.History{}, held...),
			rel(1, histories.Invoke, 3*s, false), histories.Op{Type: histories.Info, F: histories.FRelease, Process: histories.Client(1), Time: 3 * s, Key: "l0", Error: "server gone"}), dead, RecipeBug},
	}
	for _, c := range cases {
		f, ok := ClassifyBlocked(c.h, "l0", c.entries)
		switch {
		case c.want == "" && ok:
			t.Errorf("%s: classed %+v", c.name, f)
		case c.want != "" && (!ok || f.Class != c.want || f.Holder != c.entries[0].Process):
			t.Errorf("%s: %+v (found %v), want %s", c.name, f, ok, c.want)
		case c.want == Configuration && !strings.Contains(f.Fix, setting):
			t.Errorf("%s: the fix does not name the setting: %q", c.name, f.Fix)
		}
	}
}

// TestClassifyStarved: a slot that could start no worker because the server refused
// connections at its limit, after clients vanished whose connections the server keeps,
// is configuration, naming the keepalive the fault recorded; the recorded run
// (spring-jdbc-mariadb-vanished-pools.jsonl) is one. Another start error, no vanished
// client, a vanish where no connection is kept, or every slot started: not classed.
func TestClassifyStarved(t *testing.T) {
	const setting = "MariaDB's tcp_keepalive_time (now 0)"
	vanish := func(value string) histories.History {
		return histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, s), nem("start", 2*s, value), nem("stop", 2*s, value)}
	}
	kept := vanish(`{"fault":"client-vanish","process":1,"kept_until":"` + setting + `"}`)
	starved := func(err string) []histories.FinalCycle {
		return []histories.FinalCycle{{Slot: 1, Reply: "ok"}, {Slot: 2, Reply: histories.FinalNoWorker, Error: err}}
	}
	const mariadb = "worker slot 2: 5 workers in a row failed to start; last: init: info: (conn=9) Too many connections (see w2.log)"
	cases := []struct {
		name   string
		h      histories.History
		finals []histories.FinalCycle
		want   bool
	}{
		{"MariaDB's words", kept, starved(mariadb), true},
		{"PostgreSQL's words", kept, starved("init: info: FATAL: sorry, too many clients already (SQLSTATE 53300)"), true},
		{"Redis's words", kept, starved("init: info: ERR max number of clients reached"), true},
		{"another start error", kept, starved("init: info: connection refused"), false},
		{"no client vanished", vanish(`{"fault":"client-kill","process":1}`), starved(mariadb), false},
		{"vanished where nothing is kept", vanish(`{"fault":"client-vanish","process":1}`), starved(mariadb), false},
		{"every slot started", kept, []histories.FinalCycle{{Slot: 1, Reply: "ok"}, {Slot: 2, Reply: "fail", Error: "timeout"}}, false},
	}
	for _, c := range cases {
		f, ok := ClassifyStarved(c.h, c.finals)
		switch {
		case ok != c.want:
			t.Errorf("%s: classed %v (%+v), want %v", c.name, ok, f, c.want)
		case ok && (f.Class != Configuration || !strings.Contains(f.Fix, setting) || !strings.Contains(f.Why, "slot 2")):
			t.Errorf("%s: %+v, want configuration naming slot 2 and the setting", c.name, f)
		}
	}
	h := load(t, "spring-jdbc-mariadb-vanished-pools.jsonl")
	var v histories.Liveness
	for _, op := range h {
		if op.F == histories.FLiveness {
			if err := json.Unmarshal(op.Value, &v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if f, ok := ClassifyStarved(h, v.Finals); !ok || f.Class != Configuration || !strings.Contains(f.Why, "Too many connections") {
		t.Errorf("the recorded run: %+v (found %v), want configuration, too many connections", f, ok)
	}
}

// TestClassifyTokens: a token no greater than an earlier grant's is the server's loss
// when a restart, a failover or the kill of an instance that forgets was in force
// between the grants, the clock's when a clock jump was, and the recipe's otherwise
// (a fault outside the two grants does not excuse it).
func TestClassifyTokens(t *testing.T) {
	earlier, later := acq(1, histories.OK, 2*s), acq(2, histories.OK, 6*s)
	cases := []struct {
		name  string
		fault string
		start int64
		want  Class
	}{
		{"no fault", "", 0, RecipeBug},
		{"failover begun before the earlier grant, over after", `{"fault":"failover"}`, s, ServerLost},
		{"restart", `{"fault":"restart","forgetting":["s1"]}`, 3 * s, ServerLost},
		{"restart of nothing that forgets", `{"fault":"restart","forgetting":[]}`, 3 * s, RecipeBug},
		{"kill of an instance that forgets", `{"fault":"kill","forgetting":["s1"]}`, 3 * s, ServerLost},
		{"kill of a ZooKeeper server", `{"fault":"kill"}`, 3 * s, RecipeBug},
		{"clock jump", `{"fault":"clock-jump","delta_ms":4000}`, 3 * s, Clock},
		{"restart after both grants", `{"fault":"restart"}`, 7 * s, RecipeBug},
	}
	for _, c := range cases {
		h := histories.History{acq(1, histories.Invoke, s), earlier, acq(2, histories.Invoke, 5*s), later}
		if c.fault != "" {
			h = append(h, nem("start", c.start, c.fault), nem("stop", c.start+2*s, c.fault))
		}
		if f := ClassifyTokens(h, earlier, later); f.Class != c.want || f.Holder != 1 || f.Next != 2 || f.Why == "" {
			t.Errorf("%s: %+v, want %s", c.name, f, c.want)
		}
	}
}

// TestCrashMidReleaseEndsEveryLevel: a re-entrant holder two levels deep whose worker
// crashed as it released (a release invoke completed as info) holds nothing from that
// invoke on: a grant after it is no overlap.
func TestCrashMidReleaseEndsEveryLevel(t *testing.T) {
	h := histories.History{acq(1, histories.Invoke, 0), acq(1, histories.OK, s), acq(1, histories.Invoke, s), acq(1, histories.OK, s),
		rel(1, histories.Invoke, 3*s, false),
		acq(2, histories.Invoke, 2*s), acq(2, histories.OK, 3*s+1),
		histories.Op{Type: histories.Info, F: histories.FRelease, Process: histories.Client(1), Time: 3*s + 2, Key: "l0", Error: "worker exited"}}
	if f, ok := Classify(h, "l0", params); ok {
		t.Errorf("a grant after the crashed holder's release: classed %+v", f)
	}
}
