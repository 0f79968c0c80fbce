package redis

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// clusterState is the cluster as one instance sees it: which of s2 and s5 (the
// primary of the watched slot and its replica) serves the middle third of the
// slots, in which epoch, and the instances it flags ("s2:fail?", "s5:fail").
type clusterState struct {
	owner string
	epoch int64
	flags []string
}

// on is a clusterState: owner serves the watched slot in epoch, flags as listed.
func on(owner string, epoch int64, flags ...string) clusterState {
	return clusterState{owner: owner, epoch: epoch, flags: flags}
}

// addrOf is instance name's ("s2") client address in the hand-written views.
func addrOf(name string) string { return "10.0.0." + strings.TrimPrefix(name, "s") + ":6379" }

// answerOf is instance self's CLUSTER NODES when it sees st: s1 and s3 serve the
// first and last thirds in epochs 1 and 3, s4 and s6 their replicas; st.owner the
// middle third, the other of s2 and s5 its replica.
func answerOf(self string, st clusterState) clusterAnswer {
	other := map[string]string{"s2": "s5", "s5": "s2"}[st.owner]
	lines := []struct {
		name, role, primary string
		epoch               int64
		slots               []slotRange
	}{
		{"s1", "master", "", 1, []slotRange{{0, 5460}}},
		{st.owner, "master", "", st.epoch, []slotRange{{5461, 10921}}},
		{"s3", "master", "", 3, []slotRange{{10922, 16383}}},
		{"s4", "slave", "s1", 1, nil},
		{other, "slave", st.owner, st.epoch, nil},
		{"s6", "slave", "s3", 3, nil},
	}
	var nodes []clusterNode
	for _, l := range lines {
		flags := []string{l.role}
		if l.name == self {
			flags = append([]string{"myself"}, flags...)
		}
		for _, f := range st.flags {
			if name, flag, _ := strings.Cut(f, ":"); name == l.name {
				flags = append(flags, flag)
			}
		}
		n := clusterNode{id: "id-" + l.name, addr: addrOf(l.name), flags: flags, epoch: l.epoch, connected: true, slots: l.slots}
		if l.primary != "" {
			n.primary = "id-" + l.primary
		}
		nodes = append(nodes, n)
	}
	return clusterAnswer{addr: addrOf(self), nodes: nodes}
}

