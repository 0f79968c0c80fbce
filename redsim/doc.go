// Package redsim owns zlockcheck's deterministic simulation of Redis, and the lock
// property that puts a Go Redis lock through it as it is: the user's own code, on
// its own go-redis client dialled through the simulator, runs on simulated
// processes while a scheduler chooses every interleaving, every fault and every
// move of the clock, so that a failure replays exactly and rapid can shrink it to a
// few steps.
//
// # The simulated instances
//
// Sim keeps one or N independent instances (N for RedLock). Each speaks RESP2 and
// RESP3 (HELLO) over net.Pipe connections made in the run's bubble, and knows the
// commands Go lock libraries send: SET with NX, XX, GET, KEEPTTL, PX, EX, PXAT and
// EXAT; GET, DEL, EXISTS, INCR, MGET, MSET, MSETNX, GETRANGE; PEXPIRE and EXPIRE
// with NX, XX, GT and LT; PTTL and TTL; CLIENT ID, SETNAME, GETNAME and SETINFO;
// EVAL, EVALSHA and SCRIPT LOAD, EXISTS and FLUSH; WAIT (no replicas: 0, at once);
// PING, ECHO, SELECT (16 databases) and HELLO. Anything else is answered "ERR
// unknown command ...", worded as Redis words it. Scripts run for real in
// gopher-lua (Lua 5.1, as Redis's), with redis.call, redis.pcall,
// redis.error_reply, redis.status_reply and redis.sha1hex, Redis's conversions
// between replies and Lua values, its time frozen during a script, and NOSCRIPT
// for an unknown SHA. Keys expire by the bubble's fake clock plus the instance's
// own offset (a server clock jump). TestDiffRedisServer holds all this to a real
// redis-server on generated command streams.
//
// A client (a simulated process) may open any number of connections. Each
// request waits for the scheduler, who decides its fate: Reply (applied, its
// reply sent), LoseReply (applied, then the connection breaks), Drop (the
// connection breaks first), Delay (applied, its reply held until the next tick
// has moved the clock). A process's next request is its oldest by instance then
// connection, so that RedLock's concurrent requests are served in one order. A
// connection the client closed (a timeout) keeps the requests it sent: the server
// may still apply them, late. CLIENT ID numbers a connection when its first
// request is served, not when it was dialled.
//
// # Determinism
//
// A Sim lives in a testing/synctest bubble: every scheduler method returns once
// every goroutine of the bubble is durably blocked, so a run is a function of its
// schedule. The clock moves only in steps: a tick by its duration, and every
// step by a microsecond, so that what two steps start (requests, their timeouts,
// backoffs) never falls due at one instant, where the Go scheduler would order
// the goroutines it wakes. crypto/rand is seeded for each run
// (testing/cryptotest), so lock values and random backoffs are the same in every
// replay. The first failing run is replayed twice and its trace compared, as in
// zksim: a recipe that is not deterministic under the simulator fails loudly.
// Known limits: math/rand's global generator cannot be seeded (a recipe that
// draws its backoffs there, as redsync's default delay does, may not replay;
// the project's redsync recipe draws from crypto/rand); go-redis keeps timers in
// a process-wide pool, which the property empties (two collections) before every
// run.
//
// # The lock property
//
// CheckLock (LockProperty for rapid.Check) runs a Recipe on two to four clients.
// rapid draws which fault kinds a run leaves out (swarm testing) and the steps:
// acquire, release, timeout, step, run and tick, and the faults lose-reply, drop,
// delay, crash (a new process takes the slot), jump (an instance's clock) and
// restart (an instance loses its keys). Ticks and jumps are drawn from a
// hundredth, a tenth, a quarter, half, one and two TTLs. A Schedule
// (ParseSchedule) replays a run exactly (ReplayLock). Checked:
//
//   - after every step, mutual exclusion in virtual time: at most one client
//     believes it holds. A belief begins when Acquire returns and ends at the
//     release's call, a lost event (Env.OnLost), or the end of the validity the
//     recipe declares (Hold.Until). A holder whose key a fault took (a restart, a
//     clock jump, at once or by an expiry earlier than its TTL said) from a
//     majority of instances is excused while it does not know, as no recipe can
//     keep such a lock; but if its key comes back by its own request while
//     another client held meanwhile, or it renews another's key, it fails;
//   - liveness: with faults off, every client acquires and releases once more
//     within four TTLs (a lock left by a fault expires within one);
//   - no orphan: once every client is idle, the lock key is not left without
//     expiry.
//
// # What it does not model
//
// Replication (WAIT answers 0 at once, without blocking for its timeout), Redis
// Cluster and sentinels, persistence (a restart loses everything), keys of other
// types than strings, Redis's protection of a script's globals, a script that
// never ends (BUSY), pub/sub and client-side caching.
package redsim
