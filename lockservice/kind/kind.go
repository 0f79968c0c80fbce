// Package kind is the one catalogue of the kinds of lock service zlockcheck can run:
// each kind's name as flags, config.json and results.json spell it, how a person reads
// it, and the traits and abilities the rest of the tool asks instead of asking which
// kind a service is. It imports nothing of the project, so that recipes, the nemesis,
// the judges and the reports can name a kind without linking a server.
//
// A kind is registered once (Register), as database/sql registers a driver: the
// built-in kinds below at start, a new one from its own package. Its servers register
// under the same Name in lockservice (lockservice.Register).
package kind

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Name names a kind of lock service as flags, config.json and results.json spell it.
// "" is the kind a run made before there were others used: Default.
type Name string

// Ability is something a kind of service can have done to it beyond what every
// service takes (servers killed, paused, partitioned; workers cut off, paused,
// killed): a fault class that needs one (nemesis) runs only on a kind that has it.
type Ability uint

// The abilities a fault class may need.
const (
	// ExpireSession: the servers expire a worker's session on demand, as a timeout
	// would (session-expire).
	ExpireSession Ability = 1 << iota
	// KillConnection: a server closes a worker's connection from its side, ending
	// what the connection held (connection-kill).
	KillConnection
	// Failover: a replica or standby is promoted in its primary's place (failover).
	Failover
	// JumpClock: a server's clock jumps forward as its lock expiries see it
	// (clock-jump).
	JumpClock
	// Compact: the servers discard their history of revisions up to now, which
	// watches from an older revision can no longer read (compaction).
	Compact
	// Coordinate: the servers watch each other and elect over ports of their own
	// (Redis Sentinel's sentinels, a Redis Cluster's bus), which a partition can cut
	// while clients and replication still flow (coordination-partition).
	Coordinate
)

// abilityWords says what each ability does, for the messages that refuse a fault.
var abilityWords = map[Ability]string{
	ExpireSession:  "expire a worker's session",
	KillConnection: "close a worker's connection from the server's side",
	Failover:       "promote a replica or standby",
	JumpClock:      "jump a server's clock as its lock expiries see it",
	Compact:        "compact the servers' history of revisions",
	Coordinate:     "cut the servers' failure detection and elections apart from their clients and replication",
}

// String is what the ability does, in words.
func (a Ability) String() string {
	if w, ok := abilityWords[a]; ok {
		return w
	}
	return fmt.Sprintf("ability %d", uint(a))
}

// Kind describes one kind of lock service: the facts every layer asks.
type Kind struct {
	// Name is what --service takes.
	Name Name
	// Title is how a person reads it: "PostgreSQL".
	Title string
	// Queue: a lock is a queue of nodes, each waiter watching its predecessor, and
	// only the lowest is granted (ZooKeeper's recipes). The missed wake-up watch and
	// the coverage rows about queue nodes and predecessors' watches ask it.
	Queue bool
	// Lease: the session timeout a worker is given is a lease its recipe keeps (a
	// Redis key's TTL, a database lock's heartbeat bound and expiry), not a session
	// the servers keep: explore gives such a kind a short one.
	Lease bool
	// Nodes is the number of servers a run starts when it names none (0: the
	// harness's default).
	Nodes int
	// Abilities are the abilities every deployment of the kind has.
	Abilities Ability
	// Lacks says, in a sentence that names the kind, why it lacks an ability, where
	// a plainer word than "cannot" helps (what it has instead).
	Lacks map[Ability]string
	// Settle is how long a request a server accepted may still wait for its answer
	// after the last fault healed, besides the session timeout: the missed wake-up
	// watches wait until faults have been quiet for the longer of the two, since a
	// waiter whose own request hangs was not left without a wake-up.
	Settle time.Duration
	// Places are the entries a worker's lock may live in on this kind, as an
	// acquire names them (workloads.LockPlace's forms: node, keys, table, advisory,
	// get_lock); none: the kind takes no such word.
	Places []string
}

// Can reports whether the kind has every ability of a.
func (k Kind) Can(a Ability) bool { return k.Abilities&a == a }

// Refuse says why the kind cannot have a fault that needs a (nil when it can).
func (k Kind) Refuse(a Ability) error {
	if a == 0 || k.Can(a) {
		return nil
	}
	if why, ok := k.Lacks[a]; ok {
		return errors.New(why)
	}
	var can []string
	for _, o := range All() {
		if o.Can(a) {
			can = append(can, string(o.Name))
		}
	}
	return fmt.Errorf("needs a service that can %s (--service %s); %s cannot", a, strings.Join(can, ", "), k.Title)
}

