// An example zlockcheck worker: a Redis lock on ioredis, as Redis's lock page has it.
//
//   zlockcheck conformance --service redis --worker-cmd "node examples/workers/redis_lock.js"
//   zlockcheck run --service redis --recipe exec --worker-cmd "node examples/workers/redis_lock.js"
//
// SET name token NX PX ttl to take it (a random token), a Lua compare-and-delete to
// release it; the TTL is init's session_timeout_ms. A holder renews it every third of
// the TTL (a Lua compare-and-PEXPIRE), as a watchdog does, so that a hold may outlast
// one TTL. ioredis keeps its defaults, as an application has them (reconnection, an
// offline queue, and the re-sending of commands in flight after a reconnection), but
// for a command timeout of a third of the TTL, so that no request waits for ever.
// Redis tells a holder nothing when its lease ends; the worker reports lost when a
// renewal finds the key gone or another's, or when no renewal got through within the
// TTL (timed from before the SET or renewal that last set it). Its one connection's
// CLIENT ID is the session, and the acquire says where the lock lives: the key, the
// token, that connection.
'use strict';

const crypto = require('node:crypto');
const Redis = require('ioredis');
const { serve, TimedOut, NotHeld } = require('./zlcworker');

const POLL_MS = 10;
const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";
const RENEW = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 0";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class RedisLock {
  async open(init, events) {
    this.events = events;
    // connect is host:port,...: the first instance is the one to lock on.
    const [host, port] = init.connect.split(',')[0].split(':');
    this.ttlMs = init.session_timeout_ms;
    this.name = init.path;
    // A password comes from REDISCLI_AUTH (redis-cli's variable; zlockcheck passes its
    // environment on), as an application would read it from its own.
    this.client = new Redis({ host, port: Number(port), password: process.env.REDISCLI_AUTH || undefined,
      commandTimeout: this.ttlMs / 3, lazyConnect: true });
    this.client.on('error', (e) => process.stderr.write('ioredis: ' + e.message + '\n'));
    await this.client.connect();
    this.session = null;
    this.hold = null; // the current hold: { until, timer }, or null
    await this.reportSession();
  }

  // reportSession reports the connection's CLIENT ID when it is a new one.
  async reportSession() {
    const id = await this.client.client('ID');
    if (id !== this.session) {
      this.session = id;
      this.events.session(id);
    }
  }

  async acquire(timeoutMs) {
    const deadline = timeoutMs === null ? null : Date.now() + timeoutMs;
    const token = crypto.randomBytes(16).toString('hex');
    let start;
    for (;;) {
      start = performance.now();
      if ((await this.client.set(this.name, token, 'PX', this.ttlMs, 'NX')) === 'OK') break;
      if (deadline !== null && Date.now() >= deadline) throw new TimedOut();
      await sleep(POLL_MS);
    }
    this.token = token;
    const hold = { until: start + this.ttlMs, timer: null };
    hold.timer = setInterval(() => this.renew(hold), this.ttlMs / 3);
    this.hold = hold;
    await this.reportSession();
    return { session: '0x' + this.session.toString(16), keys: [this.name], value: token };
  }

  // renew sets the hold's TTL again, while the key holds its token; lost when it does
  // not, or when no renewal got through within the TTL.
  async renew(hold) {
    if (this.hold !== hold) return;
    if (performance.now() >= hold.until) return this.lose(hold, 'its TTL ran out while held: no renewal got through');
    const begun = performance.now();
    let renewed;
    try {
      renewed = await this.client.eval(RENEW, 1, this.name, this.token, this.ttlMs);
    } catch (e) {
      return; // try again at the next third; the validity decides
    }
    if (renewed !== 1) return this.lose(hold, "the lock's key is gone or holds another's token");
    if (this.hold !== hold) return; // released meanwhile
    hold.until = Math.max(hold.until, begun + this.ttlMs);
    this.events.renewed();
  }

  lose(hold, why) {
    if (this.hold !== hold) return; // released meanwhile
    clearInterval(hold.timer);
    this.hold = null;
    this.events.lost(why);
  }

  async release() {
    const hold = this.hold;
    if (hold === null) throw new NotHeld('not held: it was lost');
    clearInterval(hold.timer);
    this.hold = null;
    if ((await this.client.eval(RELEASE, 1, this.name, this.token)) !== 1) {
      throw new NotHeld("not held: the key was gone or another holder's");
    }
  }

  async close() {
    if (this.hold !== null) clearInterval(this.hold.timer);
    this.hold = null;
    this.client.disconnect();
  }
}

serve(new RedisLock());
