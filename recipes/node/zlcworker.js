// The worker protocol (v2 and v1, docs/protocol.md) for the Node workers of recipes/node.
//
// One implementation every such worker shares, as recipes/python/zlcworker.py is the
// Python workers' and recipes/jvm/ZlcWorker.java the JVM workers': a worker is a
// script that hands serve() a recipe (its library behind four calls) and this module
// does the rest.
//
// stdin carries the harness's requests, stdout only protocol lines (replies and
// events, one JSON object a line, written synchronously), stderr every log line
// (console.* and process.stdout.write are pointed at it, so that a library's stray
// output cannot corrupt the protocol). Requests are answered one at a time, in order:
// the next is not read from the queue before the last was answered.
//
// A recipe is an object with async methods:
//
// - init(init, events): connect as init (an Init) says; throw Refused for a
//   configuration it does not run (a kind it does not speak), anything else when the
//   servers may be unreachable for now.
// - acquire(timeoutMs, mode): take the lock within timeoutMs (0: no limit), in mode
//   (the rwlock kind's "read" or "write", else null); return { token, lock } (each
//   optional: a fencing token, where the lock lives), or null when the time ran out.
// - release(): release the innermost hold; throw NotHeld when none was left.
// - close(): end the client and its connections (called once, at close or EOF).
// - and, for the counter workload, read() (the counter's value, 0 when never
//   written) and write(value), called only while holding.
//
// How each request is answered:
//
// - init: ok, fail (Refused) or info (anything else). After a fail or info it may be
//   sent again; after an ok it may not. The harness's offer of protocol 2 or 3 is
//   answered "protocol":2 on an ok. Events the recipe reports during init are written
//   after the ok, and dropped when init did not succeed.
// - acquire: ok (with the token and the lock's place when the recipe gives them),
//   fail "timeout" when it returned null.
// - release, read: ok (read: with the value).
// - write: ok; an error other than a refusal is retried for init's write_retry_ms,
//   100 ms apart (its outcome is unknown, and writing the same value again is
//   harmless), then answers info; a refusal after such a retry answers info too.
// - clock (v2): ok with mono_ns (process.hrtime, from the module's load).
// - cycle (v2): acquire depth times, hold hold_us, release as often as acquired,
//   reporting each step on the cycle's id as it happens (an invoke report before the
//   call, an outcome report after it, each stamped mono_ns), then the reply ok. It
//   ends early after the first acquire's fail, any info, or a failed release; a
//   nested acquire that fails ends the acquiring (the levels held are held and
//   released); a lost event while holding with nothing in flight ends it with no
//   release.
// - close: close() (bounded to 1.5 s), then ok and exit 0. EOF on stdin does the same
//   without a reply; a request still running 200 ms after EOF is abandoned.
//
// Events the recipe reports while a request other than a cycle runs (a lease that ran
// out as its acquire returned) are written right after the request's reply: the
// harness ignores an event while a request is in flight, and reads one after an
// acquire's ok as that hold's end.
//
// In every request NotHeld answers fail "not held: ...", Refused fail with its
// message, Fenced fail "fenced: ...", Unknown info with its message, and any other
// error info. A line that is not a JSON object, an unknown op, an op before an init
// that succeeded or an init after one: exit 1 without a reply.
//
// Events: a recipe reports events.lost(why) when its library tells it (or it can
// compute) that the lock is gone, events.session(id) for a new server-side session (a
// number, written 0x and hex, or a string as it is), events.renewed() when a renewal
// found the lease still its own. Node runs one thread: an event and a step report are
// never interleaved, and the order the harness reads is the order the worker decided
// in.
//
// What Node does to its users' processes is left as it is: an error a library lets
// escape (an unhandled rejection, an uncaught exception) ends the process with a
// stack trace on stderr, which the harness sees as a crash.
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const readline = require('node:readline');
const util = require('node:util');