// The built-in kinds' names.
const (
	// ZooKeeper is an ensemble of ZooKeeper servers: the Default.
	ZooKeeper Name = "zookeeper"
	// Redis is a set of Redis instances: one, a primary and replicas, or
	// independent instances for RedLock.
	Redis Name = "redis"
	// Postgres is a PostgreSQL primary, optionally with a streaming standby.
	Postgres Name = "postgres"
	// MariaDB is one MariaDB server, or several independent ones.
	MariaDB Name = "mariadb"
	// Etcd is a cluster of etcd members; a worker's session is a lease.
	Etcd Name = "etcd"
	// Default is the kind of a run that names none and whose recipe names none.
	Default = ZooKeeper
)

// registry holds the registered kinds in the order registered: written at start
// (the built-in kinds here, others from their packages' init), read after.
var registry struct {
	sync.RWMutex
	kinds []Kind
}

func init() {
	Register(Kind{Name: ZooKeeper, Title: "ZooKeeper", Queue: true, Abilities: ExpireSession, Places: []string{"node"}})
	Register(Kind{Name: Redis, Title: "Redis", Lease: true, Abilities: KillConnection | Failover | JumpClock | Coordinate, Places: []string{"keys"},
		Lacks: map[Ability]string{
			ExpireSession: "Redis has no sessions to expire (connection-kill, which ends the worker's connection from the server's side, is its analogue)",
		}})
	Register(Kind{Name: Postgres, Title: "PostgreSQL", Lease: true, Nodes: 1, Abilities: KillConnection | Failover, Places: []string{"table", "advisory"},
		Lacks: map[Ability]string{
			ExpireSession: "PostgreSQL has no sessions to expire (connection-kill, which ends the worker's connection from the server's side, is its analogue)",
		}})
	Register(Kind{Name: MariaDB, Title: "MariaDB", Lease: true, Nodes: 1, Abilities: KillConnection, Places: []string{"get_lock", "table"},
		Lacks: map[Ability]string{
			ExpireSession: "MariaDB has no sessions to expire (connection-kill, which ends the worker's connection from the server's side, is its analogue)",
			Failover:      "MariaDB's servers here are independent (no replication): there is nothing to fail over to",
		}})
	// etcd's Mutex is a queue: keys under the lock's prefix, each waiter waiting for
	// the deletion of the one created before it, the oldest granted. A session is a
	// lease the servers expire unless its client keeps it alive. A proposal a paused
	// leader took and lost with its log tail when it was deposed is answered only at
	// the member's request timeout (5 s and two election timeouts of 1 s, etcd's
	// defaults): Settle (docs/etcd.md, "A deposed leader's requests").
	Register(Kind{Name: Etcd, Title: "etcd", Queue: true, Lease: true, Nodes: 3, Settle: 7 * time.Second, Abilities: ExpireSession | Compact, Places: []string{"keys"},
		Lacks: map[Ability]string{
			KillConnection: "etcd ends no client's connection on demand (session-expire, which revokes the worker's lease, ends what it holds)",
		}})
}

// Register adds a kind to the catalogue. It panics on an empty or taken name, or no
// title: a programming error found at start.
func Register(k Kind) {
	registry.Lock()
	defer registry.Unlock()
	if k.Name == "" || k.Title == "" {
		panic(fmt.Sprintf("kind: Register(%+v): a kind needs a name and a title", k))
	}
	if slices.ContainsFunc(registry.kinds, func(o Kind) bool { return o.Name == k.Name }) {
		panic(fmt.Sprintf("kind: Register called twice for %q", k.Name))
	}
	registry.kinds = append(registry.kinds, k)
}

// All lists the registered kinds, the built-in ones first.
func All() []Kind {
	registry.RLock()
	defer registry.RUnlock()
	return slices.Clone(registry.kinds)
}

// Names lists the registered kinds' names, as a flag's help or an error says what is
// wanted: "zookeeper, redis, postgres or mariadb".
func Names() string {
	var names []string
	for _, k := range All() {
		names = append(names, string(k.Name))
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Lookup returns the kind named n ("" is Default); ok is false for a name not
// registered.
func Lookup(n Name) (k Kind, ok bool) {
	if n == "" {
		n = Default
	}
	registry.RLock()
	defer registry.RUnlock()
	i := slices.IndexFunc(registry.kinds, func(o Kind) bool { return o.Name == n })
	if i < 0 {
		return Kind{}, false
	}
	return registry.kinds[i], true
}

// Of returns the kind named n ("" is Default); a name not registered (a run stored
// by a tool that had it) is a kind with that name as its title and no trait.
func Of(n Name) Kind {
	if k, ok := Lookup(n); ok {
		return k
	}
	return Kind{Name: n, Title: string(n)}
}

// Parse reads a kind's name as --service takes it.
func Parse(s string) (Name, error) {
	if k, ok := Lookup(Name(s)); ok && s != "" {
		return k.Name, nil
	}
	return "", fmt.Errorf("want %s, got %q", Names(), s)
}

// Title is how a person reads a kind's name: "" is Default's.
func (n Name) Title() string { return Of(n).Title }

// Is reports whether n names kind o, "" naming Default.
func (n Name) Is(o Name) bool { return Of(n).Name == Of(o).Name }
