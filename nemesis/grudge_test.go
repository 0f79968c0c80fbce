package nemesis

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// genServers draws 3, 5 or 7 distinct server ids (not necessarily 1..n), in random
// order.
func genServers(t *rapid.T) []int {
	n := rapid.SampledFrom([]int{3, 5, 7}).Draw(t, "n")
	first := rapid.IntRange(1, 4).Draw(t, "first")
	gap := rapid.IntRange(1, 3).Draw(t, "gap")
	ids := make([]int, n)
	for i := range ids {
		ids[i] = first + i*gap
	}
	return rapid.Permutation(ids).Draw(t, "ids")
}

func genRNG(t *rapid.T) *rand.Rand {
	return rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed1"), rapid.Uint64().Draw(t, "seed2")))
}

// sees reports whether a accepts packets from b.
func sees(g map[int][]int, a, b int) bool { return !slices.Contains(g[a], b) }

// talk reports whether a and b can hold a TCP connection: neither drops the other.
func talk(g map[int][]int, a, b int) bool { return sees(g, a, b) && sees(g, b, a) }

// checkWellFormed: one entry per server, sorted, no self-grudge, only known servers.
func checkWellFormed(t *rapid.T, g map[int][]int, ids []int) {
	if len(g) != len(ids) {
		t.Fatalf("grudge has %d entries for %d servers: %v", len(g), len(ids), g)
	}
	for _, id := range ids {
		drops, ok := g[id]
		if !ok {
			t.Fatalf("no entry for server %d: %v", id, g)
		}
		if !sort.IntsAreSorted(drops) {
			t.Fatalf("server %d drops unsorted %v", id, drops)
		}
		for i, d := range drops {
			if d == id {
				t.Fatalf("server %d drops itself", id)
			}
			if !slices.Contains(ids, d) {
				t.Fatalf("server %d drops unknown %d", id, d)
			}
			if i > 0 && drops[i-1] == d {
				t.Fatalf("server %d drops %d twice", id, d)
			}
		}
	}
}

func checkSymmetric(t *rapid.T, g map[int][]int, ids []int) {
	for _, a := range ids {
		for _, b := range ids {
			if sees(g, a, b) != sees(g, b, a) {
				t.Fatalf("asymmetric: %d sees %d: %v, %d sees %d: %v (%v)", a, b, sees(g, a, b), b, a, sees(g, b, a), g)
			}
		}
	}
}

// checkTwoSides: the servers split into exactly a and b (a ∪ b = all), everyone talks
// within its side and nobody across.
func checkTwoSides(t *rapid.T, g map[int][]int, a, b []int) {
	for _, x := range a {
		for _, y := range a {
			if !talk(g, x, y) {
				t.Fatalf("%d and %d on the same side cannot talk: %v", x, y, g)
			}
		}
		for _, y := range b {
			if talk(g, x, y) || sees(g, x, y) || sees(g, y, x) {
				t.Fatalf("%d and %d on different sides still see each other: %v", x, y, g)
			}
		}
	}
}

// sides finds the connected components of the talk relation.
func sides(g map[int][]int, ids []int) [][]int {
	seen := map[int]bool{}
	var out [][]int
	sorted := slices.Sorted(slices.Values(ids))
	for _, id := range sorted {
		if seen[id] {
			continue
		}
		var comp []int
		stack := []int{id}
		seen[id] = true
		for len(stack) > 0 {
			x := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			comp = append(comp, x)
			for _, y := range sorted {
				if !seen[y] && talk(g, x, y) {
					seen[y] = true
					stack = append(stack, y)
				}
			}
		}
		sort.Ints(comp)
		out = append(out, comp)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) })
	return out
}

// checkMinorityMajority: two sides, one a majority, the other a minority.
func checkMinorityMajority(t *rapid.T, g map[int][]int, ids []int) (minority, majoritySide []int) {
	s := sides(g, ids)
	if len(s) != 2 {
		t.Fatalf("want 2 sides, got %v (%v)", s, g)
	}
	checkTwoSides(t, g, s[0], s[1])
	if len(s[1]) < majority(len(ids)) || len(s[0]) >= majority(len(ids)) {
		t.Fatalf("sides %v: want a minority and a majority of %d", s, len(ids))
	}
	return s[0], s[1]
}

func TestGrudgeHalves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := genServers(t)
		g, err := Grudge(Halves, ids, 0, genRNG(t))
		if err != nil {
			t.Fatal(err)
		}
		checkWellFormed(t, g, ids)
		checkSymmetric(t, g, ids)
		sorted := slices.Sorted(slices.Values(ids))
		checkTwoSides(t, g, sorted[:len(ids)/2], sorted[len(ids)/2:])
		checkMinorityMajority(t, g, ids)
	})
}

func TestGrudgeRandomHalves(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := genServers(t)
		g, err := Grudge(RandomHalves, ids, 0, genRNG(t))
		if err != nil {
			t.Fatal(err)
		}
		checkWellFormed(t, g, ids)
		checkSymmetric(t, g, ids)
		minority, _ := checkMinorityMajority(t, g, ids)
		if len(minority) != len(ids)/2 {
			t.Fatalf("halves: minority side %v, want %d servers", minority, len(ids)/2)
		}
	})
}