/** A request refused, certainly without effect: answered fail with its message. */
class Refused extends Error {}
/** A request whose outcome the recipe cannot know: answered info with its message. */
class Unknown extends Error {}
/** Nothing was held (a lease ran out): answered fail "not held: why". */
class NotHeld extends Error {}
/** A fenced read or write was refused: answered fail "fenced: why". */
class Fenced extends Error {}
/** A request line out of the protocol: the worker exits 1 without a reply. */
class ProtocolError extends Error {}

// The origin of mono_ns: the module's load (the protocol takes any origin; a
// difference keeps the number well inside a double's exact integers).
const ORIGIN = process.hrtime.bigint();

/** monoNs is the worker's monotonic clock in ns. */
function monoNs() {
  return Number(process.hrtime.bigint() - ORIGIN);
}

function log(level, msg) {
  const t = new Date().toISOString().slice(11, 23);
  process.stderr.write(`${t} ${level} zlc.worker: ${msg}\n`);
}

function str(req, k) {
  const v = req[k];
  if (typeof v !== 'string') throw new ProtocolError(`field ${k}: want a string`);
  return v;
}

function num(req, k, dflt) {
  if (!(k in req) && dflt !== undefined) return dflt;
  const v = req[k];
  if (!Number.isInteger(v)) throw new ProtocolError(`field ${k}: want an integer`);
  return v;
}

function mode(req) {
  return 'mode' in req ? str(req, 'mode') : null;
}

/** What init says: the fields every service's init has (docs/protocol.md). */
class Init {
  constructor(req) {
    this.connect = str(req, 'connect').split(',');
    this.sessionTimeoutMs = num(req, 'session_timeout_ms');
    this.path = str(req, 'path');
    this.kind = str(req, 'kind');
    this.permits = num(req, 'permits', 1);
    this.fenced = req.fenced === true;
    this.counterPath = 'counter_path' in req ? str(req, 'counter_path') : null;
    this.writeRetryMs = num(req, 'write_retry_ms', 8000);
    this.worker = num(req, 'worker', 0);
    // Redis's sentinel topology: connect names the sentinels, and this the name they
    // know the primary by (null on any other).
    this.sentinelMaster = 'sentinel_master' in req ? str(req, 'sentinel_master') : null;
    // Redis's cluster topology: connect names a Redis Cluster's instances. No recipe
    // here follows a cluster's slots yet: init refuses it.
    this.redisCluster = req.redis_cluster === true;
  }
}

const EOF = Symbol('EOF');
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

class Worker {
  constructor(recipe, outFd) {
    this.recipe = recipe;
    this.outFd = outFd;
    this.lines = [];
    this.wake = null; // resolves the main loop's wait for a line
    this.busy = false;
    this.initTried = false;
    this.initialized = false;
    this.protocol = 1;
    this.writeRetryMs = 8000;
    this.deferred = null; // events held back while a request runs
    this.lostSeq = 0;
    this.lostWaiters = new Set();
    this.closing = null;
    const w = this;
    this.events = {
      lost(why) {
        log('WARNING', `lost: ${why}`);
        w.event({ event: 'lost', error: String(why) });
        w.lostSeq += 1;
        for (const f of w.lostWaiters) f();
      },
      session(id, passwd) {
        const ev = { event: 'session', session_id: typeof id === 'string' ? id : '0x' + id.toString(16) };
        if (passwd != null) ev.passwd = passwd;
        log('INFO', `session ${ev.session_id}`);
        w.event(ev);
      },
      renewed() {
        w.event({ event: 'renewed' });
      },
    };
  }

  // ---------------------------------------------------------------- output

  emit(obj) {
    const buf = Buffer.from(JSON.stringify(obj) + '\n');
    let off = 0;
    while (off < buf.length) {
      try {
        off += fs.writeSync(this.outFd, buf, off);
      } catch (e) {
        if (e.code === 'EAGAIN') continue; // a full pipe the harness is draining
        log('WARNING', `writing to stdout failed: ${e.message}`);
        return;
      }
    }
  }

