// Package zksim owns zlockcheck's deterministic simulation of ZooKeeper, and the lock
// property that puts a lock recipe through it: the recipe's own code, written against
// zlcmutex.Client, runs on simulated clients while a scheduler chooses every
// interleaving and every fault, so that a failure replays exactly and rapid can shrink
// it to a few steps.
//
// # The simulated ensemble
//
// Sim keeps one linearizable znode tree (every read sees every committed write) with
// ZooKeeper's stat (czxid, mzxid, pzxid, version, cversion, ephemeralOwner,
// numChildren, dataLength): persistent, ephemeral and sequential nodes (the sequence
// number is the parent's cversion, as in ZooKeeper), delete and setData with a
// version, getChildren (in a scrambled but reproducible order), exists and getData
// with one-shot watches, getChildren with a watch, multi with check and setData (one
// transaction, all or nothing), sync, and sessions whose end deletes their ephemeral
// nodes.
//
// Client, one per simulated process, implements zlcmutex.Client. A request blocks its
// goroutine until the scheduler decides its fate:
//
//   - Run: it reaches the servers and its reply comes back (watch events fired for
//     the client are delivered first, as ZooKeeper sends them before later replies);
//   - LoseReply: it is applied, then the connection breaks (ErrConnectionLoss);
//   - Drop: the connection breaks before it is applied (ErrConnectionLoss);
//   - Expire: the session ends at any point, pending requests fail with
//     ErrSessionExpired (a disconnected client hears of it when it reconnects);
//   - Crash: the process dies, its session lives on until it expires;
//   - Deliver: a fired watch event reaches the client only when the scheduler says.
//
// # Determinism
//
// A Sim lives in a testing/synctest bubble. Every scheduler method returns only once
// every goroutine of the bubble is durably blocked again (synctest.Wait): in its next
// request, on a watch or session channel, on a timer, or done. Between two scheduler
// calls nothing moves, so a run is a function of its sequence of scheduler calls. The
// clock is the bubble's fake clock; only Tick moves it, so a recipe's retry pauses
// fire when the schedule says, and acquire timeouts are the schedule's (it ends the
// acquire's context). Nothing reads the wall clock.
//
// # The wire mode
//
// A recipe written on go-zookeeper's *zk.Conn runs unchanged (Recipe.NewConn): a
// client made by NewWireClient is served over a net.Pipe made in the bubble, in
// ZooKeeper's client protocol (wire_jute.go: the handshake with or without the
// read-only byte, ping, close, the create family with containers, delete, exists,
// getData, setData, getChildren and getChildren2, sync, check, multi, setAuth,
// setWatches, checkWatches and removeWatches; anything else is answered
// UNIMPLEMENTED). Its library keeps the client side: the simulator sees only packets.
// Requests wait for the scheduler as an in-process client's do; Run writes the
// events queued for the connection, then the reply; LoseReply applies the request and
// breaks the connection; Drop breaks it first; a broken connection loses its watches
// (ZooKeeper keeps them per connection) until the library sets them again with
// setWatches, to which the servers apply ZooKeeper's rule (a missed event fires at
// once). The library reconnects only when the scheduler lets it (Reconnect: its host
// provider waits for the step), and the handshake decides: its session, or expired.
// Expire breaks a connected client's connection and lets it reconnect at once, so it
// hears of the expiry within the step, as an in-process client does. Pings are
// answered as they come. Children are listed in order of creation, as the library's
// protected names carry random GUIDs; traces and failures mask them.
//
// # The lock property
//
// CheckLock (and LockProperty, for rapid.Check) runs a Recipe on two to five clients.
// Each run is a synctest bubble; rapid draws the clients, which kinds of step the run
// leaves out (swarm testing), and the steps (Step): acquire, release, timeout, step
// (one request), run (a client's requests until it has none), deliver, tick,
// reconnect, and the faults lose-reply, drop, expire and crash. A crashed or retired
// process is replaced by a new one, as the harness replaces a worker. The run records
// a histories.History the way the harness does (acquire and release invoke, ok, fail
// or info; a lost event as a release marked Lost; a crash as info), and checks:
//
//   - after every step, mutual exclusion: at most one client holds among those not
//     told they lost the lock and whose lock node the servers still have (models'
//     mutex checker must agree that the history is then invalid);
//   - liveness: with faults off (crashed sessions expire, clients reconnect, watch
//     events are delivered, requests run round robin, holders release), every waiting
//     client acquires within a bounded number of steps, and none is blocked forever;
//   - no orphaned lock nodes once every client is idle, and once every session is
//     gone;
//   - the history, checked by models' mutex checker, is valid.
//
// A failure is a *Failure; rapid shrinks it and logs its story (every step, request,
// reply and log line of the recipe). Rapid's fail file replays it (-rapid.failfile),
// and a Schedule (ParseSchedule) replays an explicit list of steps (ReplayLock).
//
// # What it does not model
//
// Followers that lag (every read is linearizable, so sync only takes a step), ACLs,
// session timeouts as durations (a session expires when the schedule says), a
// connected client that has not heard yet that its session expired (it hears at once;
// the gap that only fencing closes is not simulated), requests of one connection that
// are partly applied when it breaks (the first pending request is applied or not, the
// others are dropped), and two goroutines of one client woken by one step (a recipe
// whose goroutines race each other may not replay exactly).
package zksim