func TestGrudgeIsolateOneAndLeader(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := genServers(t)
		leader := rapid.SampledFrom(ids).Draw(t, "leader")
		for _, shape := range []Shape{IsolateOne, IsolateLeader, IsolateFollowerQuorum} {
			g, err := Grudge(shape, ids, leader, genRNG(t))
			if err != nil {
				t.Fatal(err)
			}
			checkWellFormed(t, g, ids)
			checkSymmetric(t, g, ids)
			minority, _ := checkMinorityMajority(t, g, ids)
			if len(minority) != 1 {
				t.Fatalf("%s: isolated %v, want one server", shape, minority)
			}
			switch shape {
			case IsolateLeader:
				if minority[0] != leader {
					t.Fatalf("isolate-leader isolated %d, leader is %d", minority[0], leader)
				}
			case IsolateFollowerQuorum:
				if minority[0] == leader {
					t.Fatalf("isolate-follower-quorum isolated the leader %d", leader)
				}
			}
		}
	})
}

func TestGrudgeMajoritiesRing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := genServers(t)
		g, err := Grudge(MajoritiesRing, ids, 0, genRNG(t))
		if err != nil {
			t.Fatal(err)
		}
		checkWellFormed(t, g, ids)
		m := majority(len(ids))
		views := map[string]int{}
		for _, a := range ids {
			var view []int
			for _, b := range ids {
				if sees(g, a, b) {
					view = append(view, b)
				}
			}
			if len(view) != m {
				t.Fatalf("server %d sees %v: want exactly a majority (%d) of %d (%v)", a, view, m, len(ids), g)
			}
			if !slices.Contains(view, a) {
				t.Fatalf("server %d does not see itself", a)
			}
			key := fmt.Sprint(view)
			if other, dup := views[key]; dup {
				t.Fatalf("servers %d and %d see the same majority %v", other, a, view)
			}
			views[key] = a
		}
		// Nobody is cut off from everyone, and nobody sees everyone.
		for _, a := range ids {
			if len(g[a]) == 0 || len(g[a]) == len(ids)-1 {
				t.Fatalf("server %d drops %v", a, g[a])
			}
		}
		if len(ids) == 5 {
			checkSymmetric(t, g, ids) // a window of 3 centred on each node
		}
	})
}

func TestGrudgeBridge(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := genServers(t)
		g, err := Grudge(Bridge, ids, 0, genRNG(t))
		if err != nil {
			t.Fatal(err)
		}
		checkWellFormed(t, g, ids)
		checkSymmetric(t, g, ids)
		var bridges []int
		for _, id := range ids {
			if len(g[id]) == 0 {
				bridges = append(bridges, id)
			}
		}
		if len(bridges) != 1 {
			t.Fatalf("want exactly one bridge (a server that drops nothing), got %v (%v)", bridges, g)
		}
		bridge := bridges[0]
		rest := without(ids, bridge)
		s := sides(g, rest)
		if len(s) != 2 {
			t.Fatalf("without the bridge want 2 sides, got %v (%v)", s, g)
		}
		checkTwoSides(t, g, s[0], s[1])
		for _, side := range s {
			if len(side)+1 < majority(len(ids)) {
				t.Fatalf("side %v plus bridge %d is not a majority of %d", side, bridge, len(ids))
			}
			for _, x := range side {
				if !talk(g, x, bridge) {
					t.Fatalf("%d cannot talk to the bridge %d", x, bridge)
				}
			}
		}
	})
}

func TestGrudgeDeterministic(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		ids := genServers(t)
		shape := rapid.SampledFrom(Shapes()).Draw(t, "shape")
		leader := rapid.SampledFrom(ids).Draw(t, "leader")
		s1, s2 := rapid.Uint64().Draw(t, "s1"), rapid.Uint64().Draw(t, "s2")
		a, err := Grudge(shape, ids, leader, rand.New(rand.NewPCG(s1, s2)))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := Grudge(shape, ids, leader, rand.New(rand.NewPCG(s1, s2)))
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("same seed, different grudges: %v vs %v", a, b)
		}
	})
}

func TestGrudgeErrors(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		shape  Shape
		ids    []int
		leader int
		want   string
	}{
		{Halves, []int{1}, 0, "at least 2"},
		{MajoritiesRing, []int{1, 2}, 0, "at least 3"},
		{Bridge, []int{1, 2}, 0, "at least 3"},
		{IsolateLeader, []int{1, 2, 3}, 0, "leader 0"},
		{IsolateLeader, []int{1, 2, 3}, 7, "leader 7"},
		{Halves, []int{1, 2, 2}, 0, "twice"},
		{"zigzag", []int{1, 2, 3}, 1, "unknown partition shape"},
	} {
		_, err := Grudge(tc.shape, tc.ids, tc.leader, rng)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Grudge(%s, %v, %d) = %v, want error containing %q", tc.shape, tc.ids, tc.leader, err, tc.want)
		}
	}
}

func TestGrudgeValue(t *testing.T) {
	g := map[int][]int{1: {2, 3}, 2: {1}, 3: {1}}
	want := map[string][]string{"s1": {"s2", "s3"}, "s2": {"s1"}, "s3": {"s1"}}
	if got := grudgeValue(g); !reflect.DeepEqual(got, want) {
		t.Fatalf("grudgeValue = %v, want %v", got, want)
	}
}
