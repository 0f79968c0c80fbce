package nemesis

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
)

// Shape is the form of a network partition between servers (Jepsen's vocabulary).
type Shape string

// Partition shapes.
const (
	// Halves cuts the servers, in id order, into two halves: the first n/2 servers
	// and the rest (the majority when n is odd).
	Halves Shape = "halves"
	// RandomHalves cuts randomly chosen halves.
	RandomHalves Shape = "random-halves"
	// IsolateOne cuts one random server off from all others.
	IsolateOne Shape = "isolate-one"
	// IsolateLeader cuts the leader off from all others.
	IsolateLeader Shape = "isolate-leader"
	// MajoritiesRing gives every server a view of a majority (itself included), no
	// two servers the same majority: the servers sit on a random ring and each sees
	// the window of majority(n) ring neighbours around it. The grudge is not
	// symmetric for every n (for three servers it is a directed ring).
	MajoritiesRing Shape = "majorities-ring"
	// Bridge cuts random halves apart except for one server of the larger half that
	// sees both; each half plus the bridge is a majority (for odd n).
	Bridge Shape = "bridge"
	// IsolateFollowerQuorum cuts one server other than the leader (a follower or an
	// observer) off from its peer servers but not from its clients: it keeps
	// answering them (until syncLimit runs out) while the leader, which no longer
	// hears their pings, expires their sessions.
	IsolateFollowerQuorum Shape = "isolate-follower-quorum"
)

// Shapes lists every partition shape.
func Shapes() []Shape {
	return []Shape{Halves, RandomHalves, IsolateOne, IsolateLeader, MajoritiesRing, Bridge, IsolateFollowerQuorum}
}

// Grudge computes a partition: for every server id, the ids whose packets it drops
// (sorted; empty when it drops none). It is a pure function of its arguments and of
// rng's state. leader (a server id, or 0 when unknown) is needed by IsolateLeader and
// IsolateFollowerQuorum only (with leader 0, IsolateFollowerQuorum cuts off any
// server). Every shape needs at least two servers; MajoritiesRing and Bridge need three.
func Grudge(shape Shape, servers []int, leader int, rng *rand.Rand) (map[int][]int, error) {
	ids := append([]int(nil), servers...)
	sort.Ints(ids)
	if len(ids) < 2 {
		return nil, fmt.Errorf("partition %s: needs at least 2 servers, have %d", shape, len(ids))
	}
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			return nil, fmt.Errorf("partition %s: server %d listed twice", shape, ids[i])
		}
	}
	shuffled := func() []int {
		s := append([]int(nil), ids...)
		rng.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		return s
	}
	switch shape {
	case Halves:
		return complete(ids, ids[:len(ids)/2], ids[len(ids)/2:]), nil
	case RandomHalves:
		s := shuffled()
		return complete(ids, s[:len(s)/2], s[len(s)/2:]), nil
	case IsolateOne:
		one := ids[rng.IntN(len(ids))]
		return complete(ids, []int{one}, without(ids, one)), nil
	case IsolateLeader:
		if !slices.Contains(ids, leader) {
			return nil, fmt.Errorf("partition %s: leader %d is not one of the servers %v", shape, leader, ids)
		}
		return complete(ids, []int{leader}, without(ids, leader)), nil
	case IsolateFollowerQuorum:
		followers := without(ids, leader)
		f := followers[rng.IntN(len(followers))]
		return complete(ids, []int{f}, without(ids, f)), nil
	case MajoritiesRing, Bridge:
		if len(ids) < 3 {
			return nil, fmt.Errorf("partition %s: needs at least 3 servers, have %d", shape, len(ids))
		}
		if shape == MajoritiesRing {
			return majoritiesRing(ids, shuffled()), nil
		}
		s := shuffled()
		a, b := s[:len(s)/2], s[len(s)/2:]
		return complete(ids, a, b[1:]), nil
	default:
		return nil, fmt.Errorf("unknown partition shape %q (valid: %v)", shape, Shapes())
	}
}

// complete makes a and b drop each other's packets; everyone else drops nothing.
func complete(all, a, b []int) map[int][]int {
	g := make(map[int][]int, len(all))
	for _, id := range all {
		g[id] = []int{}
	}
	for _, x := range a {
		g[x] = append(g[x], b...)
	}
	for _, y := range b {
		g[y] = append(g[y], a...)
	}
	for id := range g {
		sort.Ints(g[id])
	}
	return g
}

// majoritiesRing lets the server at ring position i see positions
// i-(m-1)/2 .. i+m/2 (m = majority): a window of m that contains it. Windows starting
// at different positions differ when m < n, so no two servers see the same majority.
func majoritiesRing(ids, ring []int) map[int][]int {
	n, m := len(ring), majority(len(ring))
	g := make(map[int][]int, n)
	for i, id := range ring {
		sees := map[int]bool{}
		for k := -(m - 1) / 2; k <= m/2; k++ {
			sees[ring[((i+k)%n+n)%n]] = true
		}
		drops := []int{}
		for _, other := range ids {
			if !sees[other] {
				drops = append(drops, other)
			}
		}
		g[id] = drops
	}
	return g
}

func without(ids []int, x int) []int {
	out := make([]int, 0, len(ids))
	for _, id := range ids {
		if id != x {
			out = append(out, id)
		}
	}
	return out
}

// grudgeValue renders a grudge for an event: {"s1":["s2","s3"],...}.
func grudgeValue(g map[int][]int) map[string][]string {
	out := make(map[string][]string, len(g))
	for id, drops := range g {
		out[serverName(id)] = serverNames(drops)
	}
	return out
}
