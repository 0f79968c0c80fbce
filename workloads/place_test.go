package workloads_test

import (
	"strings"
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice/kind"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// TestLockPlaceWithin: a worker's lock place must be one its kind has, and hold the lock
// it was given; each refusal names the field.
func TestLockPlaceWithin(t *testing.T) {
	const path = "/zlc/r1/l0"
	cases := []struct {
		kind kind.Name
		p    workloads.LockPlace
		want string // "" for accepted
	}{
		{kind.ZooKeeper, workloads.LockPlace{Node: path + "/lock-0000000001"}, ""},
		{kind.ZooKeeper, workloads.LockPlace{Node: "/other/lock-1"}, "field lock.node"},
		{kind.Redis, workloads.LockPlace{Keys: []string{"app:1:" + path}, Value: "x"}, ""},
		{kind.Redis, workloads.LockPlace{Keys: []string{"app:1:other"}}, "field lock.keys"},
		{kind.Redis, workloads.LockPlace{GetLock: path}, "field lock.get_lock: Redis has no lock of that kind (its locks are keys)"},
		{kind.Postgres, workloads.LockPlace{Advisory: []int64{7}}, ""},
		{kind.Postgres, workloads.LockPlace{Table: "app.locks", Row: path}, ""},
		{kind.Postgres, workloads.LockPlace{Table: "app.locks", Row: "l9"}, "field lock.row"},
		{kind.Postgres, workloads.LockPlace{GetLock: path}, "its locks are table or advisory"},
		{kind.MariaDB, workloads.LockPlace{GetLock: "zlc-0123"}, ""},
		{kind.MariaDB, workloads.LockPlace{Advisory: []int64{1}}, "field lock.advisory: MariaDB has no lock of that kind"},
	}
	for _, c := range cases {
		err := c.p.Within(kind.Of(c.kind), path)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s %+v: %v, want %q", c.kind, c.p, err, c.want)
		}
	}
}
