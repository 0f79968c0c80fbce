// Package lockservice owns a lock service's servers: starting them (in namespaces
// of the run's network, on SSH nodes, or reaching an existing deployment), waiting
// until they serve, telling which server a client uses and which one leads, asking
// them for their version and counters, and stopping them and removing their files
// on every exit path.
//
// Service is the seam: the run (harness), the nemesis and explore see a lock service
// only through it, plus optional abilities declared where they are used (a lock's
// entries and live sessions for the liveness and orphan watches, a counter, the
// herd sample). Start picks a kind and a place from a Config:
//
//   - ZooKeeper (Ensemble): servers in local namespaces (StartEnsemble), on SSH nodes
//     (StartRemoteEnsemble), or an existing ensemble (ConnectEnsemble); it has every
//     ability.
//   - Redis (Redis, StartRedis): Debian's redis-server, one instance per namespace of
//     the run's network, in a topology (one instance, a primary with replicas, or
//     independent primaries for RedLock) with a persistence setting (RedisSettings);
//     it reads the lock's key and its clients (OpenLock, LiveSessions) and has no
//     counter, herd sample or plain client loop yet. CleanupRedis finds an instance
//     that outlived its run's namespace.
//   - PostgreSQL (Postgres, StartPostgres) and MariaDB (MariaDB, StartMariaDB):
//     Debian's servers, each server in a namespace of the run's network, made fresh
//     (initdb, pg_basebackup, mariadb-install-db) in a zlc-prefixed directory of the
//     run and removed by Close: a Postgres primary with an optional streaming standby
//     (Promote, Terminate), or independent MariaDB servers (KillConnection). Groundwork
//     only: no recipe, fault or run uses them yet (docs/databases.md).
//     CleanupDatabases finds a server whose namespace or directory is gone.
//
// Sweep removes, for every kind and place above, what runs whose harness is dead
// left (netns's owner files say whose is whose): what every run does first, and
// cleanup by hand.
//
// A further kind (an etcd cluster) is one more implementation of Service, with the
// abilities that mean something for it.
//
// StartStandalone is a single ZooKeeper server on loopback for tests of one worker
// (conformance); it is not a Service.
package lockservice
