// An example zlockcheck worker: a PostgreSQL advisory lock with node-postgres (pg).
//
//   zlockcheck conformance --service postgres --worker-cmd "node examples/workers/pg_advisory.js"
//   zlockcheck run --service postgres --recipe exec --worker-cmd "node examples/workers/pg_advisory.js"
//
// pg_advisory_lock(k1, k2) on one dedicated pg.Client, the acquire's timeout as
// lock_timeout, pg_advisory_unlock(k1, k2) to release. The key is the lock's name
// (init's path) hashed with FNV-1a (64 bits), in its two-int form: the high and the
// low 32 bits (a JavaScript number holds neither a bigint nor a JSON one exactly). The lock goes with the connection, so
// the worker watches it: a SELECT 1 every third of session_timeout_ms while it holds,
// and lost when that fails or the client reports an error or its end. The session is
// the backend pid; the acquire says where the lock lives: that session and the key.
//
// init's connect is one libpq URL whose hosts (a primary, a standby) are separated by
// commas. node-postgres takes one host: the worker connects to the first, the
// primary (after a failover it would need the next; libpq-based clients follow it
// with target_session_attrs=read-write).
'use strict';

const { Client } = require('pg');
const { serve, TimedOut, NotHeld } = require('./zlcworker');

// advisoryKey is FNV-1a (64 bits) of name as two signed 32-bit ints, high first.
function advisoryKey(name) {
  let h = 0xcbf29ce484222325n;
  for (const b of Buffer.from(name)) {
    h = BigInt.asUintN(64, (h ^ BigInt(b)) * 0x100000001b3n);
  }
  return [Number(BigInt.asIntN(32, h >> 32n)), Number(BigInt.asIntN(32, h))];
}

// firstHost is the URL with only its first host: postgres://u@h1:p1,h2:p2/db -> h1:p1.
function firstHost(url) {
  return url.replace(/^(postgres(?:ql)?:\/\/(?:[^@/]*@)?)([^,/]*)(?:,[^/]*)?/, '$1$2');
}

class PgAdvisoryLock {
  async open(init, events) {
    this.events = events;
    this.url = firstHost(init.connect);
    this.timeoutMs = init.session_timeout_ms;
    this.key = advisoryKey(init.path);
    this.holding = false;
    this.client = null;
    await this.connect();
    this.heartbeat = setInterval(() => this.ping(), this.timeoutMs / 3);
  }

  // connect makes a new dedicated client, reported as a new session.
  async connect() {
    if (this.client) this.client.end().catch(() => {});
    const client = new Client({ connectionString: this.url, connectionTimeoutMillis: this.timeoutMs, keepAlive: true });
    client.on('error', (e) => this.lose('the connection that holds the lock failed: ' + e.message));
    client.on('end', () => this.lose('the connection that holds the lock ended'));
    await client.connect();
    this.client = client;
    this.broken = false;
    const { rows } = await client.query('SELECT pg_backend_pid() AS pid');
    this.pid = rows[0].pid;
    this.events.session(this.pid);
  }

  lose(why) {
    this.broken = true;
    if (this.holding) {
      this.holding = false;
      this.events.lost(why);
    }
  }

  async ping() {
    if (!this.holding) return;
    try {
      await this.client.query('SELECT 1');
    } catch (e) {
      this.lose('the connection that holds the lock failed: ' + e.message);
    }
  }

  async acquire(timeoutMs) {
    if (this.broken) await this.connect();
    await this.client.query("SELECT set_config('lock_timeout', $1, false)", [String(timeoutMs === null ? 0 : Math.max(1, timeoutMs))]);
    try {
      await this.client.query('SELECT pg_advisory_lock($1, $2)', this.key);
    } catch (e) {
      if (e.code === '55P03') throw new TimedOut(); // lock_not_available
      throw e;
    }
    this.holding = true;
    return { session: '0x' + this.pid.toString(16), advisory: this.key };
  }

  async release() {
    if (!this.holding) throw new NotHeld('not held: its session was lost');
    this.holding = false;
    const { rows } = await this.client.query('SELECT pg_advisory_unlock($1, $2) AS freed', this.key);
    if (!rows[0].freed) throw new NotHeld('pg_advisory_unlock: not held by this session');
  }

  async close() {
    clearInterval(this.heartbeat);
    this.holding = false;
    if (this.client) await this.client.end().catch(() => {});
  }
}

serve(new PgAdvisoryLock());
