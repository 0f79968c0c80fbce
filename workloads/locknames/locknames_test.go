package locknames

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/internal/redisopt"
)

// TestClusterRedLockKeys: the keys hold the path, and their slots are their tags'
// whatever the path (a brace in it included): lock1 and lock4 on the third of three
// primaries that split the slots evenly, lock2 on the second; the first key shares
// its primary with the third, and none with the second.
func TestClusterRedLockKeys(t *testing.T) {
	// The i-th of three primaries serves slots i*16384/3 to (i+1)*16384/3-1.
	primary := func(slot int) int {
		i := 0
		for slot >= (i+1)*redisopt.SlotCount/3 {
			i++
		}
		return i
	}
	wantSlots := []int{11346, 7217, 15607}
	for _, path := range []string{"/zlc/abc123/l0", "/zlc/ffffff/l0", "/a{b}c"} {
		keys := ClusterRedLockKeys(path)
		if len(keys) != 3 {
			t.Fatalf("ClusterRedLockKeys(%q) = %q, want 3 keys", path, keys)
		}
		for i, k := range keys {
			if !strings.HasSuffix(k, path) || redisopt.KeySlot(k) != wantSlots[i] {
				t.Errorf("key %d %q: slot %d, want %d and the path %q in it", i, k, redisopt.KeySlot(k), wantSlots[i], path)
			}
		}
		p := []int{primary(redisopt.KeySlot(keys[0])), primary(redisopt.KeySlot(keys[1])), primary(redisopt.KeySlot(keys[2]))}
		if p[0] != 2 || p[2] != 2 || p[1] != 1 {
			t.Errorf("%q: primaries (from 0) %v, want [2 1 2]", path, p)
		}
	}
	// Redisson's own names would have spread over the three primaries.
	if a, b, c := primary(redisopt.KeySlot("{lock1}")), primary(redisopt.KeySlot("{lock2}")), primary(redisopt.KeySlot("{lock3}")); a == b || b == c || a == c {
		t.Errorf("lock1, lock2, lock3 on primaries %d, %d, %d: want three", a, b, c)
	}
}
