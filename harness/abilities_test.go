package harness

import (
	"testing"

	"github.com/zlockcheck/zlockcheck/lockservice"
	"github.com/zlockcheck/zlockcheck/lockservice/redis"
	"github.com/zlockcheck/zlockcheck/lockservice/sqldb"
	"github.com/zlockcheck/zlockcheck/lockservice/zookeeper"
	"github.com/zlockcheck/zlockcheck/workloads"
)

// The abilities each built-in kind's service has of those the run asks for
// (service.go): held to the kinds here, so that the run's own code names none.
var (
	_ yardstick     = (*zookeeper.Ensemble)(nil)
	_ rootMaker     = (*zookeeper.Ensemble)(nil)
	_ lockInspector = (*zookeeper.Ensemble)(nil)
	_ counterStore  = (*zookeeper.Ensemble)(nil)
	_ herdSampler   = (*zookeeper.Ensemble)(nil)

	_ lockInspector = (*redis.Redis)(nil)
	_ counterStore  = (*redis.Redis)(nil)
	_ yardstick     = (*redis.Redis)(nil)
	_ sentinelled   = (*redis.Redis)(nil)
	_ failingOver   = (*redis.Redis)(nil)

	_ lockInspector = (*sqldb.Postgres)(nil)
	_ counterStore  = (*sqldb.Postgres)(nil)
	_ yardstick     = (*sqldb.Postgres)(nil)
	_ lockInspector = (*sqldb.MariaDB)(nil)
	_ yardstick     = (*sqldb.MariaDB)(nil)
)
var (
	_ sessionFreeEntries       = (*sqldb.PostgresLock)(nil)
	_ lockservice.UnreadPlaces = (*sqldb.PostgresLock)(nil)
)

// TestADeclaredSessionLockIsFreedByAKill: a worker whose acquire says its lock goes
// with its connection (an exec worker's GET_LOCK, say) makes the run's faults that end
// sessions say they free it, as a catalogue session lock does; a lock that outlives
// its connection (a table's row) does not; the lock's session is the worker's.
func TestADeclaredSessionLockIsFreedByAKill(t *testing.T) {
	r := &runner{cluster: newCluster(nil, false), sessions: map[string]int{}}
	r.placed(7, workloads.LockPlace{Session: "0x2a", Table: "locks", Row: "l0"})
	if r.cluster.KillFreesLocks() || r.sessions["0x2a"] != 7 {
		t.Fatalf("a table's row: frees %v, sessions %v", r.cluster.KillFreesLocks(), r.sessions)
	}
	r.placed(8, workloads.LockPlace{Session: "0x2b", GetLock: "zlc_l0"})
	if !r.cluster.KillFreesLocks() || r.sessions["0x2b"] != 8 {
		t.Fatalf("GET_LOCK: frees %v, sessions %v", r.cluster.KillFreesLocks(), r.sessions)
	}
	if !newCluster(nil, true).KillFreesLocks() || newCluster(nil, false).KillFreesLocks() {
		t.Error("the catalogue's word")
	}
}

// TestTheLockReadIsWhereWorkersSaid: the lock the readers read (the orphan watch, the
// final listing) is the run's path and each process's latest place, in process order.
func TestTheLockReadIsWhereWorkersSaid(t *testing.T) {
	r := &runner{cluster: newCluster(nil, false), sessions: map[string]int{}, lockPath: "/zlc/r/l0"}
	if got := r.lock(); got.Path != "/zlc/r/l0" || len(got.Places) != 0 {
		t.Fatalf("no place yet: %+v", got)
	}
	r.placed(9, workloads.LockPlace{Session: "0x9", Keys: []string{"app:/zlc/r/l0"}, Value: "old"})
	r.placed(3, workloads.LockPlace{Session: "0x3", Keys: []string{"app:/zlc/r/l0"}, Value: "three"})
	r.placed(9, workloads.LockPlace{Session: "0x9", Keys: []string{"app:/zlc/r/l0"}, Value: "new"})
	got := r.lock()
	if len(got.Places) != 2 || got.Places[0].Value != "three" || got.Places[1].Value != "new" {
		t.Errorf("places %+v, want process 3's, then process 9's latest", got.Places)
	}
	if owner := got.OwnerOfValue("app:/zlc/r/l0", "new"); owner != "0x9" || r.sessions[owner] != 9 {
		t.Errorf("the key's value names session %q (process %d), want 0x9 (9)", owner, r.sessions[owner])
	}
}
