package coverage

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/zlockcheck/zlockcheck/histories"
)

// hb builds a history by hand; times are in milliseconds.
type hb struct{ h histories.History }

func (b *hb) op(p int, typ histories.Type, f string, ms int64) *histories.Op {
	b.h = append(b.h, histories.Op{Index: int64(len(b.h)), Type: typ, F: f, Process: histories.Client(p), Time: ms * 1e6, Key: "l"})
	return &b.h[len(b.h)-1]
}

// call appends an invoke at from and its completion (typ) at to.
func (b *hb) call(p int, f string, from int64, typ histories.Type, to int64) {
	b.op(p, histories.Invoke, f, from)
	b.op(p, typ, f, to)
}

// cycle appends an acquire granted at ok and released at rel (both 1 ms long).
func (b *hb) cycle(p int, ok, rel int64) {
	b.call(p, "acquire", ok-1, histories.OK, ok)
	b.call(p, "release", rel, histories.OK, rel+1)
}

func (b *hb) nemesis(f string, ms int64, value string) {
	b.h = append(b.h, histories.Op{Index: int64(len(b.h)), Type: histories.Info, F: f, Process: histories.NemesisProcess, Time: ms * 1e6, Value: json.RawMessage(value)})
}

// clientFault starts a client fault of class aimed at process p.
func (b *hb) clientFault(class string, p int, ms int64) {
	b.nemesis("start", ms, fmt.Sprintf(`{"fault":%q,"target":"random","picked":"random","process":%d}`, class, p))
	b.nemesis("stop", ms+1, fmt.Sprintf(`{"fault":%q,"process":%d}`, class, p))
}

