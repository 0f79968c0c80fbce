package lockservice

import (
	"slices"
	"testing"

	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestLockKeysAndOwners: a lock's Redis keys are its path's and each place's, once;
// a value a place wrote is owned by that place's session, any other by the session
// it names itself (this project's "<session>:<random>").
func TestLockKeysAndOwners(t *testing.T) {
	l := Lock{Path: "/zlc/r/l0", Places: []workloads.LockPlace{
		{Session: "0x2a", Keys: []string{"app:/zlc/r/l0"}, Value: "tok1"},
		{Session: "0x2b", Keys: []string{"app:/zlc/r/l0"}, Value: "tok2"},
		{Advisory: []int64{7}},
	}}
	if got, want := l.Keys(), []string{"/zlc/r/l0", "app:/zlc/r/l0"}; !slices.Equal(got, want) {
		t.Errorf("Keys = %v, want %v", got, want)
	}
	cases := []struct{ key, value, want string }{
		{"app:/zlc/r/l0", "tok2", "0x2b"},
		{"app:/zlc/r/l0", "tok1", "0x2a"},
		{"/zlc/r/l0", "tok1", "tok1"}, // a place's value on another key: not that place's
		{"/zlc/r/l0", "0x1f:abc", "0x1f"},
		{"app:/zlc/r/l0", "stranger", "stranger"},
	}
	for _, c := range cases {
		if got := l.OwnerOfValue(c.key, c.value); got != c.want {
			t.Errorf("OwnerOfValue(%q, %q) = %q, want %q", c.key, c.value, got, c.want)
		}
	}
	if got := PathLock("/p").Keys(); !slices.Equal(got, []string{"/p"}) {
		t.Errorf("PathLock's keys = %v", got)
	}
}

// TestUnreadTables: a table a reader does not read is named once; its own is not.
func TestUnreadTables(t *testing.T) {
	l := Lock{Path: "/p", Places: []workloads.LockPlace{
		{Table: "app.locks", Row: "/p"}, {Table: "zlc_locks", Row: "/p"}, {Table: "app.locks", Row: "/p"}, {Keys: []string{"/p"}},
	}}
	if got, want := UnreadTables(l, "zlc_locks"), []string{"table app.locks"}; !slices.Equal(got, want) {
		t.Errorf("UnreadTables = %v, want %v", got, want)
	}
	if got := UnreadTables(l); len(got) != 2 {
		t.Errorf("with nothing readable: %v, want both tables", got)
	}
}
