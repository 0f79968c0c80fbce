// An example zlockcheck worker: a Redis lock on ioredis, as Redis's lock page has it.
//
//   zlockcheck conformance --service redis --worker-cmd "node examples/workers/redis_lock.js"
//   zlockcheck run --service redis --recipe exec --worker-cmd "node examples/workers/redis_lock.js"
//
// SET name token NX PX ttl to take it (a random token), a Lua compare-and-delete to
// release it; the TTL is init's session_timeout_ms. ioredis keeps its defaults, as an
// application has them (reconnection, an offline queue, and the re-sending of
// commands in flight after a reconnection), but for a command timeout of one TTL, so
// that no request waits for ever. Redis tells a holder nothing when its lease ends;
// the worker reports lost when the validity it set runs out while it still holds
// (timed from before the SET that took it). Its one connection's CLIENT ID is the
// session, and the acquire says where the lock lives: the key, the token, that
// connection.
'use strict';

const crypto = require('node:crypto');
const Redis = require('ioredis');
const { serve, TimedOut, NotHeld } = require('./zlcworker');

const POLL_MS = 10;
const RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

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
      commandTimeout: this.ttlMs, lazyConnect: true });
    this.client.on('error', (e) => process.stderr.write('ioredis: ' + e.message + '\n'));
    await this.client.connect();
    this.session = null;
    this.timer = null;
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
    this.timer = setTimeout(() => {
      this.timer = null;
      this.events.lost("the lock's TTL ran out while held");
    }, Math.max(0, start + this.ttlMs - performance.now()));
    await this.reportSession();
    return { session: '0x' + this.session.toString(16), keys: [this.name], value: token };
  }

  async release() {
    if (this.timer === null) throw new NotHeld('not held: its TTL ran out');
    clearTimeout(this.timer);
    this.timer = null;
    if ((await this.client.eval(RELEASE, 1, this.name, this.token)) !== 1) {
      throw new NotHeld('not held: the key was gone or another holder\'s');
    }
  }

  async close() {
    if (this.timer !== null) clearTimeout(this.timer);
    this.client.disconnect();
  }
}

serve(new RedisLock());
