package nemesis

import "testing"

// TestPortSet: the client-port faults match ZooKeeper's port by default, a service's
// own (Redis's 6379) when its servers say so, and a set when they differ.
func TestPortSet(t *testing.T) {
	for _, tc := range []struct {
		ss   []Server
		want string
	}{
		{[]Server{{ID: 1}, {ID: 2}}, "2181"},
		{[]Server{{ID: 1, ClientPort: 6379}, {ID: 2, ClientPort: 6379}}, "6379"},
		{[]Server{{ID: 1, ClientPort: 6379}, {ID: 2}}, "{ 6379, 2181 }"},
	} {
		if got := portSet(tc.ss); got != tc.want {
			t.Errorf("portSet(%v) = %q, want %q", tc.ss, got, tc.want)
		}
	}
}