func TestRows(t *testing.T) {
	cases := []struct {
		name string
		opt  Options
		hist func(b *hb)
		// want lists the rows above 0 (every other row must be 0); by, the splits.
		want      map[string]int
		by        map[string]map[string]int
		exercised bool
	}{
		{name: "empty history", hist: func(*hb) {}},
		{name: "one uncontended cycle", exercised: true, hist: func(b *hb) { b.cycle(0, 1, 5) }},
		{name: "a timeout behind a holder", exercised: true, hist: func(b *hb) {
			b.cycle(0, 1, 10)
			b.call(1, "acquire", 2, histories.Fail, 5)
		}, want: map[string]int{RowTimedOutQueued: 1, RowContention: 1, RowEdge: 1}, by: map[string]map[string]int{RowEdge: {edgeAtGiveUp: 1}}},
		{name: "a timeout behind an earlier waiter, nobody holding", hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.Fail, 10)
			b.call(1, "acquire", 1, histories.Fail, 5)
		}, want: map[string]int{RowTimedOutQueued: 1, RowEdge: 1}, by: map[string]map[string]int{RowEdge: {edgeAtGiveUp: 1}}},
		{name: "a timeout with nobody ahead is not queued", hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.Fail, 10)
		}},
		{name: "a waiter whose predecessor gave up", exercised: true, hist: func(b *hb) {
			b.cycle(0, 1, 20)
			b.call(1, "acquire", 2, histories.Fail, 5)
			b.call(2, "acquire", 3, histories.OK, 21)
		}, want: map[string]int{RowTimedOutQueued: 1, RowPredecessorGone: 1, RowContention: 2, RowEdge: 1}, by: map[string]map[string]int{RowEdge: {edgeAtInvoke: 1}}},
		{name: "a later waiter giving up is no predecessor", exercised: true, hist: func(b *hb) {
			b.cycle(0, 1, 20)
			b.call(2, "acquire", 2, histories.OK, 21)
			b.call(1, "acquire", 3, histories.Fail, 5)
		}, want: map[string]int{RowTimedOutQueued: 1, RowContention: 2}},
		{name: "an acquire ended unknown", hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.Info, 1)
		}, want: map[string]int{RowAcquireInfo: 1}},
		{name: "a release ended unknown, then another granted", exercised: true, hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.OK, 1)
			b.call(0, "release", 2, histories.Info, 3)
			b.call(1, "acquire", 4, histories.OK, 5)
		}, want: map[string]int{RowReleaseInfo: 1, RowGrantAfterLoss: 1}, by: map[string]map[string]int{RowGrantAfterLoss: {"info": 1}}},
		{name: "a lost lock, the waiter granted", exercised: true, hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.OK, 1)
			b.call(1, "acquire", 2, histories.OK, 11)
			b.op(0, histories.Invoke, "release", 10).Lost = true
			b.op(0, histories.OK, "release", 10).Lost = true
		}, want: map[string]int{RowLost: 1, RowGrantAfterLoss: 1, RowContention: 1}, by: map[string]map[string]int{RowGrantAfterLoss: {"lost": 1}}},
		{name: "client faults by their target's state", exercised: true, hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.OK, 1) // 0 holds from 1
			b.call(1, "acquire", 2, histories.Fail, 30)
			b.call(2, "acquire", 3, histories.Info, 4)
			b.clientFault("client-pause", 0, 10)
			b.clientFault("reply-loss", 1, 11)
			b.clientFault("reply-loss", 3, 12) // 3 has no op yet: idle
			b.call(0, "release", 20, histories.OK, 40)
			b.clientFault("session-expire", 0, 25)
			b.clientFault("client-kill", 0, 50) // after its last op: idle
			// A partition of 2 that lands while it holds and lasts past the
			// release it sends: holding, and releasing too (its delete may be the
			// one lost).
			b.call(2, "acquire", 60, histories.OK, 61)
			b.nemesis("start", 62, `{"fault":"client-partition","target":"holder","picked":"holder","process":2}`)
			b.call(2, "release", 70, histories.Info, 75)
			b.nemesis("stop", 80, `{"fault":"client-partition","process":2}`)
			// A partition of 1 that lands while it holds, during which it reports
			// lost: holding only (a lost event sends no release).
			b.call(1, "acquire", 90, histories.OK, 91)
			b.nemesis("start", 92, `{"fault":"client-partition","target":"holder","picked":"holder","process":1}`)
			b.op(1, histories.Invoke, "release", 95).Lost = true
			b.op(1, histories.OK, "release", 95).Lost = true
			b.nemesis("stop", 100, `{"fault":"client-partition","process":1}`)
		}, want: map[string]int{RowFaultHolding: 3, RowFaultAcquiring: 1, RowFaultReleasing: 2, RowFaultIdle: 2, RowReleaseInfo: 1,
			RowTimedOutQueued: 1, RowAcquireInfo: 1, RowContention: 2, RowEdge: 1, RowLost: 1, RowGrantAfterLoss: 1},
			by: map[string]map[string]int{RowEdge: {edgeAtGiveUp: 1}, RowGrantAfterLoss: {"info": 1}, RowFaultHolding: {"client-pause": 1, "client-partition": 2}, RowFaultAcquiring: {"reply-loss": 1},
				RowFaultReleasing: {"session-expire": 1, "client-partition": 1}, RowFaultIdle: {"reply-loss": 1, "client-kill": 1}}},
		{name: "server faults: one under a holder, one not, one never applied", exercised: true, hist: func(b *hb) {
			b.cycle(0, 1, 10)
			b.nemesis("start", 5, `{"fault":"kill","servers":["s1"],"target":"leader"}`)
			b.nemesis("stop", 20, `{"fault":"kill","servers":["s1"],"target":"leader"}`)
			b.nemesis("start", 30, `{"fault":"partition","target":"one"}`)
			b.nemesis("start", 6, `{"fault":"pause","error":"no leader"}`)
			b.nemesis("stall", 7, `{"since_grant_ns":1}`)
		}, want: map[string]int{RowServerFaultHeld: 1}, by: map[string]map[string]int{RowServerFaultHeld: {"kill": 1}}},
		{name: "server faults under a holder: an observer cut off counts apart", exercised: true, hist: func(b *hb) {
			b.cycle(0, 1, 30)
			b.nemesis("start", 5, `{"fault":"partition","shape":"isolate-follower-quorum","cut_off":"s4","cut_off_role":"observer"}`)
			b.nemesis("start", 10, `{"fault":"partition","shape":"isolate-follower-quorum","cut_off":"s2","cut_off_role":"follower"}`)
		}, want: map[string]int{RowServerFaultHeld: 2}, by: map[string]map[string]int{RowServerFaultHeld: {"partition of an observer": 1, "partition": 1}}},
		{name: "a hold longer than the default session timeout", exercised: true, hist: func(b *hb) {
			b.cycle(0, 1, 5000)
		}, want: map[string]int{RowLongHold: 1}},
		{name: "the same hold under a longer session timeout", exercised: true, opt: Options{SessionTimeout: 10 * time.Second}, hist: func(b *hb) {
			b.cycle(0, 1, 5000)
		}},
		{name: "a hold never released counts to the end of the history", exercised: true, hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.OK, 1)
			b.call(1, "acquire", 2, histories.Fail, 4500)
		}, want: map[string]int{RowLongHold: 1, RowTimedOutQueued: 1, RowContention: 1}},
		{name: "reentrant: a nested acquire", exercised: true, opt: Options{Kind: "reentrant"}, hist: func(b *hb) {
			b.call(0, "acquire", 0, histories.OK, 1)
			b.call(0, "acquire", 2, histories.OK, 3)
			b.call(0, "release", 4, histories.OK, 5)
			b.call(0, "release", 6, histories.OK, 7)
		}, want: map[string]int{RowNested: 1}},
		{name: "reentrant: no nesting", exercised: true, opt: Options{Kind: "reentrant"}, hist: func(b *hb) { b.cycle(0, 1, 5) }},
		{name: "semaphore: two permits filled", exercised: true, opt: Options{Kind: "semaphore", Permits: 2}, hist: func(b *hb) {
			b.cycle(0, 1, 10)
			b.cycle(1, 5, 20)
		}, want: map[string]int{RowSemaphoreFull: 1, RowContention: 1}},
		{name: "semaphore: never full", exercised: true, opt: Options{Kind: "semaphore", Permits: 2}, hist: func(b *hb) {
			b.cycle(0, 1, 10)
			b.cycle(1, 15, 20)
		}},
		{name: "rwlock: two readers together", exercised: true, opt: Options{Kind: "rwlock"}, hist: func(b *hb) {
			b.op(0, histories.Invoke, "acquire", 0).Mode = "read"
			b.op(0, histories.OK, "acquire", 1).Mode = "read"
			b.op(1, histories.Invoke, "acquire", 2).Mode = "read"
			b.op(1, histories.OK, "acquire", 3).Mode = "read"
			b.call(0, "release", 4, histories.OK, 5)
			b.call(1, "release", 6, histories.OK, 7)
		}, want: map[string]int{RowReadersTogether: 1, RowContention: 1, RowEdge: 1}, by: map[string]map[string]int{RowEdge: {edgeAtInvoke: 1}}},
		{name: "rwlock: a reader after a writer", exercised: true, opt: Options{Kind: "rwlock"}, hist: func(b *hb) {
			b.cycle(0, 1, 10)
			b.op(1, histories.Invoke, "acquire", 11).Mode = "read"
			b.op(1, histories.OK, "acquire", 12).Mode = "read"
		}, want: map[string]int{RowEdge: 1}, by: map[string]map[string]int{RowEdge: {edgeAtInvoke: 1}}},
		// The narrow races' moments (RowEdge): the predecessor, the latest-invoked
		// acquire of another process still queued, leaves within 5 ms of the waiter's
		// invoke or give-up; a holder further ahead, or a predecessor leaving later,
		// does not count.
		{name: "edge: the holder releases as a waiter queues behind it", exercised: true, hist: func(b *hb) {
			b.cycle(0, 10, 100)
			b.call(1, "acquire", 97, histories.OK, 102)
		}, want: map[string]int{RowEdge: 1, RowContention: 1}, by: map[string]map[string]int{RowEdge: {edgeAtInvoke: 1}}},
		{name: "edge: the holder releases 10 ms after a waiter queued", exercised: true, hist: func(b *hb) {
			b.cycle(0, 10, 100)
			b.call(1, "acquire", 90, histories.OK, 102)
		}, want: map[string]int{RowContention: 1}},
		{name: "edge: the holder releases as a waiter behind another queues", exercised: true, hist: func(b *hb) {
			b.cycle(0, 10, 100)
			b.call(2, "acquire", 50, histories.OK, 102)
			b.call(1, "acquire", 98, histories.OK, 200)
		}, want: map[string]int{RowContention: 2}},
		{name: "edge: the predecessor leaves just after a waiter gives up", exercised: true, hist: func(b *hb) {
			b.cycle(0, 10, 100)
			b.call(1, "acquire", 20, histories.Fail, 97)
		}, want: map[string]int{RowEdge: 1, RowTimedOutQueued: 1, RowContention: 1}, by: map[string]map[string]int{RowEdge: {edgeAtGiveUp: 1}}},
		{name: "edge: the predecessor leaves 20 ms after a waiter gave up", exercised: true, hist: func(b *hb) {
			b.cycle(0, 10, 100)
			b.call(1, "acquire", 20, histories.Fail, 80)
		}, want: map[string]int{RowTimedOutQueued: 1, RowContention: 1}},
		{name: "orphans from the watch and the final listing", exercised: true, hist: func(b *hb) {
			b.cycle(0, 1, 5)
			b.nemesis("orphan", 6, `{"node":"n1"}`)
			b.nemesis("liveness", 7, `{"ok":false,"children":[{"node":"a","orphan":true},{"node":"b","orphan":false},{"node":"c","orphan":true}]}`)
		}, want: map[string]int{RowOrphans: 3}, by: map[string]map[string]int{RowOrphans: {orphanByWatch: 1, orphanByFinalListed: 2}}},
		{name: "a counter write exercises the data", exercised: true, hist: func(b *hb) {
			b.call(0, "write", 0, histories.OK, 1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var b hb
			tc.hist(&b)
			table := Compute(b.h, tc.opt)
			if table.Exercised != tc.exercised {
				t.Errorf("Exercised = %v, want %v", table.Exercised, tc.exercised)
			}
			for _, r := range table.Rows {
				if r.Count != tc.want[r.ID] {
					t.Errorf("row %s: count %d, want %d", r.ID, r.Count, tc.want[r.ID])
				}
				if want := tc.by[r.ID]; fmt.Sprint(r.By) != fmt.Sprint(want) && (len(want) > 0 || len(r.By) > 0) {
					t.Errorf("row %s: by %v, want %v", r.ID, r.By, want)
				}
				flagged := r.Count == 0 && r.ID != RowOrphans
				if (r.NotExercised != "") != flagged || (flagged && !strings.HasPrefix(r.NotExercised, "not exercised: the run could not have found ")) {
					t.Errorf("row %s (count %d): NotExercised %q", r.ID, r.Count, r.NotExercised)
				}
			}
			for id := range tc.want {
				if _, ok := table.Row(id); !ok {
					t.Errorf("no row %s", id)
				}
			}
		})
	}
}

