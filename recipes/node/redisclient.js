// The ioredis clients of the Node workers' Redis locks, made as their users make them.
//
// One place for what every Redis lock worker of recipes/node does at init: refuse
// what a mutex without a token cannot run, and connect with ioredis's defaults, which
// are what a user who writes `new Redis({ host, port })` has:
//
// - no command timeout: a command waits for its reply as long as the connection
//   lives (a peer that vanished without a reset is noticed only by TCP itself: its
//   retransmissions for a command in flight, keep-alive probes after 30 s idle);
// - reconnection for ever, 50 ms doubling to 5 s apart (plus up to 200 ms of jitter);
// - an offline queue: a command issued while disconnected waits for a connection;
// - maxRetriesPerRequest 20: the waiting commands fail with
//   MaxRetriesPerRequestError at the 21st reconnection attempt in a row, about 70 s
//   of a server that refuses connections (ioredis 6's backoff; 10 s in ioredis 5);
// - autoResendUnfulfilledCommands: the commands that were in flight when a
//   connection closed (sent, no reply yet) are sent again on the next connection,
//   whether or not the server ran them: a SET NX or a lock script that took the lock
//   and whose reply was lost runs a second time, and finds the key it set;
// - RESP3 (HELLO 3) and CLIENT SETINFO on every connection.
//
// The one addition is the worker's own: on every new connection to the instance whose
// connections are the sessions, a CLIENT ID, reported as the session (the harness's
// connection-kill aims at it).
'use strict';

const Redis = require('ioredis');
const { Refused, Unknown } = require('./zlcworker');

function log(msg) {
  const t = new Date().toISOString().slice(11, 23);
  process.stderr.write(`${t} INFO zlc.redis: ${msg}\n`);
}

/**
 * checkMutex refuses another workload kind, permits, fencing (a random value is no
 * fencing token) and a connect that is not host:port,... for recipe, whose lock value
 * is value (what it says it is).
 */
function checkMutex(recipe, init, value) {
  if (init.kind !== 'mutex') throw new Refused(`${recipe} speaks the mutex workload, not ${init.kind}`);
  if (init.permits > 1) throw new Refused(`${recipe}: a mutex has one permit, got permits ${init.permits}`);
  if (init.fenced) throw new Refused(`${recipe} cannot fence: its ${value} is a random value`);
  for (const a of init.connect) {
    const i = a.lastIndexOf(':');
    if (i <= 0 || !/^[0-9]+$/.test(a.slice(i + 1))) throw new Refused(`init: connect ${JSON.stringify(a)} is not host:port`);
  }
}

/**
 * connect makes an ioredis client of addr (host:port) with the client's defaults; the
 * password of a server the user runs comes from $REDISCLI_AUTH (zlockcheck run
 * --connect), as for every Redis worker. onSession, when given, is told the CLIENT ID
 * of each new connection.
 */
function connect(addr, onSession) {
  const i = addr.lastIndexOf(':');
  const client = new Redis({ host: addr.slice(0, i), port: Number(addr.slice(i + 1)), password: process.env.REDISCLI_AUTH || undefined });
  return listen(client, addr, onSession);
}

/**
 * listen logs client's errors and reconnections under the name what, and tells
 * onSession, when given, the CLIENT ID of each new connection; it returns client. An
 * application listens for errors (without a listener ioredis prints each one as
 * unhandled); they change nothing of the client's behaviour.
 */
function listen(client, what, onSession) {
  client.on('error', (e) => log(`${what}: ${e.message}`));
  client.on('reconnecting', (ms) => log(`${what}: reconnecting in ${ms} ms`));
  if (onSession) {
    client.on('ready', () => {
      client.client('ID').then((id) => onSession(Number(id)), (e) => log(`${what}: CLIENT ID: ${e.message}`));
    });
  }
  return client;
}

/**
 * connectSentinel makes an ioredis client of the primary the sentinels at sentinels
 * (host:port each) name master, as ioredis's documentation shows (`new Redis({
 * sentinels, name })`, the client's defaults otherwise): it asks the sentinels for the
 * primary on every (re)connection, and so follows a failover. onSession as connect's.
 */
function connectSentinel(sentinels, master, onSession) {
  const hosts = sentinels.map((a) => {
    const i = a.lastIndexOf(':');
    return { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
  });
  const client = new Redis({ sentinels: hosts, name: master, password: process.env.REDISCLI_AUTH || undefined });
  return listen(client, `primary ${master} of sentinels ${sentinels.join(',')}`, onSession);
}

/**
 * ready waits until need of clients are connected and ready, for up to waitMs (the
 * session timeout, as long as a ZooKeeper client waits for its session): RedLock works
 * while a majority can be reached. Short of that it disconnects them all and throws
 * Unknown (init answers info, and the harness tries again).
 */
async function ready(clients, need, waitMs) {
  const count = () => clients.filter((c) => c.status === 'ready').length;
  const end = performance.now() + waitMs;
  while (count() < need) {
    if (performance.now() >= end) {
      const states = clients.map((c) => `${c.options.host}:${c.options.port} ${c.status}`).join(', ');
      for (const c of clients) c.disconnect();
      throw new Unknown(`${count()} of ${clients.length} Redis instances ready after ${waitMs} ms, ${need} needed (${states})`);
    }
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * quit ends clients: QUIT on each (bounded to 500 ms: a server that does not answer
 * is not waited for), then their sockets closed.
 */
async function quit(clients) {
  let timer;
  await Promise.race([Promise.allSettled(clients.map((c) => c.quit())), new Promise((resolve) => (timer = setTimeout(resolve, 500)))]);
  clearTimeout(timer);
  for (const c of clients) c.disconnect();
}

module.exports = { checkMutex, connect, connectSentinel, ready, quit };