  event(obj) {
    if (this.deferred !== null) this.deferred.push(obj);
    else this.emit(obj);
  }

  reply(id, r) {
    this.emit({ id, ...r });
  }

  // ---------------------------------------------------------------- serving

  push(line) {
    this.lines.push(line);
    if (this.wake) {
      const f = this.wake;
      this.wake = null;
      f();
    }
  }

  async next() {
    while (this.lines.length === 0) await new Promise((resolve) => (this.wake = resolve));
    return this.lines.shift();
  }

  async run() {
    const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    rl.on('line', (l) => this.push(l));
    rl.on('close', () => {
      this.push(EOF);
      this.watchEOF();
    });
    for (;;) {
      const line = await this.next();
      if (line === EOF) {
        log('INFO', 'stdin closed; closing');
        await this.shutdown(0, null);
      }
      if (!line.trim()) continue;
      this.busy = true;
      try {
        await this.handle(line);
      } catch (e) {
        if (e instanceof ProtocolError) {
          log('ERROR', `malformed or out-of-protocol request line ${line.slice(0, 300)}: ${e.message}`);
        } else {
          log('ERROR', `internal error on request line ${line.slice(0, 300)}: ${e.stack || e}`);
        }
        await this.shutdown(1, null);
      } finally {
        this.busy = false;
      }
    }
  }

  // watchEOF lets the main loop answer the requests read before EOF, then close; one
  // still running 200 ms after EOF is abandoned: nobody is left to read its reply.
  watchEOF() {
    let ticks = 0;
    const timer = setInterval(() => {
      if (this.lines.length === 0 && !this.busy) {
        clearInterval(timer); // the main loop took EOF
        return;
      }
      if (!this.busy) {
        ticks = 0;
        return;
      }
      if (++ticks >= 4) {
        clearInterval(timer);
        log('INFO', 'stdin closed while a request runs; closing');
        this.shutdown(0, null);
      }
    }, 50);
  }

  async handle(line) {
    let req;
    try {
      req = JSON.parse(line);
    } catch (e) {
      throw new ProtocolError(`not JSON: ${e.message}`);
    }
    if (req === null || typeof req !== 'object' || Array.isArray(req)) throw new ProtocolError('not one JSON object');
    const id = num(req, 'id');
    const op = str(req, 'op');
    if (!this.initialized && op !== 'init' && op !== 'close') throw new ProtocolError(`${op} before an init that succeeded`);
    const t0 = performance.now();
    switch (op) {
      case 'init':
        if (this.initialized) throw new ProtocolError('init after an init that succeeded');
        return this.init(id, req);
      case 'acquire': {
        const timeout = num(req, 'timeout_ms');
        const m = mode(req);
        return this.request(id, 'acquire', t0, () => this.acquire(timeout, m));
      }
      case 'release':
        return this.request(id, op, t0, () => this.release());
      case 'read':
        this.counter(op);
        return this.request(id, op, t0, async () => ({ type: 'ok', value: await this.recipe.read() }));
      case 'write': {
        this.counter(op);
        const value = num(req, 'value');
        return this.request(id, `write ${value}`, t0, () => this.writeRetrying(value));
      }
      case 'clock':
      case 'cycle':
        if (this.protocol < 2) throw new ProtocolError(`${op} is protocol v2, and init agreed v1`);
        if (op === 'clock') return this.reply(id, { type: 'ok', mono_ns: monoNs() });
        await this.cycle(id, num(req, 'timeout_ms'), mode(req), Math.max(num(req, 'hold_us', 0), 0), Math.max(num(req, 'depth', 1), 1));
        return this.reply(id, { type: 'ok' });
      case 'close':
        return this.shutdown(0, id);
      default:
        throw new ProtocolError(`unknown op ${op}`);
    }
  }