func TestKindRows(t *testing.T) {
	kindRows := []string{RowNested, RowSemaphoreFull, RowReadersTogether}
	for kind, want := range map[string]string{"mutex": "", "reentrant": RowNested, "semaphore": RowSemaphoreFull, "rwlock": RowReadersTogether} {
		table := Compute(nil, Options{Kind: kind})
		for _, id := range kindRows {
			if _, ok := table.Row(id); ok != (id == want) {
				t.Errorf("kind %s: has row %s = %v", kind, id, ok)
			}
		}
	}
}

func TestSum(t *testing.T) {
	var a, b hb
	a.cycle(0, 1, 10)
	a.call(1, "acquire", 2, histories.Fail, 5)
	a.clientFault("client-pause", 0, 3)
	b.cycle(0, 1, 10)
	b.call(1, "acquire", 2, histories.OK, 11)
	b.call(2, "acquire", 3, histories.OK, 12)
	b.clientFault("reply-loss", 0, 4)
	ta, tb := Compute(a.h, Options{}), Compute(b.h, Options{})
	sum := Sum(ta, tb, Compute(nil, Options{}))
	if !sum.Exercised || sum.Grants != ta.Grants+tb.Grants || len(sum.Rows) != len(ta.Rows) {
		t.Fatalf("sum: exercised %v, %d grants, %d rows", sum.Exercised, sum.Grants, len(sum.Rows))
	}
	for id, want := range map[string]int{RowTimedOutQueued: 1, RowFaultHolding: 2, RowContention: 2, RowLost: 0} {
		r, _ := sum.Row(id)
		if r.Count != want || (r.NotExercised != "") != (want == 0) {
			t.Errorf("row %s: %d (%q), want %d", id, r.Count, r.NotExercised, want)
		}
	}
	if r, _ := sum.Row(RowFaultHolding); r.By["client-pause"] != 1 || r.By["reply-loss"] != 1 {
		t.Errorf("split %v", r.By)
	}
	if r, _ := ta.Row(RowFaultHolding); len(r.By) != 1 {
		t.Errorf("Sum changed its input: %v", r.By)
	}
	if Sum().Exercised {
		t.Error("the sum of nothing exercised something")
	}
}

