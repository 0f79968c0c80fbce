// What ioredis's defaults do to a command whose reply was lost with its connection:
// a fake Redis on 127.0.0.1 (it speaks just enough RESP for ioredis's handshake) runs
// a SET NX, then closes the connection before its reply. ioredis (autoResendUnfulfilledCommands)
// sends it again on its next connection, where the key, set by the first, makes it
// answer nil: the caller is told it did not take the lock its key holds.
//
// No real server. Run with the Node workers' libraries (zlockcheck fetch installs them):
//
//     NODE_PATH=$(echo ~/.cache/zlockcheck/node-npm-*/node_modules) node recipes/node/resend_demo.js
//
// It prints the SET's result (null) and each run of it the fake saw (OK on the first
// connection, nil on the second), and exits 1 when ioredis did not send it again.
'use strict';

const net = require('node:net');
const Redis = require('ioredis');
let conns = 0, sets = [];
const store = new Map();
function parse(buf) { // arrays of bulk strings only; returns [cmds, rest]
  const cmds = []; let i = 0;
  for (;;) {
    if (i >= buf.length || buf[i] !== 42) break;
    let e = buf.indexOf('\r\n', i); if (e < 0) break;
    const n = +buf.slice(i + 1, e); let j = e + 2; const args = []; let ok = true;
    for (let k = 0; k < n; k++) {
      const e2 = buf.indexOf('\r\n', j); if (e2 < 0) { ok = false; break; }
      const len = +buf.slice(j + 1, e2); if (buf.length < e2 + 2 + len + 2) { ok = false; break; }
      args.push(buf.slice(e2 + 2, e2 + 2 + len).toString()); j = e2 + 2 + len + 2;
    }
    if (!ok) break; cmds.push(args); i = j;
  }
  return [cmds, buf.slice(i)];
}
const srv = net.createServer((sock) => {
  const id = ++conns; let buf = Buffer.alloc(0);
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]); let cmds; [cmds, buf] = parse(buf);
    for (const c of cmds) {
      const name = c[0].toUpperCase();
      if (name === 'HELLO') sock.write('%1\r\n+proto\r\n:3\r\n');
      else if (name === 'CLIENT') sock.write('+OK\r\n');
      else if (name === 'INFO') { const b = '# Server\r\nloading:0\r\n'; sock.write('$' + Buffer.byteLength(b) + '\r\n' + b + '\r\n'); }
      else if (name === 'SET') {
        const had = store.has(c[1]); if (!had) store.set(c[1], c[2]);
        sets.push({ conn: id, result: had ? 'nil (the key exists)' : 'OK' });
        if (id === 1) { sock.destroy(); return; } // ran it, the reply is lost with the connection
        sock.write(had ? '_\r\n' : '+OK\r\n');
      } else sock.write('-ERR unknown\r\n');
    }
  });
  sock.on('error', () => {});
});
srv.listen(0, '127.0.0.1', async () => {
  const client = new Redis({ port: srv.address().port, host: '127.0.0.1' });
  client.on('error', () => {});
  const r = await client.set('lock', 'token-1', 'PX', 10000, 'NX');
  console.log(JSON.stringify({ setReturned: r, setsTheServerRan: sets, connections: conns }));
  process.exitCode = sets.length === 2 && r === null ? 0 : 1;
  client.disconnect(); srv.close();
});