  async init(id, req) {
    const init = new Init(req);
    this.writeRetryMs = init.writeRetryMs;
    const offered = Number.isInteger(req.protocol) && req.protocol >= 2;
    this.deferred = [];
    this.initTried = true;
    const t0 = performance.now();
    const r = await this.call(async () => {
      if (init.redisCluster) {
        throw new Refused('init: redis_cluster: the Node workers have no Redis Cluster mode yet (docs/redis.md)');
      }
      await this.recipe.init(init, this.events);
      return offered ? { type: 'ok', protocol: 2 } : { type: 'ok' };
    });
    const ok = r.type === 'ok';
    if (ok) {
      this.initialized = true;
      this.protocol = offered ? 2 : 1;
    }
    log('INFO', `request ${id}: init -> ${r.type}${r.error ? ` (${r.error})` : ''} (protocol v${this.protocol}, ${Math.round(performance.now() - t0)} ms)`);
    const held = this.deferred;
    this.deferred = null;
    this.reply(id, r);
    if (ok) for (const ev of held) this.emit(ev);
  }

  // request runs a plain request: events the recipe reports meanwhile come after its
  // reply.
  async request(id, what, t0, body) {
    this.deferred = [];
    const r = await this.call(body);
    let extra = '';
    if ('token' in r) extra = ` token ${r.token}`;
    else if ('value' in r) extra = ` value ${r.value}`;
    log('INFO', `request ${id}: ${what} -> ${r.type}${r.error ? ` (${r.error})` : ''}${extra} (${Math.round(performance.now() - t0)} ms)`);
    const held = this.deferred;
    this.deferred = null;
    this.reply(id, r);
    for (const ev of held) this.emit(ev);
  }

  counter(op) {
    if (typeof this.recipe.read !== 'function' || typeof this.recipe.write !== 'function') {
      throw new ProtocolError(`${op}: the recipe has no counter workload`);
    }
  }

  // ---------------------------------------------------------------- requests

  // call runs body: its reply, fail for a refusal or nothing held, else info.
  async call(body) {
    try {
      return await body();
    } catch (e) {
      if (e instanceof Refused) return { type: 'fail', error: e.message };
      if (e instanceof Fenced) return { type: 'fail', error: `fenced: ${e.message}` };
      if (e instanceof NotHeld) return { type: 'fail', error: `not held: ${e.message}` };
      if (e instanceof Unknown) return { type: 'info', error: e.message };
      log('WARNING', `request failed: ${(e && e.stack) || e}`);
      const name = (e && e.name) || 'Error';
      return { type: 'info', error: `${name}: ${e && e.message !== undefined ? e.message : e}` };
    }
  }

  async acquire(timeoutMs, m) {
    const a = await this.recipe.acquire(timeoutMs, m);
    if (a == null) return { type: 'fail', error: 'timeout' };
    const r = { type: 'ok' };
    if (a.token != null) r.token = a.token;
    if (a.lock != null) r.lock = a.lock;
    return r;
  }

  async release() {
    await this.recipe.release();
    return { type: 'ok' };
  }

  // writeRetrying writes value, again every 100 ms while its outcome is unknown, for
  // write_retry_ms.
  async writeRetrying(value) {
    const end = performance.now() + this.writeRetryMs;
    for (let attempt = 0; ; attempt++) {
      try {
        await this.recipe.write(value);
        return { type: 'ok' };
      } catch (e) {
        if (e instanceof Fenced || e instanceof Refused || e instanceof NotHeld) {
          if (attempt === 0) throw e;
          const what = (e instanceof Fenced ? 'fenced: ' : e instanceof NotHeld ? 'not held: ' : '') + e.message;
          throw new Unknown(`${what} (after ${attempt} attempts whose outcome is unknown)`);
        }
        if (performance.now() + 100 >= end) throw e;
        log('INFO', `write of unknown outcome, again in 100 ms: ${e.message}`);
        await sleep(100);
      }
    }
  }

  // ---------------------------------------------------------------- cycle (v2)

  step(id, f, outcome) {
    const line = { id, step: outcome === null ? 'invoke' : outcome.type, f, mono_ns: monoNs() };
    if (outcome !== null) {
      for (const [k, v] of Object.entries(outcome)) if (k !== 'type') line[k] = v;
    }
    this.emit(line);
  }