func TestSessionTimeoutInSituation(t *testing.T) {
	r, _ := Compute(nil, Options{SessionTimeout: 2 * time.Second}).Row(RowLongHold)
	if !strings.Contains(r.Situation, "(2s)") {
		t.Errorf("situation %q does not name the session timeout", r.Situation)
	}
}

func TestWriteText(t *testing.T) {
	var b hb
	b.cycle(0, 1, 10)
	b.call(1, "acquire", 2, histories.Fail, 5)
	var out strings.Builder
	if err := WriteText(&out, Compute(b.h, Options{})); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"coverage: what the run exercised", "1  acquires that timed out while queued", "not exercised: the run could not have found a zombie holder"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	_ = WriteText(&out, Compute(nil, Options{}))
	if !strings.Contains(out.String(), NothingExercised) {
		t.Errorf("an empty history's table does not say it exercised nothing:\n%s", out.String())
	}
	out.Reset()
	_ = WriteText(&out, Table{})
	if out.Len() != 0 {
		t.Errorf("a table without rows printed %q", out.String())
	}
}

// genHistory draws a well-formed history: processes doing lock cycles with every
// outcome, and (when faults) nemesis faults aimed at them or at servers.
func genHistory(t *rapid.T, faults bool) histories.History {
	var b hb
	procs := rapid.IntRange(1, 4).Draw(t, "procs")
	next := make([]int64, procs) // each process's next free moment
	id := make([]int, procs)     // its current process id (a new one after an info)
	for i := range id {
		id[i] = i
	}
	nextID := procs
	outcomes := []histories.Type{histories.OK, histories.OK, histories.Fail, histories.Info}
	for range rapid.IntRange(0, 30).Draw(t, "steps") {
		if faults && rapid.IntRange(0, 4).Draw(t, "fault?") == 0 {
			at := rapid.Int64Range(0, 200).Draw(t, "fault at")
			if rapid.Bool().Draw(t, "client fault") {
				b.clientFault(rapid.SampledFrom([]string{"client-pause", "reply-loss", "session-expire"}).Draw(t, "class"), rapid.IntRange(0, nextID).Draw(t, "target"), at)
			} else {
				b.nemesis("start", at, `{"fault":"kill","servers":["s1"]}`)
			}
			continue
		}
		w := rapid.IntRange(0, procs-1).Draw(t, "worker")
		from := next[w] + rapid.Int64Range(0, 5).Draw(t, "think")
		out := rapid.SampledFrom(outcomes).Draw(t, "acquire")
		mid := from + rapid.Int64Range(0, 20).Draw(t, "wait")
		b.call(id[w], "acquire", from, out, mid)
		next[w] = mid
		if out == histories.OK {
			rel := mid + rapid.Int64Range(0, 20).Draw(t, "hold")
			lost := rapid.IntRange(0, 5).Draw(t, "lost?") == 0
			b.op(id[w], histories.Invoke, "release", rel).Lost = lost
			out = rapid.SampledFrom(outcomes).Draw(t, "release")
			if lost {
				out = histories.OK
			}
			b.op(id[w], out, "release", rel+1).Lost = lost
			next[w] = rel + 1
		}
		if out == histories.Info {
			id[w], nextID = nextID, nextID+1
		}
	}
	return b.h
}

