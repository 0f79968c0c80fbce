// The etcd3 client's Lock (microsoft/etcd3 on npm) as a zlockcheck worker, on the
// protocol of zlcworker.js.
//
// Usage: node etcd3_worker.js etcd-node-lock
//
// The library (pinned in package.json) is used as its README shows users: one
// `new Etcd3({ hosts })` per process, over every member init names, with the client's
// defaults (its global retry policy: a failed call is tried again, 3 times, on
// another member; a circuit breaker per member), and for each hold
// `client.lock(name).ttl(seconds).acquire()` and `lock.release()`. The TTL is init's
// session_timeout_ms in whole seconds (at least 1). One option is set: a deadline on
// every call that is not a stream (`defaultCallOptions`, as the client's
// documentation shows it), of the TTL (at least 1 s): without one a call to a paused
// member waits for ever, and so would the acquire.
//
// What the library does (lib/lock.js, lib/lease.js):
//
// - acquire: grants a new lease of the TTL (a Lease, which starts its keep-alives, a
//   third of the TTL apart, as soon as the grant is answered), then one transaction:
//   if the key's create revision is 0, put it (empty) on the lease. When the key
//   exists the transaction does nothing; the library revokes the lease and rejects
//   with EtcdLockFailedError. It never waits for the lock: the worker tries again
//   every 100 ms (POLL_MS) until the acquire's timeout (0: for ever), and answers
//   fail "timeout" when the last try was refused. Any other error of the transaction
//   leaves the lease granted and kept alive, and its key, when the put was applied
//   before the reply was lost: the lock would stay taken, by nobody, as long as the
//   process lives. The worker does what `lock.do()` does with such an error: it calls
//   `lock.release()` (the lease's revoke: its key goes with it), and goes on trying
//   when that answered; when it did not, it answers info (the key is left to its
//   TTL: the revoke stopped the keep-alives first).
// - The key is the name itself (the client's namespace is empty): the worker names the
//   lock init's path and `/lock` (PATH/lock), so that its one key is the lock's one
//   entry under PATH/ where the harness reads a lock's entries, attached to the lease.
// - release: `lock.release()`, the lease's revoke (keep-alives stopped first). A
//   revoke the members answer "lease not found" (the lease expired, or was revoked)
//   returns as one that revoked it: the library does not tell. The worker answers
//   fail "not held" when the lease had told it lost before; another error, info.
//
// What the library tells a holder: nothing through the Lock (its lease is a private
// field of it, in TypeScript's sense). The Lease under it emits 'lost' when a
// keep-alive is answered with TTL 0 (the members expired or revoked it), or when its
// keep-alive stream is restarted after a failure more than twice the TTL after the last
// keep-alive answer (the Lease counts from the answers it receives, not from the
// sends). The worker listens to that Lease's 'lost' (`lock.lease`, reachable from
// JavaScript) and reports "lost". So a holder cut off from the members is told, at the
// soonest, a TTL after the members expired its lease, and only when its stream is
// restarted (a stream quiet for a TTL is). The acquire says where the lock lives: the key
// and the lease (the session, `0x` and hex: the worker also reports it as a session
// event), and reads the key back once for its create revision, the token (omitted
// when that read fails).
'use strict';

const { Etcd3, EtcdLockFailedError } = require('etcd3');
const zlc = require('./zlcworker');

const RECIPES = ['etcd-node-lock'];
const POLL_MS = 100;

function log(msg) {
  const t = new Date().toISOString().slice(11, 23);
  process.stderr.write(`${t} INFO zlc.etcd-node-lock: ${msg}\n`);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class EtcdNodeLock {
  constructor() {
    this.client = null;
    this.lock = null;
    this.lastLoss = ''; // why the last hold ended without a release
  }

  async init(init, events) {
    if (init.kind !== 'mutex') throw new zlc.Refused(`etcd-node-lock speaks the mutex workload, not ${init.kind}`);
    if (init.permits > 1) throw new zlc.Refused(`etcd-node-lock: a mutex has one permit, got permits ${init.permits}`);
    if (init.fenced) throw new zlc.Refused('etcd-node-lock does not fence its writes');
    for (const a of init.connect) {
      const i = a.lastIndexOf(':');
      if (i <= 0 || !/^[0-9]+$/.test(a.slice(i + 1))) throw new zlc.Refused(`init: connect ${JSON.stringify(a)} is not host:port`);
    }
    this.events = events;
    this.ttl = Math.max(1, Math.floor(init.sessionTimeoutMs / 1000));
    this.callMs = Math.max(1000, this.ttl * 1000);
    this.name = init.path.replace(/\/+$/, '') + '/lock';
    this.client = new Etcd3({
      hosts: init.connect,
      defaultCallOptions: (ctx) => (ctx.isStream ? {} : { deadline: Date.now() + this.callMs }),
    });
    // The members answer (a read of the lock's key), or init fails and is sent again.
    await this.client.get(this.name).exec();
  }

  async acquire(timeoutMs) {
    const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : null;
    let lock;
    for (;;) {
      lock = this.client.lock(this.name).ttl(this.ttl);
      try {
        await lock.acquire();
        break;
      } catch (e) {
        if (!(e instanceof EtcdLockFailedError)) {
          // What lock.do() does after a failed acquire: revoke the lease.
          log(`acquire: ${e.message}; revoking its lease`);
          try {
            await lock.release();
          } catch (e2) {
            throw new zlc.Unknown(`acquire: ${e.message}; the revoke of its lease failed too (${e2.message}): its key may live for a TTL`);
          }
        }
      }
      const left = deadline === null ? Infinity : deadline - Date.now();
      if (left <= 0) return null;
      await sleep(Math.min(left, POLL_MS));
    }
    const lease = lock.lease;
    const id = BigInt(await lock.leaseId());
    const session = '0x' + id.toString(16);
    this.lock = lock;
    this.lastLoss = '';
    lease.on('lost', (err) => this.lost(lock, err));
    if (lease.revoked()) this.lost(lock, new Error('the lease was closed before the acquire returned'));
    this.events.session(session);
    const r = { lock: { session, keys: [this.name] } };
    try {
      const kv = (await this.client.get(this.name).exec()).kvs[0];
      if (kv && BigInt(kv.lease) === id) r.token = Number(kv.create_revision);
    } catch (e) {
      log(`reading the key's create revision: ${e.message}`);
    }
    return r;
  }

  lost(lock, err) {
    if (this.lock !== lock) return;
    this.lock = null;
    this.lastLoss = `the lease emitted lost: ${err.message}`;
    this.events.lost(`the lock's lease emitted 'lost': ${err.message}`);
  }

  async release() {
    const lock = this.lock;
    this.lock = null;
    if (lock === null) throw new zlc.NotHeld(this.lastLoss || 'nothing held');
    try {
      await lock.release();
    } catch (e) {
      throw new zlc.Unknown(`release: ${e.message}`);
    }
  }

  async close() {
    if (this.client !== null) this.client.close();
  }
}

zlc.main(RECIPES, () => new EtcdNodeLock());
