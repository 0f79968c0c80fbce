package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
)

// TestOrphanTracker: the proof needs the same orphan, in the same situation, at every
// observation for the whole span; anything else starts it over.
func TestOrphanTracker(t *testing.T) {
	idle := func(node string, spell int64) *blockingOrphan {
		return &blockingOrphan{Node: node, Owner: "0x1", Process: 2, idleSpell: spell}
	}
	waiting := func(node, newer string) *blockingOrphan {
		return &blockingOrphan{Node: node, Owner: "0x1", Process: 2, Newer: newer}
	}
	own := func(node string) *blockingOrphan {
		return &blockingOrphan{Node: node, Owner: "0x1", Process: 2, Waiting: true}
	}
	start := time.Unix(1000, 0)
	for _, tc := range []struct {
		name string
		obs  []*blockingOrphan
		// want is the index of the first observation that proves, -1 for none.
		want int
	}{
		{"idle all along", []*blockingOrphan{idle("n1", 1), idle("n1", 1), idle("n1", 1), idle("n1", 1), idle("n1", 1)}, 4},
		{"waits behind its own node", []*blockingOrphan{waiting("n1", "n5"), waiting("n1", "n6"), waiting("n1", "n7"), waiting("n1", "n7"), waiting("n1", "n7")}, 4},
		{"a gap in the observations", []*blockingOrphan{idle("n1", 1), idle("n1", 1), nil, idle("n1", 1), idle("n1", 1), idle("n1", 1)}, -1},
		{"thought twice (its acquire in between could have cleaned up)", []*blockingOrphan{idle("n1", 1), idle("n1", 1), idle("n1", 2), idle("n1", 2), idle("n1", 2)}, -1},
		{"another node became the lowest", []*blockingOrphan{idle("n1", 1), idle("n1", 1), idle("n2", 1), idle("n2", 1), idle("n2", 1)}, -1},
		{"from idle to waiting", []*blockingOrphan{idle("n1", 1), idle("n1", 1), waiting("n1", "n4"), waiting("n1", "n4"), waiting("n1", "n4")}, -1},
		{"another session", []*blockingOrphan{idle("n1", 1), idle("n1", 1), {Node: "n1", Owner: "0x2", Process: 3, idleSpell: 1}, idle("n1", 1), idle("n1", 1)}, -1},
		// A missed wake-up: the worker's own waiting node, the lowest all along.
		{"its own waiting node", []*blockingOrphan{own("n1"), own("n1"), own("n1"), own("n1"), own("n1")}, 4},
		{"its own waiting node, then a newer one behind it", []*blockingOrphan{own("n1"), own("n1"), waiting("n1", "n4"), waiting("n1", "n4"), waiting("n1", "n4")}, -1},
		{"its own waiting node, then another's", []*blockingOrphan{own("n1"), own("n1"), own("n2"), own("n2"), own("n2")}, -1},
		// During the workload any orphan will do, but not a gap.
		{"any orphan: changing", []*blockingOrphan{idle("n1", 1), waiting("n2", "n5"), waiting("n3", "n6"), idle("n4", 3), idle("n4", 3)}, 4},
		{"any orphan: a gap", []*blockingOrphan{idle("n1", 1), waiting("n2", "n5"), nil, idle("n4", 3), idle("n4", 3)}, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := orphanTracker{after: 4 * time.Second, anyOrphan: strings.HasPrefix(tc.name, "any orphan")}
			got := -1
			for i, o := range tc.obs {
				if _, proven := tr.observe(o, start.Add(time.Duration(i)*time.Second)); proven && got < 0 {
					got = i
				}
			}
			if got != tc.want {
				t.Fatalf("proven at observation %d, want %d", got, tc.want)
			}
		})
	}
}

// TestQuietWaitsForTheKindsSettle: a waiting lowest node counts as a missed wake-up
// only once faults have been quiet for the session timeout or, on etcd, for the
// requests a deposed leader dropped to be answered (kind.Kind.Settle); the final
// bound grows by the same.
func TestQuietWaitsForTheKindsSettle(t *testing.T) {
	for _, c := range []struct {
		service    kind.Name
		session    time.Duration
		quiet, add time.Duration
	}{
		{kind.ZooKeeper, 2 * time.Second, 2 * time.Second, 0},
		{kind.Redis, 3 * time.Second, 3 * time.Second, 0},
		{kind.Etcd, 2 * time.Second, 7 * time.Second, 7 * time.Second},
		{kind.Etcd, 10 * time.Second, 10 * time.Second, 7 * time.Second},
	} {
		cfg := Config{Service: c.service, SessionTimeout: c.session, Workers: 1}
		r := &runner{cfg: cfg}
		if got := r.quiet(); got != c.quiet {
			t.Errorf("%s, session timeout %s: quiet %s, want %s", c.service, c.session, got, c.quiet)
		}
		base := cfg
		base.Service = kind.Postgres
		if got := cfg.FinalBound() - base.FinalBound(); got != c.add {
			t.Errorf("%s: final bound %s more than a kind without Settle, want %s", c.service, got, c.add)
		}
	}
}

// TestOrphanLeftByAnUnknownRelease: an orphan whose worker's latest release ended
// unknown is described as that release's node, not as a missed wake-up, and its record
// says so.
func TestOrphanLeftByAnUnknownRelease(t *testing.T) {
	left := "the release of process 4 that ended unknown at 3.7s (unlock: zk: connection closed)"
	o := blockingOrphan{Node: "lock-0047", Owner: "0x8", Process: 5, LeftBy: left}
	got := o.describe(2 * time.Second)
	for _, want := range []string{"left there, most likely, by " + left, "kept its session", "stayed so for 2s"} {
		if !strings.Contains(got, want) {
			t.Errorf("describe: %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "missed wake-up") {
		t.Errorf("describe calls it a missed wake-up: %q", got)
	}
	if r := o.record(); r.MissedWakeup || r.LeftBy != left {
		t.Errorf("record %+v", r)
	}
	if o.same(blockingOrphan{Node: "lock-0047", Owner: "0x8", Process: 5}) {
		t.Error("the same node without the unknown release counts as the same situation")
	}
}