// TestClusterWatchTurnsViewsIntoFailovers feeds the cluster's watch what six
// instances say of the slot s2 serves (s5 its replica) through failovers, a
// failover given up, a primary cut off from the others, an old primary restarted
// with its old slots, and faults that leave the slot alone, and checks the records
// it makes (no server: the views are written by hand). A replica flagged fail?, or
// another primary's failure, records nothing: the watch looks at the slot's primary
// only.
func TestClusterWatchTurnsViewsIntoFailovers(t *testing.T) {
	all := []string{"s1", "s2", "s3", "s4", "s5", "s6"}
	from := func(self string, st clusterState) []clusterAnswer { return []clusterAnswer{answerOf(self, st)} }
	down := func(self string) []clusterAnswer {
		return []clusterAnswer{{addr: addrOf(self), err: errors.New("connection refused")}}
	}
	// every is what each of names says, in turn.
	every := func(st clusterState, names ...string) []clusterAnswer {
		var out []clusterAnswer
		for _, n := range names {
			out = append(out, answerOf(n, st))
		}
		return out
	}
	settledOn := func(owner string, epoch int64) []clusterAnswer { return every(on(owner, epoch), all...) }
	seq := func(parts ...[]clusterAnswer) []clusterAnswer {
		var out []clusterAnswer
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	except := func(skip string) []string {
		var out []string
		for _, n := range all {
			if n != skip {
				out = append(out, n)
			}
		}
		return out
	}
	for _, tc := range []struct {
		name string
		cold bool // no settled views first
		in   []clusterAnswer
		want string
	}{
		{"a settled cluster", false, settledOn("s2", 2), ""},
		{"a replica flagged fail? for a moment, its primary unaffected", false,
			seq(from("s1", on("s2", 2, "s5:fail?")), from("s3", on("s2", 2, "s5:fail?")), down("s5"), settledOn("s2", 2)), ""},
		{"another primary's failure", false,
			seq(down("s1"), every(on("s2", 2, "s1:fail?"), "s2", "s3"), every(on("s2", 2, "s1:fail"), "s2", "s3", "s4", "s5", "s6")), ""},
		{"an instance that does not answer is no view", false, seq(down("s6"), down("s4"), every(on("s2", 2), "s1", "s2", "s3", "s5")), ""},
		{"the primary killed, its replica promoted", false,
			seq(down("s2"), from("s1", on("s2", 2, "s2:fail?")), from("s5", on("s2", 2, "s2:fail")), from("s5", on("s5", 7, "s2:fail")),
				every(on("s5", 7, "s2:fail"), "s1", "s3", "s4", "s6")),
			"start s2 | stop s2 -> s5 [s5]"},
		{"a view that has not heard of the promotion keeps the failover in force", false,
			seq(down("s2"), from("s5", on("s5", 7, "s2:fail")), every(on("s5", 7, "s2:fail"), "s1", "s3", "s6"), from("s4", on("s2", 2, "s2:fail")),
				from("s4", on("s2", 2, "s2:fail")), from("s4", on("s5", 7, "s2:fail"))),
			"start s2 | stop s2 -> s5 [s5]"},
		{"the primary flagged fail? by one view, then by none: given up", false,
			seq(from("s1", on("s2", 2, "s2:fail?")), from("s1", on("s2", 2))),
			"start s2 | stop s2 aborted"},
		{"the primary restarted before the cluster acted: given up", false,
			seq(down("s2"), from("s2", on("s2", 2))),
			"start s2 | stop s2 aborted"},
		{"a newer epoch for the same primary: given up", false,
			seq(from("s1", on("s2", 8)), every(on("s2", 8), all...)),
			"start s2 | stop s2 aborted"},
		{"the minority primary: cut off, it claims the slot in its own view until it hears", false,
			seq(from("s1", on("s2", 2, "s2:fail?")), from("s2", on("s2", 2, "s1:fail?", "s3:fail?", "s5:fail?")),
				from("s5", on("s5", 7, "s2:fail")), every(on("s5", 7, "s2:fail"), except("s2")...), from("s2", on("s2", 2, "s1:fail", "s3:fail")),
				from("s2", on("s5", 7)), every(on("s5", 7), except("s2")...)),
			"start s2 | stop s2 -> s5 [s2 s5]"},
		{"the old primary restarted with its old slots, beside the promoted one until it hears", false,
			seq(down("s2"), from("s5", on("s5", 7, "s2:fail")), every(on("s5", 7, "s2:fail"), except("s2")...),
				from("s2", on("s2", 2)), every(on("s5", 7), except("s2")...), from("s2", on("s5", 7))),
			"start s2 | stop s2 -> s5 [s5] | start s5 | stop s5 [s2 s5]"},
		{"two failovers in a row, back to s2", false,
			seq(down("s2"), every(on("s5", 7, "s2:fail"), except("s2")...), settledOn("s5", 7),
				down("s5"), from("s2", on("s2", 9, "s5:fail")), every(on("s2", 9, "s5:fail"), except("s5")...)),
			"start s2 | stop s2 -> s5 [s5] | start s5 | stop s5 -> s2 [s2]"},
		{"nothing before the slot is settled once", true,
			seq(from("s1", on("s2", 2, "s2:fail?")), down("s2"), every(on("s2", 2), all...), from("s3", on("s2", 2, "s2:fail?")), settledOn("s2", 2)),
			"start s2 | stop s2 aborted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names := map[string]string{}
			for _, n := range all {
				names[addrOf(n)] = n
			}
			w := newClusterWatch(names, "none", 6000)
			in := tc.in
			if !tc.cold {
				in = append(settledOn("s2", 2), in...)
			}
			var got []string
			for _, a := range in {
				for _, f := range w.view(a) {
					if f.By != "cluster" || f.Persistence != "none" {
						t.Errorf("record %+v: want by cluster, persistence none", f)
					}
					got = append(got, describe(f))
				}
			}
			if s := strings.Join(got, " | "); s != tc.want {
				t.Errorf("records\n %s\nwant\n %s", s, tc.want)
			}
		})
	}
}

// TestReadSlot: one instance's CLUSTER NODES, as Redis prints it, read for a slot:
// the primary it names and its epoch, the instances it flags, whether it claims the
// slot itself (its own line's address taken to be the one it was asked at).
func TestReadSlot(t *testing.T) {
	const text = `07c3 10.0.0.2:6379@16379 master,fail - 1 1 2 disconnected
a1b2 10.0.0.5:6379@16379 myself,master - 0 0 7 connected 5461-10921
c3d4 10.0.0.1:6379@16379 master - 0 1 1 connected 0-5460
e5f6 10.0.0.4:6379@16379 slave,fail? c3d4 0 1 1 connected
`
	nodes, err := parseClusterNodes(text)
	if err != nil {
		t.Fatal(err)
	}
	v := readSlot(clusterAnswer{addr: "10.0.0.5:6379", nodes: nodes}, 6000)
	if got := fmt.Sprintf("%s %d %v %v %v", v.owner, v.epoch, v.failing, v.master, v.claims); got != "10.0.0.5:6379 7 [10.0.0.2:6379 10.0.0.4:6379] true true" {
		t.Errorf("slot 6000: %s", got)
	}
	v = readSlot(clusterAnswer{addr: "10.0.0.5:6379", nodes: nodes}, 100)
	if got := fmt.Sprintf("%s %d %v %v", v.owner, v.epoch, v.master, v.claims); got != "10.0.0.1:6379 1 true false" {
		t.Errorf("slot 100: %s", got)
	}
}

// TestEveryTopologyThatFailsOverItselfIsWatched: a topology whose servers fail over
// on their own (FailsOverItself, which explore reads) has a watch that records
// their failovers, and only such a topology has one.
func TestEveryTopologyThatFailsOverItselfIsWatched(t *testing.T) {
	for _, topology := range []RedisTopology{RedisSingle, RedisReplicas, RedisRedlock, RedisSentinel, RedisCluster} {
		r := &Redis{cfg: RedisConfig{RedisSettings: RedisSettings{Topology: topology}}}
		if self, watched := r.Settings().FailsOverItself(), r.failoverWatch() != nil; self != watched {
			t.Errorf("topology %s: fails over itself %v, watched %v", topology, self, watched)
		}
	}
}
