// redis-semaphore's Mutex, with its refresh and its lost-lock callback, as a zlockcheck
// worker on the protocol of zlcworker.js.
//
// Usage: node redis_semaphore_worker.js redis-semaphore-mutex
//
// The library (pinned in package.json, over ioredis with its defaults: redisclient.js
// says what they are) is used as its documentation tells users to: one ioredis client
// per process, to init's first address (the only instance, or the primary of the
// replicas topology; under sentinels, init's sentinel_master, the primary they name:
// ioredis's `sentinels` and `name`), and a new `Mutex(client, name, options)` for every hold, with
// `tryAcquire()` and `release()`. Its options: lockTimeout the TTL (init's
// session_timeout_ms, as for every lease recipe of a run), acquireTimeout the
// harness's timeout (0: Infinity), onLockLost the worker's (below); the others the
// library's defaults: retryInterval 10 ms, refreshInterval 0.8 × lockTimeout.
//
// - acquire: `SET mutex:NAME id PX ttl NX` every retryInterval until it answers OK or
//   acquireTimeout has passed (by the wall clock); false answers fail "timeout". Then
//   a refresh every refreshInterval: a Lua compare-and-PEXPIRE.
// - release: stops the refresh, then a Lua compare-and-delete whose answer the library
//   does not read: a release of a key that ran out, or that another holds now,
//   returns as one that deleted it. The worker answers ok, unless onLockLost came
//   first (fail "not held").
//
// What the library tells a holder: onLockLost(LostLockError), called when a refresh's
// script answers that the key is no longer this id's (gone, or another's). The worker
// reports it as "lost". The library tells nothing more: a refresh that is slow, or
// waits in ioredis's queue through a disconnection, is not timed out, and the key may
// run out meanwhile; the holder hears of it when that refresh's answer comes. A
// refresh that fails (MaxRetriesPerRequestError, an error reply) rejects inside the
// library's interval timer, where nobody catches it: Node ends the process (an
// unhandled rejection), as it would a user's. No token (the id is a random UUID);
// the acquire says where the lock lives: the key (`mutex:` and the lock's name), the
// id, and the connection, whose CLIENT IDs are the sessions.
//
// What ioredis's re-sending does to the acquire: a `SET NX` that took the lock and
// whose reply was lost with its connection is sent again on the next one, finds the
// key (its own) and answers nil; the library polls on and times out, while the key
// holds the lock for a TTL that nobody will release or refresh.
'use strict';

const { Mutex } = require('redis-semaphore');
const zlc = require('./zlcworker');
const redis = require('./redisclient');

const RECIPES = ['redis-semaphore-mutex'];

class RedisSemaphoreMutex {
  constructor() {
    this.client = null;
    this.mutex = null;
    this.lastLoss = ''; // why the last hold ended without a release
    this.session = null;
  }

  async init(init, events) {
    redis.checkMutex('redis-semaphore-mutex', init, 'id');
    this.events = events;
    this.ttl = init.sessionTimeoutMs;
    this.path = init.path;
    const onSession = (id) => {
      this.session = id;
      events.session(id);
    };
    this.client = init.sentinelMaster === null ? redis.connect(init.connect[0], onSession) : redis.connectSentinel(init.connect, init.sentinelMaster, onSession);
    await redis.ready([this.client], 1, this.ttl);
  }

  async acquire(timeoutMs) {
    const mutex = new Mutex(this.client, this.path, {
      lockTimeout: this.ttl,
      acquireTimeout: timeoutMs > 0 ? timeoutMs : Infinity,
      onLockLost: (err) => this.lost(mutex, err),
    });
    if (!(await mutex.tryAcquire())) return null;
    this.mutex = mutex;
    this.lastLoss = '';
    // The key is the library's: mutex: and the name.
    const place = { keys: ['mutex:' + this.path], value: mutex.identifier };
    if (this.session !== null) place.session = '0x' + this.session.toString(16);
    return { lock: place };
  }

  lost(mutex, err) {
    if (this.mutex !== mutex) return;
    this.mutex = null;
    this.lastLoss = `onLockLost: ${err.message}`;
    this.events.lost(`onLockLost: ${err.message} (a refresh found the key gone or another's)`);
  }

  async release() {
    const mutex = this.mutex;
    this.mutex = null;
    if (mutex === null) throw new zlc.NotHeld(this.lastLoss || 'nothing held');
    await mutex.release();
  }

  async close() {
    if (this.mutex !== null) this.mutex.stopRefresh();
    if (this.client !== null) await redis.quit([this.client]);
  }
}

zlc.main(RECIPES, () => new RedisSemaphoreMutex());
