package harness

import (
	"fmt"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestClassifyChildren: the final phase's listing tells a node nobody waits on (an
// orphan) from the node a worker waits with, and the lowest such node (whose owner
// should hold the lock) as a missed wake-up.
func TestClassifyChildren(t *testing.T) {
	child := func(node, owner string, process int, alive bool) ChildInfo {
		return ChildInfo{Node: node, EphemeralOwner: owner, Process: process, SessionAlive: alive}
	}
	states := map[int]workloads.State{1: workloads.Acquiring, 2: workloads.Acquiring, 3: workloads.Thinking, 4: workloads.Holding, 5: workloads.Acquiring}
	view := func(p int) workerView { // Between: no current worker
		v := workerView{state: states[p]}
		if p == 5 {
			v.unknownRelease = "the release of process 4 that ended unknown at 3.7s (unlock: zk: connection closed)"
		}
		return v
	}
	type label struct{ orphan, missed bool }
	for _, tc := range []struct {
		name     string
		children []ChildInfo
		queues   bool
		want     []label
	}{
		{"the lowest node's owner waits: a missed wake-up, the waiter behind it is no orphan",
			[]ChildInfo{child("n1", "0x1", 1, true), child("n2", "0x2", 2, true)}, true,
			[]label{{missed: true}, {}}},
		{"not a queue behind the lowest: the waiters' nodes are just waiting",
			[]ChildInfo{child("n1", "0x1", 1, true), child("n2", "0x2", 2, true)}, false,
			[]label{{}, {}}},
		{"an idle worker's node blocks its waiter: an orphan",
			[]ChildInfo{child("n1", "0x3", 3, true), child("n2", "0x1", 1, true)}, true,
			[]label{{orphan: true}, {}}},
		{"a waiter's older node is an orphan, its newer one waits",
			[]ChildInfo{child("n1", "0x1", 1, true), child("n5", "0x1", 1, true)}, true,
			[]label{{orphan: true}, {}}},
		{"a holder's node is fine, its older node is an orphan",
			[]ChildInfo{child("n1", "0x4", 4, true), child("n3", "0x4", 4, true)}, true,
			[]label{{orphan: true}, {}}},
		{"an acquiring worker whose latest release ended unknown: its only node is that release's orphan, no missed wake-up",
			[]ChildInfo{child("n1", "0x5", 5, true), child("n2", "0x1", 1, true)}, true,
			[]label{{orphan: true}, {}}},
		{"no current worker, an unknown session, a persistent node, an expired session",
			[]ChildInfo{child("n1", "0x9", 9, true), child("n2", "0x8", -1, true), child("n3", lockservice.PersistentOwner, -1, false), child("n4", "0x7", 1, false)}, true,
			[]label{{orphan: true}, {orphan: true}, {orphan: true}, {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := classifyChildren(append([]ChildInfo(nil), tc.children...), view, tc.queues)
			for i, c := range got {
				if (label{c.Orphan, c.MissedWakeup}) != tc.want[i] {
					t.Errorf("%s: orphan %v, missed wake-up %v (%s); want %+v", c.Node, c.Orphan, c.MissedWakeup, c.Note, tc.want[i])
				}
				if (c.Orphan || c.MissedWakeup) && c.Note == "" {
					t.Errorf("%s: labelled without a note", c.Node)
				}
			}
			if tc.want[0].missed && got[0].Note != fmt.Sprintf("the lowest node: worker process %d waits for the lock with it and was never granted, a missed wake-up (the recipe did not notice its node became the lowest)", got[0].Process) {
				t.Errorf("missed wake-up note: %s", got[0].Note)
			}
		})
	}
}
