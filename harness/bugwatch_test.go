package harness

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/histories"
	"github.com/zlockcheck/zlockcheck/models/cause"
	"github.com/zlockcheck/zlockcheck/nemesis"
)

// writerLag is how far behind the run the file the recipe-bug watch reads may be
// (histories' syncEvery).
const writerLag = 500 * time.Millisecond

// replayBugWatch plays recorded history h back to the recipe-bug watch as a run
// would have shown it, a look a quarter second: at each moment t, the ops recorded
// up to writerLag before it, and the holders the nemesis made blind by then. It
// returns the first moment the watch would have ended the run, and what for.
func replayBugWatch(h histories.History, p cause.Params) (int64, cause.Finding, bool) {
	end := h[len(h)-1].Time
	for _, op := range h {
		end = max(end, op.Time)
	}
	step := (250 * time.Millisecond).Nanoseconds()
	for t := step; t <= end+settleAfter(p).Nanoseconds(); t += step {
		var seen histories.History
		for _, op := range h {
			if op.Time <= t-writerLag.Nanoseconds() {
				seen = append(seen, op)
			}
		}
		if f, ok := settledBug(seen, p, t, blindAt(h, p, t)); ok {
			return t, f, true
		}
	}
	return 0, cause.Finding{}, false
}

// blindAt says which processes were blind within the flush margin before t by h's
// nemesis ops, as noteBlind would have kept them: from a blind fault's start to a
// session timeout and a second after its stop.
func blindAt(h histories.History, p cause.Params, t int64) func(int) bool {
	until := map[int]int64{}
	for _, op := range h {
		if !op.Process.Nemesis || op.Time > t || op.F != histories.FStart && op.F != histories.FStop {
			continue
		}
		var v struct {
			Fault   string `json:"fault"`
			Process *int   `json:"process"`
			Error   string `json:"error"`
		}
		if json.Unmarshal(op.Value, &v) != nil || v.Process == nil || !blindFaults[nemesis.Class(v.Fault)] || v.Error != "" && op.F == histories.FStart {
			continue
		}
		until[*v.Process] = math.MaxInt64
		if op.F == histories.FStop {
			until[*v.Process] = op.Time + p.LostBound().Nanoseconds()
		}
	}
	return func(process int) bool { return t-flushMargin.Nanoseconds() < until[process] }
}

// TestTheRecipeBugWatchOnRecordedRuns: played back as their runs would have shown
// them, the recorded recipe bugs end the run once settled, no sooner than the
// settle time after the next holder's grant and with the class the whole history
// gets; the recorded honest overlaps (a server's loss, a clock jump, failovers, a
// paused holder) never end it, at any moment.
func TestTheRecipeBugWatchOnRecordedRuns(t *testing.T) {
	redis := cause.Params{SessionTimeout: 2 * time.Second, Lease: true}
	zk := cause.Params{SessionTimeout: 4 * time.Second, Tick: 200 * time.Millisecond, SyncLimit: 5}
	for _, tc := range []struct {
		file string
		p    cause.Params
		bug  bool
	}{
		{"mutant-redis-blind-extend-renewed.jsonl", redis, true},
		{"mutant-redis-extend-recreates-clock-jump.jsonl", redis, true},
		{"mutant-redis-ignore-validity-cut-off.jsonl", redis, true},
		{"mutant-redlock-no-elapsed-check-expiry-race.jsonl", redis, true},
		{"redisson-lock-watchdog-restart.jsonl", redis, true},
		{"redis-lock-restart-none.jsonl", redis, false},
		{"redis-lock-failover.jsonl", redis, false},
		{"redis-lock-clock-jump.jsonl", redis, false},
		{"redislock-sentinel-minority-primary.jsonl", redis, false},
		{"redislock-sentinel-kills-two-primaries.jsonl", redis, false},
		{"redislock-cluster-minority-primary.jsonl", redis, false},
		{"redis-lock-sentinel-split-renewals.jsonl", redis, false},
		{"gozk-client-pause-overlap.jsonl", zk, false},
	} {
		h, _, err := histories.Load("../testdata/histories/" + tc.file)
		if err != nil {
			t.Fatal(err)
		}
		at, f, ended := replayBugWatch(h, tc.p)
		whole, _ := cause.Classify(h, "l0", tc.p)
		switch {
		case ended != tc.bug:
			t.Errorf("%s: the watch ended the run: %v (at %.2fs: %+v), want %v", tc.file, ended, float64(at)/1e9, f, tc.bug)
		case !ended:
		case whole.Class != cause.RecipeBug:
			t.Errorf("%s: the watch ended the run for a recipe bug; the whole history says %s", tc.file, whole.Class)
		case at-f.At < settleAfter(tc.p).Nanoseconds():
			t.Errorf("%s: ended at %.2fs, %.2fs after the grant at %.2fs: before the overlap settled", tc.file, float64(at)/1e9, float64(at-f.At)/1e9, float64(f.At)/1e9)
		default:
			t.Logf("%s: ended at %.2fs (the grant at %.2fs; the history ends at %.2fs)", tc.file, float64(at)/1e9, float64(f.At)/1e9, float64(h[len(h)-1].Time)/1e9)
		}
	}
}