func TestPropertyCounts(t *testing.T) {
	faultRows := []string{RowFaultHolding, RowFaultAcquiring, RowFaultReleasing, RowFaultIdle, RowServerFaultHeld}
	rapid.Check(t, func(t *rapid.T) {
		faults := rapid.Bool().Draw(t, "faults")
		h := genHistory(t, faults)
		if err := histories.Validate(h); err != nil {
			t.Fatalf("the generator made a bad history: %v", err)
		}
		kind := rapid.SampledFrom([]string{"mutex", "reentrant", "semaphore", "rwlock"}).Draw(t, "kind")
		table := Compute(h, Options{Kind: kind, Permits: 2})
		for _, r := range table.Rows {
			if r.Count < 0 || r.Count > len(h) {
				t.Fatalf("row %s: count %d of a %d-op history", r.ID, r.Count, len(h))
			}
			sum := 0
			for _, n := range r.By {
				sum += n
			}
			if r.By != nil && sum != r.Count {
				t.Fatalf("row %s: split %v does not add up to %d", r.ID, r.By, r.Count)
			}
		}
		if !faults {
			for _, id := range faultRows {
				if r, _ := table.Row(id); r.Count != 0 {
					t.Fatalf("row %s: %d in a history without faults", id, r.Count)
				}
			}
		}
		if table.Exercised != (table.Grants > 0) {
			t.Fatalf("Exercised %v with %d grants", table.Exercised, table.Grants)
		}
	})
}

