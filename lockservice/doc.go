// Package lockservice is the core every kind of lock service plugs into: the
// Service a run sees (start, wait until serving, which server a client is on and
// which leads, version, close on every exit path), the registries of how each kind's
// servers start (RegisterStart, Register), are swept (RegisterSweep), are fetched
// into the cache by make setup (RegisterFetcher) and are set up (RegisterSettings:
// its section of a run's configuration, its flags), and what the
// kinds share: the run network's server addresses (ServerAddr), a server of a run
// (Member: its id, host, client port and files), a server's host in a
// namespace (NSHost) and the wait until servers serve (WaitServing), SSH nodes
// (SSHConfig; Remote and SSHHost, one server a node for any kind; their sweep), an
// existing deployment's servers (ReachExisting, ExistingHost), a lock's reader (LockReader) and session names, the
// plain client loop's yardstick (Baseline), and the index of the tool's namespaces
// that finds a server that outlived its run (NSIndex).
//
// Each kind lives in a package of its own under this one, registers itself from its
// init, and imports only this core (never another kind):
//
//   - zookeeper: ensembles in local namespaces, on SSH nodes, or an existing one
//     (--connect); a standalone server on loopback for conformance; the go-zookeeper
//     plain loop, the herd sample, the lock's nodes.
//   - redis: Debian's redis-server, one instance per namespace or SSH node, or an
//     existing Redis, in a topology (one instance, a primary with replicas,
//     independent primaries for RedLock) with a persistence setting; the lock's key and clients, the counter, the plain loop,
//     failover, clock jumps, connection kills, the sweep of instances left behind.
//   - etcd: 1, 3 or 5 members from Debian's etcd-server or a release built from the
//     Go module proxy, or an existing cluster (--connect); a worker's session is a
//     lease: the lock's keys and leases, the lease revoked, compaction, the plain loop.
//   - sqldb: PostgreSQL (a primary, optionally a streaming standby) and MariaDB
//     (independent servers), in namespaces or on SSH nodes, made fresh in zlc-prefixed
//     directories, or existing ones (--connect, a schema or database of the run's): their lock
//     tables and session locks, counters, plain loops, failover, keepalives,
//     connection kills, the sweep of servers left behind.
//
// What a kind is (its name, title, traits and abilities) is lockservice/kind's, which
// imports nothing of the project. A new kind is a package here that registers its
// start, its settings (if it has any) and, if its servers can outlive their
// namespaces, its sweep, and one line in lockservice/builtin, which links the kinds
// into a program (docs/kinds.md). lockservicetest holds what the kinds' tests share.
//
// The servers are addressed in the nemesis's vocabulary of hosts (nemesis.Server,
// nemesis.ServerHost): the nemesis sits below this package and faults whatever hosts
// a kind hands it.
//
// Sweep removes, for every kind, what runs whose harness is dead left (netns's owner
// files say whose is whose): what every run does first, and cleanup by hand.
package lockservice
