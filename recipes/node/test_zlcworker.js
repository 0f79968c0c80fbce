// Tests of zlcworker.js, the worker protocol of recipes/node, through a real node
// process.
//
// The recipe behind the protocol here is a fake, in this test only (FAKE below): a lock
// in the worker's memory whose behaviour each request's timeout picks, so that every
// answer of the protocol can be asked for. The real recipes are tested against real
// servers (zlockcheck conformance, cmd/zlockcheck's end-to-end tests). No library
// from npm is needed.
//
//     node recipes/node/test_zlcworker.js     exit 0 when every check passed
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const readline = require('node:readline');

// The fake recipe: acquire's timeout_ms says what happens (1: time runs out, 2:
// refused, 3: unknown outcome, 4: ok, then lost 50 ms later, 5: ok, lost before it
// returns, 6: a library error); init's kind "refuse" is refused; write fails with an
// unknown outcome once, then as write's value says.
const FAKE = (closed) => `
'use strict';
const zlc = require(${JSON.stringify(path.join(__dirname, 'zlcworker.js'))});
class Fake {
  constructor() { this.held = 0; this.writes = 0; }
  async init(init, events) {
    if (init.kind === 'refuse') throw new zlc.Refused('kind refuse is refused');
    this.events = events;
    console.log('a stray console.log, which must not reach the protocol');
    process.stdout.write('a stray stdout write\\n');
    events.session(42, 'cGFzcw==');
  }
  async acquire(timeoutMs, mode) {
    if (timeoutMs === 1) return null;
    if (timeoutMs === 2) throw new zlc.Refused('no such acquire');
    if (timeoutMs === 3) throw new zlc.Unknown('the reply was lost');
    if (timeoutMs === 6) throw new TypeError('a library error');
    this.held++;
    if (timeoutMs === 4) setTimeout(() => this.events.lost('gone'), 50);
    if (timeoutMs === 5) this.events.lost('ran out as it was granted');
    return { token: this.held, lock: { keys: ['k'], value: 'v', mode } };
  }
  async release() {
    if (this.held === 0) throw new zlc.NotHeld('nothing held');
    this.held--;
  }
  async read() { return 7; }
  async write(value) {
    this.writes++;
    if (this.writes === 1) throw new Error('reset');
    if (value === 13) throw new zlc.Fenced('older token');
  }
  async close() { require('node:fs').writeFileSync(${JSON.stringify(closed)}, 'closed'); }
}
zlc.serve(new Fake());
`;

class Worker {
  constructor(t) {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zlc-nodetest-'));
    this.closed = path.join(dir, 'closed');
    const script = path.join(dir, 'fake.js');
    fs.writeFileSync(script, FAKE(this.closed));
    this.p = spawn(process.execPath, [script], { stdio: ['pipe', 'pipe', 'ignore'] });
    this.exited = new Promise((resolve) => this.p.on('exit', (code) => resolve(code)));
    this.queue = [];
    this.waiters = [];
    this.out = '';
    this.p.stdout.setEncoding('utf8');
    this.p.stdout.on('data', (d) => (this.out += d));
    readline.createInterface({ input: this.p.stdout }).on('line', (l) => {
      const w = this.waiters.shift();
      if (w) w(l);
      else this.queue.push(l);
    });
    this.nextId = 0;
    t.after(() => {
      if (this.p.exitCode === null) this.p.kill('SIGKILL');
      fs.rmSync(dir, { recursive: true, force: true });
    });
  }

  send(line) {
    this.p.stdin.write(line + '\n');
  }

  req(op, fields = {}) {
    this.nextId++;
    this.send(JSON.stringify({ id: this.nextId, op, ...fields }));
    return this.nextId;
  }

  async line() {
    const l = this.queue.length > 0 ? this.queue.shift() : await Promise.race([
      new Promise((resolve) => this.waiters.push(resolve)),
      new Promise((_, reject) => setTimeout(() => reject(new Error('no line from the worker within 5 s')), 5000).unref()),
    ]);
    return JSON.parse(l);
  }

