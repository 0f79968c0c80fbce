// Package zlcmutex is zlockcheck's reference ZooKeeper lock recipe, zlc-mutex, and its
// deliberately broken variants (mutants), all built from the same code: a Mutant in
// the Config switches exactly one idea off.
//
// The recipe is the classic sequential-ephemeral queue, done carefully:
//
//   - It creates a protected ephemeral-sequential node under the lock path, named
//     "_c_<guid>-lock-<seq>". When a create's reply is lost (connection loss) it
//     syncs, lists the children and takes the node carrying its GUID if there is one,
//     instead of creating a second node its own live session would keep forever.
//   - It holds the lock when its node is the lowest child. Otherwise it watches only
//     its predecessor (no herd effect) and, after every wake-up (watch, session
//     change, retry), reads the children again: a watch only says "look again".
//   - Before granting, it reads its own node and requires its ephemeralOwner to be the
//     client's current, connected session. The grant's fencing token is the node's
//     czxid.
//   - While holding, any change of the session state (a disconnect, which Curator
//     calls SUSPENDED, or an expiry) ends the hold: Config.OnLost is called once.
//   - A timed acquire that gives up deletes its node first and reports a definite
//     timeout only when that delete certainly took effect. Every error path after the
//     node was created tries to delete it; a node whose deletion is uncertain is
//     remembered and deleted before the next acquire.
//
// The lock talks to ZooKeeper through Client, a small interface declared here;
// ZKClient implements it over go-zookeeper. Errors are classified with Definite:
// a definite error means the operation had no effect; anything else leaves its
// outcome unknown.
package zlcmutex
