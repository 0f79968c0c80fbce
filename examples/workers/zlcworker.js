// The zlockcheck worker protocol, version 1, for an example worker in JavaScript.
//
// A worker is a program zlockcheck starts once per client process; it reads requests
// on stdin and answers on stdout, one JSON object per line (docs/protocol.md). This
// module is the protocol; a worker supplies the lock, an object with:
//
// - async open(init, events): connect to init.connect (the service's own format,
//   docs/protocol.md#what-init-means-on-each-service); throw Refused for what it
//   cannot do;
// - async acquire(timeoutMs): take the lock within timeoutMs (null: as long as it
//   takes); return where it lives (the acquire's "lock", or null); throw TimedOut
//   when it was not taken, anything else when it may have been (info);
// - async release(): throw NotHeld when the lock was not held, anything else when
//   the release may not have happened (info);
// - async close(): end the session.
//
// events.session(id) reports the server-side id of a new connection (a number),
// events.lost(why) that the lock is no longer held, events.renewed() that a renewal
// found the lease still this worker's and renewed it (optional).
'use strict';

const readline = require('node:readline');
const fs = require('node:fs');

class Refused extends Error {}
class TimedOut extends Error {}
class NotHeld extends Error {}

// Every op a request may name; anything else is a protocol error.
const OPS = new Set(['init', 'acquire', 'release', 'close', 'read', 'write', 'clock', 'cycle']);

// write sends one line to the harness, synchronously (so nothing is lost at exit).
function write(obj) {
  fs.writeSync(1, JSON.stringify(obj) + '\n');
}

const events = {
  session: (id) => write({ event: 'session', session_id: '0x' + id.toString(16) }),
  lost: (why) => write({ event: 'lost', error: why }),
  renewed: () => write({ event: 'renewed' }),
};

// protocolError: a line the worker cannot act on; exit non-zero without replying.
function protocolError(why) {
  process.stderr.write('zlcworker: protocol error: ' + why + '\n');
  process.exit(2);
}

function parse(line) {
  let req;
  try {
    req = JSON.parse(line);
  } catch (e) {
    protocolError('not JSON: ' + e.message);
  }
  if (req === null || typeof req !== 'object' || Array.isArray(req)) protocolError('not an object');
  if (!Number.isInteger(req.id)) protocolError('no integer id');
  if (!OPS.has(req.op)) protocolError('unknown op ' + JSON.stringify(req.op));
  return req;
}

// serve answers requests on stdin, one at a time, until close or EOF, then exits 0.
async function serve(lock) {
  // Anything a library logs goes to stderr; stdout is the protocol's.
  console.log = console.info = console.error;
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  let opened = false;
  for await (const line of lines) {
    const req = parse(line);
    let reply = { id: req.id, type: 'ok' };
    if (!opened && req.op !== 'init') protocolError(req.op + ' before init');
    try {
      switch (req.op) {
        case 'init':
          if ((req.kind || 'mutex') !== 'mutex') throw new Refused('only the mutex workload (got ' + req.kind + ')');
          await lock.open(req, events);
          opened = true;
          break;
        case 'acquire': {
          const place = await lock.acquire(req.timeout_ms > 0 ? req.timeout_ms : null);
          if (place) reply.lock = place;
          break;
        }
        case 'release':
          await lock.release();
          break;
        case 'close':
          opened = false;
          await lock.close();
          write(reply);
          process.exit(0);
          break;
        default:
          throw new Refused('op ' + req.op + ' is not supported by this worker');
      }
    } catch (e) {
      const known = e instanceof Refused || e instanceof TimedOut || e instanceof NotHeld;
      reply = { id: req.id, type: known ? 'fail' : 'info', error: e instanceof TimedOut ? 'timeout' : String(e.message || e) };
    }
    write(reply);
  }
  // EOF: end the session, exit 0.
  if (opened) await lock.close().catch(() => {});
  process.exit(0);
}

module.exports = { serve, Refused, TimedOut, NotHeld };