  async call(op, fields) {
    const id = this.req(op, fields);
    const r = await this.line();
    assert.equal(r.id, id, JSON.stringify(r));
    return r;
  }

  init(fields = {}) {
    return this.call('init', { connect: 'h:1', session_timeout_ms: 1000, path: '/l', kind: 'mutex', protocol: 3, ...fields });
  }

  async exit() {
    return Promise.race([this.exited, new Promise((_, reject) => setTimeout(() => reject(new Error('the worker did not exit within 5 s')), 5000).unref())]);
  }
}

test('requests', async (t) => {
  const w = new Worker(t);
  assert.deepEqual(await w.init({ kind: 'refuse' }), { id: 1, type: 'fail', error: 'kind refuse is refused' });
  // A failed init may be sent again; the session the recipe reports comes after
  // init's ok, never before it, and nothing else reaches stdout.
  assert.deepEqual(await w.init(), { id: 2, type: 'ok', protocol: 2 });
  assert.deepEqual(await w.line(), { event: 'session', session_id: '0x2a', passwd: 'cGFzcw==' });
  assert.deepEqual(await w.call('acquire', { timeout_ms: 10 }),
    { id: 3, type: 'ok', token: 1, lock: { keys: ['k'], value: 'v', mode: null } });
  assert.deepEqual(await w.call('release'), { id: 4, type: 'ok' });
  assert.deepEqual(await w.call('release'), { id: 5, type: 'fail', error: 'not held: nothing held' });
  assert.deepEqual(await w.call('acquire', { timeout_ms: 1 }), { id: 6, type: 'fail', error: 'timeout' });
  assert.deepEqual(await w.call('acquire', { timeout_ms: 2 }), { id: 7, type: 'fail', error: 'no such acquire' });
  assert.deepEqual(await w.call('acquire', { timeout_ms: 3 }), { id: 8, type: 'info', error: 'the reply was lost' });
  assert.deepEqual(await w.call('acquire', { timeout_ms: 6 }), { id: 9, type: 'info', error: 'TypeError: a library error' });
  assert.equal((await w.call('acquire', { timeout_ms: 10, mode: 'read' })).lock.mode, 'read');
  assert.deepEqual(await w.call('read'), { id: 11, type: 'ok', value: 7 });
  // The first write's outcome is unknown, so the fenced refusal after its retry is
  // unknown too: the first attempt may have been applied.
  const r = await w.call('write', { value: 13 });
  assert.equal(r.type, 'info');
  assert.match(r.error, /fenced: older token \(after 1 attempts whose outcome is unknown\)/);
  assert.deepEqual(await w.call('write', { value: 14 }), { id: 13, type: 'ok' });
  assert.ok((await w.call('clock')).mono_ns > 0);
  // A loss reported while the acquire runs comes after its reply, where the harness
  // reads it as that hold's end.
  assert.equal((await w.call('acquire', { timeout_ms: 5 })).type, 'ok');
  assert.deepEqual(await w.line(), { event: 'lost', error: 'ran out as it was granted' });
  assert.deepEqual(await w.call('close'), { id: 16, type: 'ok' });
  assert.equal(await w.exit(), 0);
  assert.ok(fs.existsSync(w.closed), 'close did not close the recipe');
  assert.doesNotMatch(w.out, /stray/);
});

test('redis_cluster refused', async (t) => {
  // No Node recipe follows a Redis Cluster's slots yet: an init naming one fails
  // before the recipe connects anywhere.
  const w = new Worker(t);
  assert.deepEqual(await w.init({ redis_cluster: true }),
    { id: 1, type: 'fail', error: 'init: redis_cluster: the Node workers have no Redis Cluster mode yet (docs/redis.md)' });
  assert.deepEqual(await w.init(), { id: 2, type: 'ok', protocol: 2 });
});

