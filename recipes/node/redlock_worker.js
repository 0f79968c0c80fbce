// @sesamecare-oss/redlock (the maintained fork of redlock) as a zlockcheck worker, on
// the protocol of zlcworker.js.
//
// Usage: node redlock_worker.js node-redlock
//
// The library (pinned in package.json) is used as its documentation tells users to:
// one ioredis client per independent Redis primary, with ioredis's defaults
// (redisclient.js says what they are), `new Redlock(clients)` with the library's
// default settings (driftFactor 0.01, retryCount 10, retryDelay 200 ms, retryJitter
// 100 ms), and a plain lock: `redlock.acquire([name], TTL)`, `lock.release()`. No
// `using` (its automatic extension), no `extend`: the lock lives for its TTL, which
// is init's session_timeout_ms, as for every lease recipe of a run.
//
// - acquire: the library's own retry loop, retryDelay ± retryJitter apart, each
//   attempt the acquire script (EXISTS, then SET key value PX ttl) on every instance,
//   a grant when a majority answered it took the key. Its retryCount is set per call
//   from the harness's timeout (the time left ÷ retryDelay), and the worker calls it
//   again while time is left (after one more retryDelay), so that an acquire gives up
//   at its timeout and not at the library's 2 s; timeout 0 is retryCount -1 (for
//   ever). A failed call (ExecutionError: no majority in its retry window) removes
//   what it set on a minority; every ExecutionError answers fail "timeout". Anything
//   else thrown answers info.
// - release: `lock.release()`, the release script (compare-and-delete) on every
//   instance with the library's retries. When it finds the keys gone or another's on a
//   majority (ResourceLockedError votes) the worker answers fail "not held"; another
//   ExecutionError, info.
//
// What the library tells a holder: the Lock's `expiration`, the moment (by the wall
// clock) its validity ends: the TTL less the drift (1% and 2 ms) from before the
// attempt that won. The library does not check it against the time the grant took
// (an acquire may return a lock already expired); the caller can. The worker reports
// "lost" when it passes, unless it released first: at once when the acquire returned
// after it. No token: the value is random, and RedLock has no fencing token. The
// acquire says where the lock lives: the key (the lock's name, init's path, the same
// on every instance), the value, and the first instance's connection, whose CLIENT
// IDs are the sessions.
//
// What ioredis's re-sending does to the acquire script: an instance that ran it,
// took the key and lost the connection before its reply runs it again on the next
// connection; the second run finds the key (its own) and answers 0, a vote against.
// The library counts it against the quorum: a grant is missed (the attempt fails,
// its release removes the key, the next attempt may win), never doubled.
'use strict';

const { Redlock, ExecutionError, ResourceLockedError } = require('@sesamecare-oss/redlock');
const zlc = require('./zlcworker');
const redis = require('./redisclient');

const RECIPES = ['node-redlock'];

function log(msg) {
  const t = new Date().toISOString().slice(11, 23);
  process.stderr.write(`${t} INFO zlc.node-redlock: ${msg}\n`);
}

class NodeRedlock {
  constructor() {
    this.clients = [];
    this.lock = null;
    this.timer = null; // reports the validity's end, while held
    this.lastLoss = ''; // why the last hold ended without a release
    this.session = null;
  }

  async init(init, events) {
    redis.checkMutex('node-redlock', init, 'value');
    if (init.sentinelMaster !== null) {
      throw new zlc.Refused(`init: sentinel_master ${init.sentinelMaster}: recipe node-redlock has no Sentinel mode (RedLock is over independent primaries)`);
    }
    if (init.connect.length < 3) {
      throw new zlc.Refused(`node-redlock: RedLock needs at least 3 independent Redis primaries, got ${init.connect.length} (${init.connect})`);
    }
    this.events = events;
    this.ttl = init.sessionTimeoutMs;
    this.path = init.path;
    this.clients = init.connect.map((a, i) => redis.connect(a, i === 0 ? (id) => {
      this.session = id;
      events.session(id);
    } : null));
    await redis.ready(this.clients, Math.floor(this.clients.length / 2) + 1, this.ttl);
    this.redlock = new Redlock(this.clients);
    this.redlock.on('error', (e) => {
      if (!(e instanceof ResourceLockedError)) log(`an instance's vote against: ${e.message}`);
    });
  }

  async acquire(timeoutMs) {
    const { retryDelay, retryJitter } = this.redlock.settings;
    // The library's clock is the wall clock (Date.now); so is the deadline it is held to.
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : null;
    let lock;
    for (;;) {
      const retryCount = deadline === null ? -1 : Math.max(0, Math.floor((deadline - Date.now()) / retryDelay));
      try {
        lock = await this.redlock.acquire([this.path], this.ttl, { retryCount });
        break;
      } catch (e) {
        if (!(e instanceof ExecutionError)) throw e;
        const left = deadline === null ? Infinity : deadline - Date.now();
        if (left <= 0) return null;
        const pause = retryDelay + Math.floor((Math.random() * 2 - 1) * retryJitter);
        await new Promise((resolve) => setTimeout(resolve, Math.max(0, Math.min(left, pause))));
      }
    }
    const valid = lock.expiration - Date.now();
    const timer = setTimeout(() => this.expired(lock), Math.max(0, valid));
    this.lock = lock;
    this.timer = timer;
    this.lastLoss = '';
    if (valid <= 0) log(`acquired ${-valid} ms after its validity ended`);
    const place = { keys: [this.path], value: lock.value };
    if (this.session !== null) place.session = '0x' + this.session.toString(16);
    return { lock: place };
  }

  expired(lock) {
    if (this.lock !== lock) return;
    this.lock = null;
    this.timer = null;
    this.lastLoss = 'its validity ran out';
    this.events.lost("the lock's validity (its expiration: the TTL less the drift, from before the attempt that won) ran out; the library does not extend it");
  }

  async release() {
    const lock = this.lock;
    clearTimeout(this.timer);
    this.lock = null;
    this.timer = null;
    if (lock === null) throw new zlc.NotHeld(this.lastLoss || 'nothing held');
    try {
      await lock.release();
    } catch (e) {
      if (!(e instanceof ExecutionError)) throw e;
      // The last attempt's votes (a promise that settles when every instance
      // answered: not waited for past 200 ms).
      let timer;
      const stats = await Promise.race([e.attempts[e.attempts.length - 1],
        new Promise((resolve) => (timer = setTimeout(() => resolve(null), 200)))]);
      clearTimeout(timer);
      const gone = stats ? [...stats.votesAgainst.values()].filter((v) => v instanceof ResourceLockedError).length : 0;
      if (stats && gone >= stats.quorumSize) {
        throw new zlc.NotHeld(`its keys were gone or another's on ${gone} of ${stats.membershipSize} instances`);
      }
      throw new zlc.Unknown(`release: ${e.message}`);
    }
  }

  async close() {
    clearTimeout(this.timer);
    await redis.quit(this.clients);
  }
}

zlc.main(RECIPES, () => new NodeRedlock());
