// Package lockservice owns a lock service's servers: starting them (in namespaces
// of the run's network, on SSH nodes, or reaching an existing deployment), waiting
// until they serve, telling which server a client uses and which one leads, asking
// them for their version and counters, and stopping them and removing their files
// on every exit path.
//
// Service is the seam: the run (harness), the nemesis and explore see a lock service
// only through it, plus optional abilities declared where they are used (a lock's
// entries and live sessions for the liveness and orphan watches, a counter, the
// herd sample). ZooKeeper is the one kind today (Ensemble: local namespaces,
// StartEnsemble; SSH nodes, StartRemoteEnsemble; an existing ensemble,
// ConnectEnsemble; Start picks one from a Config). A second kind (a set of Redis
// instances, a Postgres server, an etcd cluster) is one more implementation of
// Service, with the abilities that mean something for it.
//
// StartStandalone is a single ZooKeeper server on loopback for tests of one worker
// (conformance); it is not a Service.
package lockservice