// pausedHolder is a run in which process 0 holds the lock, is paused from 2 s to
// 5 s, process 1 is granted at 4 s, and process 0 reports lost at lostAt (ns; 0:
// never), as a test's own history (not recorded from a run).
func pausedHolder(lostAt int64) histories.History {
	const s = int64(time.Second)
	pause := `{"fault":"client-pause","process":0,"target":"holder"}`
	h := histories.History{
		{Type: histories.Invoke, F: histories.FAcquire, Process: histories.Client(0), Time: s / 2, Key: "l0"},
		{Type: histories.OK, F: histories.FAcquire, Process: histories.Client(0), Time: s, Key: "l0"},
		{Type: histories.Info, F: histories.FStart, Process: histories.NemesisProcess, Time: 2 * s, Value: json.RawMessage(pause)},
		{Type: histories.Invoke, F: histories.FAcquire, Process: histories.Client(1), Time: 3 * s, Key: "l0"},
		{Type: histories.OK, F: histories.FAcquire, Process: histories.Client(1), Time: 4 * s, Key: "l0"},
		{Type: histories.Info, F: histories.FStop, Process: histories.NemesisProcess, Time: 5 * s, Value: json.RawMessage(pause)},
	}
	if lostAt > 0 {
		h = append(h,
			histories.Op{Type: histories.Invoke, F: histories.FRelease, Process: histories.Client(0), Time: lostAt, Key: "l0", Lost: true},
			histories.Op{Type: histories.OK, F: histories.FRelease, Process: histories.Client(0), Time: lostAt, Key: "l0", Lost: true})
	}
	h = append(h, histories.Op{Type: histories.Invoke, F: histories.FRelease, Process: histories.Client(1), Time: 12 * s, Key: "l0"},
		histories.Op{Type: histories.OK, F: histories.FRelease, Process: histories.Client(1), Time: 12 * s, Key: "l0"})
	for i := range h {
		h[i].Index = int64(i)
	}
	return h
}

// TestTheRecipeBugWatchWaitsForTheHolder: a paused holder that reports lost 3 s
// after its pause (at the edge of the LostBound) is an honest overlap, and the watch
// never ends the run for it, though until its report the history alone reads as a
// holder going on; one that never reports is a recipe bug, and the watch ends the
// run once the pause's LostBound has run out. Without the blindness or the settle
// time, the first would end the run.
func TestTheRecipeBugWatchWaitsForTheHolder(t *testing.T) {
	p := cause.Params{SessionTimeout: 2 * time.Second, Lease: true}
	if at, f, ended := replayBugWatch(pausedHolder(int64(8*time.Second)), p); ended {
		t.Errorf("a holder that reported lost in time: the watch ended the run at %.2fs for %+v", float64(at)/1e9, f)
	}
	at, f, ended := replayBugWatch(pausedHolder(0), p)
	if !ended || f.Holder != 0 || f.Next != 1 || at < int64(8*time.Second) {
		t.Errorf("a holder that never reported: ended %v at %.2fs for %+v, want the overlap of 0 and 1 once 0's pause was 3 s behind it (8 s)", ended, float64(at)/1e9, f)
	}
	h := pausedHolder(int64(8 * time.Second))
	if f, ok := settledBug(h[:6], p, int64(8500*time.Millisecond), func(int) bool { return false }); !ok {
		t.Errorf("the same history before the holder's report, with no one blind: %+v (found %v), want a recipe bug: the watch's blindness is what waits", f, ok)
	}
}

// BenchmarkRecipeBugLook is one look of the recipe-bug watch at a recorded 30 s
// Sentinel run with its overlaps (4,579 ops, more than a 20 s round has): the history
// read from its file, then the cause rule on it.
func BenchmarkRecipeBugLook(b *testing.B) {
	const file = "../testdata/histories/redislock-sentinel-minority-primary.jsonl"
	p := cause.Params{SessionTimeout: 2 * time.Second, Lease: true}
	never := func(int) bool { return false }
	for b.Loop() {
		h, _, err := histories.Load(file)
		if err != nil {
			b.Fatal(err)
		}
		settledBug(h, p, math.MaxInt64, never)
	}
}