// TestRedisNotApplicable: on Redis the rows of ZooKeeper's queue (a waiter timed out
// while queued, a predecessor gone) are not applicable even when the history has what
// would count for them on ZooKeeper: no count, not flagged not exercised, shown as
// such; the orphan row speaks of keys. Summed with a ZooKeeper table, they apply.
func TestRedisNotApplicable(t *testing.T) {
	var b hb
	b.op(0, histories.Invoke, "acquire", 0)
	b.call(1, "acquire", 1, histories.OK, 2)
	b.call(2, "acquire", 3, histories.Fail, 50)
	b.op(0, histories.OK, "acquire", 60)
	zk := Compute(b.h, Options{})
	redis := Compute(b.h, Options{NoQueue: true})
	if r, _ := zk.Row(RowTimedOutQueued); r.Count == 0 || r.NotApplicable != "" {
		t.Fatalf("ZooKeeper row %s: %+v, want a count (the history must exercise it)", RowTimedOutQueued, r)
	}
	for _, id := range []string{RowTimedOutQueued, RowPredecessorGone, RowEdge} {
		r, ok := redis.Row(id)
		if !ok || r.Count != 0 || r.By != nil || r.NotExercised != "" || !strings.HasPrefix(r.NotApplicable, "not applicable: ") {
			t.Errorf("Redis row %s: %+v, want not applicable", id, r)
		}
	}
	if got, want := redis.ApplicableCount(), len(redis.Rows)-3; got != want {
		t.Errorf("ApplicableCount() = %d, want %d", got, want)
	}
	if r, _ := redis.Row(RowOrphans); !strings.Contains(r.Situation, "key") {
		t.Errorf("Redis orphan row: %q, want keys", r.Situation)
	}
	pg := Compute(b.h, Options{NoQueue: true})
	if r, _ := pg.Row(RowPredecessorGone); r.NotApplicable == "" {
		t.Errorf("a database lock's predecessor row: %+v, want not applicable", r)
	}
	var out strings.Builder
	if err := WriteText(&out, redis); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), ", 3 not applicable)") || !strings.Contains(out.String(), "       -  waiters whose predecessor gave up") {
		t.Errorf("WriteText:\n%s", out.String())
	}
	if r, _ := Sum(redis, zk).Row(RowTimedOutQueued); r.NotApplicable != "" || r.Count == 0 {
		t.Errorf("summed with a ZooKeeper table, row %s: %+v, want it to apply", RowTimedOutQueued, r)
	}
	if r, _ := Sum(redis, redis).Row(RowPredecessorGone); r.NotApplicable == "" {
		t.Errorf("two Redis tables summed: row %s applies", RowPredecessorGone)
	}
}

// TestEdgeFlaggedWhenNeverReached: a history whose waiters never had a predecessor
// leave at their invoke or give-up says the narrow races were not exercised; one that
// did, does not.
func TestEdgeFlaggedWhenNeverReached(t *testing.T) {
	var never, reached hb
	never.cycle(0, 10, 100)
	never.call(1, "acquire", 50, histories.OK, 102)
	reached.cycle(0, 10, 100)
	reached.call(1, "acquire", 98, histories.OK, 102)
	if r, _ := Compute(never.h, Options{}).Row(RowEdge); r.Count != 0 || !strings.Contains(r.NotExercised, "narrow fault-free races") {
		t.Errorf("never reached: %+v, want 0 and flagged", r)
	}
	if r, _ := Compute(reached.h, Options{}).Row(RowEdge); r.Count != 1 || r.NotExercised != "" {
		t.Errorf("reached: %+v, want 1 and not flagged", r)
	}
}