test('cycle', async (t) => {
  const w = new Worker(t);
  await w.init();
  await w.line(); // the session
  let id = w.req('cycle', { timeout_ms: 10, hold_us: 1000, depth: 2 });
  const steps = [];
  for (let i = 0; i < 8; i++) steps.push(await w.line());
  assert.deepEqual(steps.map((s) => [s.step, s.f]), [['invoke', 'acquire'], ['ok', 'acquire'], ['invoke', 'acquire'], ['ok', 'acquire'],
    ['invoke', 'release'], ['ok', 'release'], ['invoke', 'release'], ['ok', 'release']]);
  assert.ok(steps.every((s) => s.id === id));
  const stamps = steps.map((s) => s.mono_ns);
  assert.deepEqual(stamps, [...stamps].sort((a, b) => a - b));
  assert.ok(stamps[4] - stamps[3] >= 1_000_000, `held ${stamps[4] - stamps[3]} ns, less than hold_us`);
  assert.equal(steps[1].token, 1);
  assert.deepEqual(await w.line(), { id, type: 'ok' });
  // A lost event while holding ends the cycle with no release.
  id = w.req('cycle', { timeout_ms: 4, hold_us: 2_000_000 });
  assert.deepEqual([(await w.line()).step, (await w.line()).step], ['invoke', 'ok']);
  assert.deepEqual(await w.line(), { event: 'lost', error: 'gone' });
  assert.deepEqual(await w.line(), { id, type: 'ok' });
  // A first acquire that fails ends the cycle; so does one of unknown outcome.
  id = w.req('cycle', { timeout_ms: 1 });
  assert.deepEqual([(await w.line()).step, (await w.line()).step], ['invoke', 'fail']);
  assert.deepEqual(await w.line(), { id, type: 'ok' });
  id = w.req('cycle', { timeout_ms: 3 });
  assert.deepEqual([(await w.line()).step, (await w.line()).step], ['invoke', 'info']);
  assert.deepEqual(await w.line(), { id, type: 'ok' });
  w.p.stdin.end(); // EOF: close, exit 0
  assert.equal(await w.exit(), 0);
  assert.ok(fs.existsSync(w.closed));
});

test('v1 has no cycle', async (t) => {
  const w = new Worker(t);
  assert.deepEqual(await w.init({ protocol: undefined }), { id: 1, type: 'ok' });
  await w.line();
  w.req('clock');
  assert.equal(await w.exit(), 1);
  assert.equal(w.queue.length, 0);
});

test('protocol errors', async (t) => {
  const init = '{"id":1,"op":"init","connect":"h:1","session_timeout_ms":1,"path":"/l","kind":"mutex"}';
  for (const lines of [['{"id":1,"op":"acquire","timeout_ms":1}'], // before init
    ['not json'], ['[1]'], ['{"id":1,"op":"frob"}'], ['{"id":"1","op":"init"}'],
    [init, init.replace('"id":1', '"id":2')]]) {
    const w = new Worker(t);
    for (const l of lines) w.send(l);
    assert.equal(await w.exit(), 1, JSON.stringify(lines));
    // Only the first init of the last case is answered (ok, then its session).
    assert.equal((w.out.match(/"id":/g) || []).length, lines.length === 2 ? 1 : 0, JSON.stringify([lines, w.out]));
  }
});

test('usage', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'zlc-nodetest-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const script = path.join(dir, 'w.js');
  fs.writeFileSync(script, `require(${JSON.stringify(path.join(__dirname, 'zlcworker.js'))}).main(['a-recipe'], () => ({}));`);
  const p = spawn(process.execPath, [script, 'another'], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr.on('data', (d) => (err += d));
  const code = await new Promise((resolve) => p.on('exit', resolve));
  assert.equal(code, 2);
  assert.match(err, /usage: node w\.js RECIPE \(one of a-recipe\)/);
});