  async cycle(id, timeoutMs, m, holdUs, depth) {
    let held = 0;
    let seq;
    for (;;) {
      this.step(id, 'acquire', null);
      const r = await this.call(() => this.acquire(timeoutMs, m));
      // The report and seq together: a lost event the recipe reported before this
      // point came while the acquire was in flight (its outcome decides).
      this.step(id, 'acquire', r);
      seq = this.lostSeq;
      if (r.type === 'ok') {
        held++;
        if (held < depth) continue;
        break;
      }
      if (r.type === 'info' || held === 0) return;
      break; // a nested acquire failed: hold and release the levels held
    }
    if (!(await this.holdUnlessLost(holdUs, seq))) return;
    while (held > 0) {
      if (this.lostSeq !== seq) return;
      this.step(id, 'release', null);
      const r = await this.call(() => this.release());
      this.step(id, 'release', r);
      seq = this.lostSeq;
      if (r.type !== 'ok') return;
      held--;
    }
  }

  // holdUnlessLost holds for us microseconds (by the monotonic clock: a timer may fire
  // early by a fraction of its millisecond) unless a lost event is written (lostSeq
  // moves past seq); it reports whether the hold ran its course.
  async holdUnlessLost(us, seq) {
    const end = process.hrtime.bigint() + BigInt(Math.round(us * 1000));
    while (this.lostSeq === seq) {
      const left = Number(end - process.hrtime.bigint()) / 1e6;
      if (left <= 0) return true;
      let wake;
      const woken = new Promise((resolve) => (wake = resolve));
      this.lostWaiters.add(wake);
      const timer = setTimeout(wake, Math.ceil(left));
      await woken;
      clearTimeout(timer);
      this.lostWaiters.delete(wake);
    }
    return false;
  }

  // ---------------------------------------------------------------- closing

  // shutdown closes the recipe (bounded to 1.5 s), writes close's reply if any and
  // exits; a second call waits for the first's exit.
  shutdown(code, closeId) {
    if (this.closing) return this.closing;
    this.closing = (async () => {
      let finished = true;
      if (this.initTried) {
        const done = Promise.resolve()
          .then(() => this.recipe.close())
          .then(() => true, (e) => {
            log('WARNING', `closing: ${e && e.message}`);
            return true;
          });
        let timer;
        finished = await Promise.race([done, new Promise((resolve) => (timer = setTimeout(() => resolve(false), 1500)))]);
        clearTimeout(timer);
      }
      if (closeId !== null) {
        this.reply(closeId, finished ? { type: 'ok' } : { type: 'info', error: 'closing did not finish within 1.5s' });
      }
      process.exit(code);
    })();
    return this.closing;
  }
}

/**
 * serve serves recipe on stdin/stdout until close or EOF; it never returns. Call it
 * first thing: it points console.* and process.stdout.write at stderr, so that only
 * protocol lines reach file descriptor 1.
 */
function serve(recipe) {
  const toStderr = (...args) => process.stderr.write(args.map((a) => (typeof a === 'string' ? a : util.inspect(a))).join(' ') + '\n');
  console.log = console.info = console.debug = console.warn = console.error = toStderr;
  process.stdout.write = (chunk, encoding, cb) => process.stderr.write(chunk, encoding, cb);
  return new Worker(recipe, 1).run();
}

/**
 * main is a worker script's main: it serves make() when its one argument is one of
 * recipes, else prints its usage and exits 2.
 */
function main(recipes, make) {
  const args = process.argv.slice(2);
  if (args.length !== 1 || !recipes.includes(args[0])) {
    process.stderr.write(`usage: node ${path.basename(process.argv[1] || 'worker.js')} RECIPE (one of ${recipes.join(', ')})\n`);
    process.exit(2);
  }
  return serve(make());
}

module.exports = { serve, main, monoNs, Init, Refused, Unknown, NotHeld, Fenced };
