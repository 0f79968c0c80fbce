// Package recipes owns the worker side of the worker protocol: the lock recipes under
// test (each a client-side algorithm on top of a ZooKeeper client library) and Serve,
// which runs one recipe inside a worker process, answering the harness's JSON Lines
// requests on stdin with exactly one reply each on stdout, and reporting what the
// recipe learns on its own (a lost lock, a new session) as events.
//
// Catalog is the one list of recipes: per recipe its name, workload kinds, doc line,
// runtime and the library it tests. Entry.Command builds a worker's command line.
// The InProcess recipes are gozk, go-zookeeper's own zk.Lock; zlc-mutex, this
// project's reference recipe (package zlcmutex); and the mutants of zlc-mutex, each the
// same code with one deliberate bug, which a run is expected to catch. A recipe that
// implements Counter also runs the counter workload (read and write requests while
// holding, optionally fenced). The Curator (Java) and Kazoo (Python) workers are
// embedded in the binary (packages curator and kazoo) and unpacked into a cache
// directory on first use, the Curator worker compiled there against Debian's jars.
//
// A recipe must never claim more than it knows: an error it returns is a definite
// failure only when wrapped with Fail; anything else is reported as info (unknown
// outcome), after which the harness retires the worker.
package recipes
