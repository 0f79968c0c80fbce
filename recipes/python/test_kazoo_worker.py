#!/usr/bin/python3
"""Tests of kazoo_worker.py against a real standalone ZooKeeper on 127.0.0.1.

Run:  /usr/bin/python3 recipes/python/test_kazoo_worker.py [-v]
(or /usr/bin/python3 -m unittest discover -s recipes/python -p "test_kazoo*" -v)

Standard library only. The test starts its own ZooKeeper (Debian's
/usr/share/java/zookeeper.jar, tickTime 200, a free port on 127.0.0.1, a temporary
data dir), drives worker processes through scripted protocol sessions and checks
the replies, and inspects or sabotages ZooKeeper through a minimal client of its own
(MiniZK below: connect, getChildren, getData, delete, closeSession). A small TCP proxy
lets one test cut a worker's connection without touching the server. Everything it
starts (server, workers, proxy) is stopped and the temporary directory removed on
every exit path: normal end, failure, Ctrl-C, SIGTERM; the server and the workers
also get a parent-death signal in case the test itself is SIGKILLed.

What is checked (each worker a real process speaking protocol v1):

- LockTest: mutual exclusion with timeouts (fail "timeout" after >= T, no node left
  behind, token = czxid of the worker's node, tokens grow), release after the node
  was deleted behind the worker's back
  (fail "not held: ..."), init errors (wrong kind per recipe, missing counter_path,
  permits, bad path: fail; unreachable server -> info within 2 x session timeout,
  zlcworker's rule; a failed init retried), rwlock mode checks.
- SemaphoreTest: permits 2 admit two and time out a third (no lease and no internal
  lock node left), a release admits the third; release after the lease was deleted.
- RWLockTest: readers together, a reader excludes a writer, a writer excludes both.
- CounterTest: read/write only while holding, missing counter reads 0, unfenced
  write goes through even without the lock node; fenced write (check + set_data)
  creates the counter, commits while the node exists, fails "fenced: lock node gone"
  when it is deleted, and the counter keeps its value.
- SessionTest: the session event (hex id, 16-byte password) is the real session: the
  test takes it over with id + password and closes it; the worker reports lost once,
  a new session event, release fails "not held: nothing held", it acquires again. A
  connection cut (proxy) while holding gives lost "connection suspended", the session
  survives, the surviving node blocks others until the worker's next acquire deletes
  it.
- PartitionTest: an acquire while cut off is answered info within T + session
  timeout + 1 s (then info for everything, close ok); an acquire survives a 1.5 s cut.
- HammerTest: four workers per recipe loop acquire/hold/release for 3 s; the certain
  holds (ok .. release sent) never overlap beyond the rule (mutex 1, semaphore 2,
  rwlock one writer alone), mutex tokens grow in hold order, no lost events.
- ProtocolV2Test: init offering protocol 2 is answered with protocol 2, clock, a
  cycle reports acquire/release invoke and ok with times inside the exchange
  (CLOCK_MONOTONIC on both sides) and holds hold_us; a cycle on a held lock reports
  the timeout and releases nothing; a lost lock during the hold ends the cycle
  without a release; without the offer the worker stays v1 (a cycle exits non-zero).
- ProtocolTest: start-up time (spawn to init reply, printed), close before init,
  unknown recipe exits 2, and so does a Python without kazoo, saying so. Every stdout line of every worker must be a protocol line.

The generic protocol rules (reply ids, timeouts, a waiter granted when the holder
releases, lost on session expiry, close, EOF ends the session and exits 0, malformed
and out-of-order lines exit non-zero) are zlockcheck conformance's, run on this worker
by conformance/integration_test.go (go test -run TestConformance ./conformance/).

Set ZLC_KAZOO_TEST_KEEP=1 to keep the temporary directory (server and worker logs).
"""

import base64
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "kazoo_worker.py")
# Debian's python3-kazoo lives there; $ZLC_KAZOO_PYTHON names another interpreter
# (the Python workers' virtual environment, for Kazoo 2.11 from PyPI).
PYTHON = os.environ.get("ZLC_KAZOO_PYTHON") or "/usr/bin/python3"
ZK_CP = "/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
HOST = "127.0.0.1"
SESSION_MS = 4000  # the maximum this server allows: 20 ticks of 200 ms

# ---- process hygiene ------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_PDEATHSIG = 1


def _die_with_parent():
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


_children = []  # every Popen we started, killed at the end no matter what
_children_lock = threading.Lock()


def spawn(args, **kw):
    p = subprocess.Popen(args, preexec_fn=_die_with_parent, **kw)
    with _children_lock:
        _children.append(p)
    return p


def kill_all():
    with _children_lock:
        procs = list(_children)
    for p in procs:
        if p.poll() is None:
            try:
                p.kill()
            except OSError:
                pass
    for p in procs:
        try:
            p.wait(10)
        except Exception:
            pass
        for f in (p.stdin, p.stdout, p.stderr):
            if f:
                try:
                    f.close()
                except Exception:
                    pass


# ---- a minimal ZooKeeper client (jute over TCP), for inspection and sabotage --------

class ZKError(Exception):
    def __init__(self, code, what):
        Exception.__init__(self, "%s: ZooKeeper error %d" % (what, code))
        self.code = code


NONODE = -101
STAT = struct.Struct(">qqqqiiiqiiq")  # czxid mzxid ctime mtime version cversion aversion
#                                       ephemeralOwner dataLength numChildren pzxid


class MiniZK(object):
    """Just enough of the client protocol: a session (new, or an existing one given
    its id and password), getChildren, getData, delete, closeSession."""

    def __init__(self, port, session_id=0, passwd=b"\0" * 16, timeout_ms=SESSION_MS):
        self.sock = socket.create_connection((HOST, port), timeout=10)
        self.xid = 0
        body = struct.pack(">iqiq", 0, 0, timeout_ms, session_id) + self._buf(passwd) + b"\0"
        self._send(body)
        resp = self._recv()
        _proto, self.timeout_ms, self.session_id = struct.unpack_from(">iiq", resp, 0)
        n = struct.unpack_from(">i", resp, 16)[0]
        self.passwd = resp[20:20 + n]
        if self.timeout_ms <= 0:
            self.sock.close()
            raise ZKError(-112, "connect with session 0x%x: session expired or invalid" % session_id)

    @staticmethod
    def _buf(b):
        return struct.pack(">i", len(b)) + b

    @staticmethod
    def _str(s):
        return MiniZK._buf(s.encode("utf-8"))

    def _send(self, body):
        self.sock.sendall(struct.pack(">i", len(body)) + body)

    def _recvn(self, n):
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise EOFError("ZooKeeper closed the connection")
            out += chunk
        return out

    def _recv(self):
        n = struct.unpack(">i", self._recvn(4))[0]
        return self._recvn(n)

    def _call(self, typ, body, what):
        self.xid += 1
        self._send(struct.pack(">ii", self.xid, typ) + body)
        while True:
            resp = self._recv()
            xid, _zxid, err = struct.unpack_from(">iqi", resp, 0)
            if xid == -1:  # a watch event; we set none, but skip anyway
                continue
            if xid != self.xid:
                raise AssertionError("xid %d, want %d" % (xid, self.xid))
            if err:
                raise ZKError(err, what)
            return resp[16:]

    def children(self, path):
        try:
            r = self._call(8, self._str(path) + b"\0", "getChildren " + path)
        except ZKError as e:
            if e.code == NONODE:
                return []
            raise
        n, off, out = struct.unpack_from(">i", r, 0)[0], 4, []
        for _ in range(n):
            ln = struct.unpack_from(">i", r, off)[0]
            out.append(r[off + 4:off + 4 + ln].decode("utf-8"))
            off += 4 + ln
        return sorted(out)

    def get(self, path):
        """(data, stat dict) or None if there is no such node."""
        try:
            r = self._call(4, self._str(path) + b"\0", "getData " + path)
        except ZKError as e:
            if e.code == NONODE:
                return None
            raise
        n = struct.unpack_from(">i", r, 0)[0]
        data = r[4:4 + n] if n >= 0 else b""
        f = STAT.unpack_from(r, 4 + max(n, 0))
        names = ("czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
                 "ephemeralOwner", "dataLength", "numChildren", "pzxid")
        return data, dict(zip(names, f))

    def delete(self, path):
        self._call(2, self._str(path) + struct.pack(">i", -1), "delete " + path)

    def owned(self, parent, session_id):
        """Children of parent that are ephemeral nodes of session_id, with czxid."""
        out = []
        for c in self.children(parent):
            got = self.get(parent + "/" + c)
            if got and got[1]["ephemeralOwner"] == session_id:
                out.append((parent + "/" + c, got[1]["czxid"]))
        return out

    def close_session(self):
        try:
            self._call(-11, b"", "closeSession")
        finally:
            self.sock.close()

    def close(self):
        try:
            self.close_session()
        except (OSError, EOFError, ZKError):
            pass  # an idle session may have expired (we send no pings)


class Inspector(object):
    """A MiniZK that reconnects when its idle session has expired."""

    def __init__(self, port):
        self.port = port
        self.conn = None

    def __getattr__(self, name):
        def call(*args):
            for attempt in (1, 2):
                if self.conn is None:
                    self.conn = MiniZK(self.port)
                try:
                    return getattr(self.conn, name)(*args)
                except (OSError, EOFError):
                    self.conn = None
                    if attempt == 2:
                        raise
        return call

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


# ---- a TCP proxy whose connections can be cut ------------------------------------

class Proxy(object):
    def __init__(self, target_port):
        self.target = target_port
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind((HOST, 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        self.stopped = False
        self.blocked = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            if self.blocked:  # a partition: refuse service
                c.close()
                continue
            try:
                s = socket.create_connection((HOST, self.target), timeout=5)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns.append((c, s))
            threading.Thread(target=self._pipe, args=(c, s), daemon=True).start()

    def _pipe(self, a, b):
        try:
            while True:
                r, _, _ = select.select([a, b], [], [], 0.5)
                for s in r:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("closed")
                    (b if s is a else a).sendall(data)
        except (OSError, ValueError):
            pass
        finally:
            for s in (a, b):
                try:
                    s.close()
                except OSError:
                    pass

    def cut(self):
        """Closes every connection now (both sides); new ones are still accepted."""
        with self.lock:
            conns, self.conns = self.conns, []
        for pair in conns:
            for s in pair:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
        return len(conns)

    def block(self):
        """Cuts every connection and refuses new ones until unblock()."""
        self.blocked = True
        return self.cut()

    def unblock(self):
        self.blocked = False

    def stop(self):
        self.stopped = True
        self.lsock.close()
        self.cut()


# ---- the server -------------------------------------------------------------------

class Server(object):
    tmp = None
    port = None
    proc = None


def free_port():
    s = socket.socket()
    s.bind((HOST, 0))
    port = s.getsockname()[1]
    s.close()
    return port


def four_letter(port, cmd, timeout=2.0):
    with socket.create_connection((HOST, port), timeout=timeout) as s:
        s.sendall(cmd.encode("ascii"))
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out.decode("utf-8", "replace")
            out += chunk


def start_server():
    Server.tmp = tempfile.mkdtemp(prefix="zlc-kazoo-test-")
    data = os.path.join(Server.tmp, "data")
    os.mkdir(data)
    Server.port = free_port()
    cfg = os.path.join(Server.tmp, "zoo.cfg")
    with open(cfg, "w") as f:
        f.write("tickTime=200\nclientPortAddress=%s\nclientPort=%d\ndataDir=%s\n"
                "4lw.commands.whitelist=*\nadmin.enableServer=false\n" % (HOST, Server.port, data))
    log = open(os.path.join(Server.tmp, "server.log"), "wb")
    Server.proc = spawn(["java", "-cp", ZK_CP, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                        cwd=Server.tmp)
    log.close()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if Server.proc.poll() is not None:
            break
        try:
            # ruok answers before the server serves; srvr says Mode: once it does.
            if "Mode:" in four_letter(Server.port, "srvr"):
                MiniZK(Server.port).close()
                return
        except (OSError, EOFError, ZKError):
            pass
        time.sleep(0.1)
    with open(os.path.join(Server.tmp, "server.log"), errors="replace") as f:
        tail = f.read()[-3000:]
    raise RuntimeError("ZooKeeper did not start on %s:%d:\n%s" % (HOST, Server.port, tail))


def stop_server():
    kill_all()
    if Server.tmp and os.path.isdir(Server.tmp):
        if os.environ.get("ZLC_KAZOO_TEST_KEEP"):
            sys.stderr.write("kept %s\n" % Server.tmp)
        else:
            shutil.rmtree(Server.tmp, ignore_errors=True)
    Server.tmp = None


def setUpModule():
    if not os.path.exists(PYTHON):
        raise unittest.SkipTest("no %s" % PYTHON)
    if subprocess.call([PYTHON, "-c", "import kazoo"], stderr=subprocess.DEVNULL) != 0:
        raise RuntimeError("%s cannot import kazoo (apt-get install python3-kazoo)" % PYTHON)
    if not shutil.which("java") or not os.path.exists("/usr/share/java/zookeeper.jar"):
        raise RuntimeError("needs java and Debian's zookeeper (apt-get install zookeeper)")
    try:
        start_server()
    except BaseException:
        stop_server()
        raise


def tearDownModule():
    stop_server()


# ---- a worker process ---------------------------------------------------------------

class WorkerProc(object):
    def __init__(self, test, recipe, name):
        self.test = test
        self.name = name
        self.errpath = os.path.join(Server.tmp, "%s-%s.stderr.log" % (test.id().split(".")[-1], name))
        self.err = open(self.errpath, "wb")
        self.t0 = time.monotonic()
        self.p = spawn([PYTHON, WORKER, recipe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                       stderr=self.err)
        self.err.close()
        self.msgs = []  # (arrival time, message) of every stdout line
        self.bad = []  # stdout lines that are not protocol lines
        self.cond = threading.Condition()
        self.eof = False
        self.next_id = 0
        self.session = None
        threading.Thread(target=self._read, daemon=True).start()
        test.addCleanup(self.kill)

    def _read(self):
        for raw in self.p.stdout:
            now = time.monotonic()
            try:
                m = json.loads(raw)
                ok = isinstance(m, dict) and (("id" in m) != ("event" in m))
            except ValueError:
                ok = False
            with self.cond:
                if ok:
                    self.msgs.append((now, m))
                else:
                    self.bad.append(raw)
                self.cond.notify_all()
        with self.cond:
            self.eof = True
            self.cond.notify_all()

    def stderr_tail(self):
        try:
            with open(self.errpath, errors="replace") as f:
                return f.read()[-4000:]
        except OSError:
            return ""

    def send_raw(self, line):
        self.p.stdin.write(line.encode("utf-8") + b"\n")
        self.p.stdin.flush()

    def call(self, op, timeout=20, **fields):
        rid = self.next_id
        self.next_id += 1
        req = {"id": rid, "op": op}
        req.update(fields)
        self.send_raw(json.dumps(req))
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for _t, m in self.msgs:
                    if m.get("id") == rid:
                        self.test.assertEqual(self.bad, [], "non-protocol stdout lines")
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.eof:
                    self.test.fail("%s: no reply to %s (eof=%s); stderr:\n%s"
                                   % (self.name, req, self.eof, self.stderr_tail()))
                self.cond.wait(left)

    def events(self, kind=None):
        with self.cond:
            return [m for _t, m in self.msgs if "event" in m and (kind is None or m["event"] == kind)]

    def wait_event(self, kind, count=1, timeout=15):
        deadline = time.monotonic() + timeout
        with self.cond:
            while len([1 for _t, m in self.msgs if m.get("event") == kind]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.test.fail("%s: no %d %s event(s); got %s; stderr:\n%s"
                                   % (self.name, count, kind, self.events(), self.stderr_tail()))
                self.cond.wait(left)
        return self.events(kind)[count - 1]

    def init(self, path, kind, port=None, permits=1, **extra):
        req = dict(connect="%s:%d" % (HOST, port or Server.port), session_timeout_ms=SESSION_MS,
                   path=path, kind=kind, permits=permits, worker=abs(hash(self.name)) % 1000)
        req.update(extra)
        r = self.call("init", **req)
        self.init_reply_s = time.monotonic() - self.t0
        self.test.assertEqual(r["type"], "ok", r)
        ev = self.wait_event("session")
        self.session = int(ev["session_id"], 16)
        return r

    def expect(self, op, typ, error=None, **fields):
        r = self.call(op, **fields)
        self.test.assertEqual(r["type"], typ, "%s %s %s -> %s; stderr:\n%s"
                              % (self.name, op, fields, r, self.stderr_tail()))
        if error is not None:
            self.test.assertEqual(r.get("error"), error, r)
        return r

    def acquire_ok(self, timeout_ms=3000, **fields):
        r = self.expect("acquire", "ok", timeout_ms=timeout_ms, **fields)
        self.test.assertIsInstance(r.get("token"), int, r)
        return r["token"]

    def acquire_timeout(self, timeout_ms=400, **fields):
        t0 = time.monotonic()
        self.expect("acquire", "fail", "timeout", timeout_ms=timeout_ms, **fields)
        took = time.monotonic() - t0
        self.test.assertGreaterEqual(took, timeout_ms / 1000.0 * 0.95)
        self.test.assertLess(took, timeout_ms / 1000.0 + 3.0)
        return took

    def close(self):
        self.expect("close", "ok")
        self.test.assertEqual(self.p.wait(15), 0, self.stderr_tail())
        self.test.assertEqual(self.bad, [], "non-protocol stdout lines")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait(10)
        for f in (self.p.stdin, self.p.stdout):
            try:
                f.close()
            except Exception:
                pass


_seq = [0]


def fresh_path(name):
    _seq[0] += 1
    return "/zlc/kazoo-test-%d-%d/%s" % (os.getpid(), _seq[0], name)


class Base(unittest.TestCase):
    def setUp(self):
        self.zk = Inspector(Server.port)
        self.addCleanup(self.zk.close)
        self.base = fresh_path(self.id().split(".")[-1])
        self.path = self.base + "/l0"

    def worker(self, recipe, name):
        return WorkerProc(self, recipe, name)

    def owned(self, w, parent=None):
        return self.zk.owned(parent or self.path, w.session)


# ---- the tests ------------------------------------------------------------------------

class LockTest(Base):
    def test_mutual_exclusion_with_timeouts(self):
        a, b = self.worker("kazoo-lock", "a"), self.worker("kazoo-lock", "b")
        a.init(self.path, "mutex")
        b.init(self.path, "mutex")
        ta = a.acquire_ok()
        [(node_a, czxid)] = self.owned(a)
        self.assertEqual(ta, czxid, "token is the czxid of a's lock node")
        b.acquire_timeout(400)
        b.acquire_timeout(700)
        self.assertEqual(self.owned(b), [], "a timed-out acquire leaves no node")
        a.expect("acquire", "fail", timeout_ms=300)  # not re-entrant: refused, not deadlocked
        a.expect("release", "ok")
        a.expect("release", "fail", "not held: nothing held")
        tb = b.acquire_ok()
        self.assertGreater(tb, ta)
        a.acquire_timeout(300)
        b.expect("release", "ok")
        ta2 = a.acquire_ok()
        self.assertGreater(ta2, tb)
        a.expect("release", "ok")
        self.assertEqual(self.zk.children(self.path), [])
        a.close()
        b.close()

    def test_release_after_node_deleted_behind_its_back(self):
        a, b = self.worker("kazoo-lock", "a"), self.worker("kazoo-lock", "b")
        a.init(self.path, "mutex")
        b.init(self.path, "mutex")
        a.acquire_ok()
        [(node, _)] = self.owned(a)
        self.zk.delete(node)
        b.acquire_ok()  # the lock is free for others now
        a.expect("release", "fail", "not held: the lock node was already gone")
        a.expect("release", "fail", "not held: nothing held")
        b.expect("release", "ok")
        a.acquire_ok()  # the worker goes on normally
        a.expect("release", "ok")

    def test_init_errors(self):
        w = self.worker("kazoo-lock", "w")
        base = dict(connect="%s:%d" % (HOST, Server.port), session_timeout_ms=SESSION_MS,
                    path=self.path, permits=1, worker=1)
        r = w.expect("init", "fail", kind="semaphore", **base)
        self.assertIn("does not support kind 'semaphore'", r["error"])
        w.expect("init", "fail", kind="rwlock", **base)
        w.expect("init", "fail", kind="counter", **base)  # no counter_path
        w.expect("init", "fail", **dict(base, kind="mutex", permits=3))
        w.expect("init", "fail", **dict(base, kind="mutex", path="relative"))
        r = w.expect("init", "fail", **dict(base, kind="mutex", write_retry_ms=-1))
        self.assertIn("write_retry_ms", r["error"])
        # Nothing listens on a fresh port: start() gives up after 2 x session timeout,
        # info (zlcworker's rule: the servers may be unreachable for now).
        t0 = time.monotonic()
        r = w.expect("init", "info", **dict(base, kind="mutex", session_timeout_ms=500,
                                            connect="%s:%d" % (HOST, free_port())))
        self.assertLess(time.monotonic() - t0, 5)
        self.assertIn("connecting", r["error"])
        w.expect("init", "ok", kind="mutex", **base)  # a failed init may be retried
        w.wait_event("session")
        w.close()
        w2 = self.worker("kazoo-semaphore", "w2")
        w2.expect("init", "fail", kind="mutex", **base)
        w2.expect("init", "fail", **dict(base, kind="semaphore", permits=0))
        w3 = self.worker("kazoo-rwlock", "w3")
        w3.expect("init", "fail", kind="mutex", **base)
        w3.expect("init", "ok", kind="rwlock", **base)
        w3.expect("acquire", "fail", timeout_ms=100)  # rwlock needs a mode
        w3.expect("acquire", "fail", timeout_ms=100, mode="upgrade")
        w3.close()


class SemaphoreTest(Base):
    def test_two_permits_admit_two_and_fail_a_third(self):
        ws = [self.worker("kazoo-semaphore", n) for n in ("a", "b", "c")]
        for w in ws:
            w.init(self.path, "semaphore", permits=2)
        a, b, c = ws
        ta, tb = a.acquire_ok(), b.acquire_ok()
        self.assertNotEqual(ta, tb)
        c.acquire_timeout(500)
        self.assertEqual(self.owned(c), [])
        self.assertEqual(self.zk.owned(self.path + "-__lock__", c.session), [],
                         "no internal lock node left behind")
        self.assertEqual(len(self.zk.children(self.path)), 2)
        a.expect("release", "ok")
        c.acquire_ok()
        a.acquire_timeout(400)
        b.expect("release", "ok")
        c.expect("release", "ok")
        c.expect("release", "fail", "not held: nothing held")
        self.assertEqual(self.zk.children(self.path), [])
        for w in ws:
            w.close()

    def test_release_after_lease_deleted(self):
        a = self.worker("kazoo-semaphore", "a")
        a.init(self.path, "semaphore", permits=2)
        a.acquire_ok()
        [(node, _)] = self.owned(a)
        self.zk.delete(node)
        a.expect("release", "fail", "not held: the lock node was already gone")
        a.acquire_ok()
        a.expect("release", "ok")
        a.close()


class RWLockTest(Base):
    def test_readers_together_writer_excluded(self):
        a, b = self.worker("kazoo-rwlock", "a"), self.worker("kazoo-rwlock", "b")
        a.init(self.path, "rwlock")
        b.init(self.path, "rwlock")
        a.acquire_ok(mode="read")
        b.acquire_ok(mode="read")  # readers share
        b.expect("release", "ok")
        b.acquire_timeout(400, mode="write")  # a reader excludes a writer
        self.assertEqual(self.owned(b), [])
        a.expect("release", "ok")
        b.acquire_ok(mode="write")
        a.acquire_timeout(400, mode="read")  # a writer excludes readers
        a.acquire_timeout(400, mode="write")  # and writers
        self.assertEqual(self.owned(a), [])
        b.expect("release", "ok")
        a.acquire_ok(mode="write")
        a.expect("release", "ok")
        a.close()
        b.close()


class CounterTest(Base):
    def counter_workers(self, fenced):
        self.counter = self.base + "/counter"
        a, b = self.worker("kazoo-lock", "a"), self.worker("kazoo-lock", "b")
        for w in (a, b):
            w.init(self.path, "counter", counter_path=self.counter, fenced=fenced)
        return a, b

    def test_unfenced(self):
        a, b = self.counter_workers(False)
        a.expect("read", "fail", "not held: nothing held")
        a.expect("write", "fail", "not held: nothing held", value=1)
        a.acquire_ok()
        self.assertEqual(a.expect("read", "ok")["value"], 0)  # missing counter reads 0
        a.expect("write", "ok", value=17)
        self.assertEqual(a.expect("read", "ok")["value"], 17)
        b.expect("read", "fail", "not held: nothing held")
        a.expect("release", "ok")
        b.acquire_ok()
        self.assertEqual(b.expect("read", "ok")["value"], 17)
        b.expect("write", "ok", value=18)
        self.assertEqual(self.zk.get(self.counter)[0], b"18")
        # Unfenced: a write goes through even when the lock node is gone.
        [(node, _)] = self.owned(b)
        self.zk.delete(node)
        b.expect("write", "ok", value=19)
        self.assertEqual(self.zk.get(self.counter)[0], b"19")
        b.expect("release", "fail", "not held: the lock node was already gone")
        a.close()
        b.close()

    def test_fenced(self):
        a, b = self.counter_workers(True)
        a.acquire_ok()
        self.assertEqual(a.expect("read", "ok")["value"], 0)
        a.expect("write", "ok", value=1)  # creates the counter, fenced
        a.expect("write", "ok", value=2)
        self.assertEqual(a.expect("read", "ok")["value"], 2)
        [(node, _)] = self.owned(a)
        self.zk.delete(node)
        a.expect("write", "fail", "fenced: lock node gone", value=3)
        self.assertEqual(self.zk.get(self.counter)[0], b"2")
        b.acquire_ok()
        b.expect("write", "ok", value=3)
        a.expect("write", "fail", "fenced: lock node gone", value=99)
        a.expect("release", "fail", "not held: the lock node was already gone")
        a.expect("write", "fail", "not held: nothing held", value=99)
        self.assertEqual(self.zk.get(self.counter)[0], b"3")
        b.expect("release", "ok")
        a.close()
        b.close()


class SessionTest(Base):
    def test_session_event_passwd_and_expiry(self):
        a, b = self.worker("kazoo-lock", "a"), self.worker("kazoo-lock", "b")
        a.init(self.path, "mutex")
        b.init(self.path, "mutex")
        ev = a.events("session")[0]
        self.assertRegex(ev["session_id"], r"^0x[0-9a-f]+$")
        passwd = base64.b64decode(ev["passwd"], validate=True)
        self.assertEqual(len(passwd), 16)
        a.acquire_ok()
        # The id and password are the real ones: with them we take over a's session
        # and close it, which expires it for a (the nemesis's trick).
        self.assertIn(ev["session_id"], four_letter(Server.port, "cons"))
        thief = MiniZK(Server.port, a.session, passwd)
        self.assertEqual(thief.session_id, a.session)
        thief.close_session()
        lost = a.wait_event("lost")
        self.assertTrue(lost.get("error"))
        ev2 = a.wait_event("session", count=2)
        self.assertNotEqual(ev2["session_id"], ev["session_id"])
        self.assertEqual(len(a.events("lost")), 1, "lost once per hold")
        a.expect("release", "fail", "not held: nothing held")
        a.session = int(ev2["session_id"], 16)
        b.acquire_ok()
        b.expect("release", "ok")
        a.acquire_ok()
        a.expect("release", "ok")
        with self.assertRaises((ZKError, EOFError)):  # the old session is gone for good
            MiniZK(Server.port, int(ev["session_id"], 16), passwd)
        a.close()
        b.close()

    def test_suspended_holder_reports_lost_and_cleans_up(self):
        proxy = Proxy(Server.port)
        self.addCleanup(proxy.stop)
        a, b = self.worker("kazoo-lock", "a"), self.worker("kazoo-lock", "b")
        a.init(self.path, "mutex", port=proxy.port)
        b.init(self.path, "mutex")
        a.acquire_ok()
        self.assertEqual(proxy.cut(), 1)
        lost = a.wait_event("lost")
        self.assertIn("suspended", lost["error"])
        # a reconnects to the same session: its node survives (stale) and blocks b.
        time.sleep(1.0)
        self.assertEqual(len(a.events("session")), 1, "same session after the cut")
        self.assertEqual(len(self.owned(a)), 1)
        b.acquire_timeout(400)
        a.expect("release", "fail", "not held: nothing held")
        a.acquire_ok()  # deletes its stale node first, else it would wait for itself
        self.assertEqual(len(self.owned(a)), 1)
        a.expect("release", "ok")
        b.acquire_ok()
        b.expect("release", "ok")
        self.assertEqual(len(a.events("lost")), 1)
        a.close()
        b.close()


class PartitionTest(Base):
    def test_acquire_during_a_partition_is_answered_in_bounded_time(self):
        proxy = Proxy(Server.port)
        self.addCleanup(proxy.stop)
        a = self.worker("kazoo-lock", "a")
        a.init(self.path, "mutex", port=proxy.port)
        proxy.block()
        t0 = time.monotonic()
        r = a.call("acquire", timeout_ms=1000)
        took = time.monotonic() - t0
        # Kazoo blocks while disconnected; the worker gives up at T + session timeout + 1s.
        self.assertEqual(r["type"], "info", r)
        self.assertLess(took, 1.0 + 2 * SESSION_MS / 1000.0 + 2.5)
        a.expect("release", "info")
        a.expect("acquire", "info", timeout_ms=100)
        a.close()

    def test_acquire_survives_a_short_partition(self):
        proxy = Proxy(Server.port)
        self.addCleanup(proxy.stop)
        a, b = self.worker("kazoo-lock", "a"), self.worker("kazoo-lock", "b")
        a.init(self.path, "mutex", port=proxy.port)
        b.init(self.path, "mutex")
        proxy.block()
        threading.Timer(1.5, proxy.unblock).start()
        t0 = time.monotonic()
        a.acquire_ok(timeout_ms=3000)  # reconnects to the same session and gets the lock
        self.assertGreater(time.monotonic() - t0, 1.0)
        self.assertEqual(len(a.events("session")), 1)
        self.assertEqual(a.events("lost"), [])  # nothing was held while cut off
        b.acquire_timeout(300)
        a.expect("release", "ok")
        b.acquire_ok()
        b.expect("release", "ok")
        a.close()
        b.close()


class HammerTest(Base):
    """Several workers loop acquire -> hold 0-15 ms -> release; the certain holds
    (ok reply arrival .. release sent) must respect the lock's rule."""

    def hammer(self, recipe, kind, n=4, seconds=3.0, permits=1, modes=("",)):
        import random
        ws = [self.worker(recipe, "h%d" % i) for i in range(n)]
        for w in ws:
            w.init(self.path, kind, permits=permits)
        holds, errors, counts = [], [], {"ok": 0, "fail": 0}
        lock = threading.Lock()

        def loop(w, seed):
            rng = random.Random(seed)
            end = time.monotonic() + seconds
            try:
                while time.monotonic() < end:
                    mode = rng.choice(modes)
                    extra = {"mode": mode} if mode else {}
                    r = w.call("acquire", timeout_ms=300, **extra)
                    if r["type"] != "ok":
                        if r["type"] != "fail" or r.get("error") != "timeout":
                            raise AssertionError("%s: acquire %s" % (w.name, r))
                        with lock:
                            counts["fail"] += 1
                        continue
                    with w.cond:
                        start = [t for t, m in w.msgs if m.get("id") == w.next_id - 1][0]
                    time.sleep(rng.uniform(0, 0.015))
                    stop = time.monotonic()
                    rr = w.call("release")
                    if rr["type"] != "ok":
                        raise AssertionError("%s: release %s" % (w.name, rr))
                    with lock:
                        counts["ok"] += 1
                        holds.append((start, stop, mode, w.name, r["token"]))
            except BaseException as e:
                with lock:
                    errors.append(e)

        threads = [threading.Thread(target=loop, args=(w, i)) for i, w in enumerate(ws)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(seconds + 60)
        self.assertEqual(errors, [])
        self.assertGreater(counts["ok"], 10, counts)
        for w in ws:
            self.assertEqual(w.events("lost"), [])
            w.close()
        # sweep: at each hold's start, count the holds that overlap it
        for s0, e0, m0, n0, _ in holds:
            live = [(m, n) for s1, e1, m, n, _ in holds if s1 <= s0 < e1]
            if kind == "rwlock":
                writers = [1 for m, _ in live if m == "write"]
                self.assertTrue(not writers or len(live) == 1, "overlap at %.6f: %s" % (s0, live))
            else:
                self.assertLessEqual(len(live), permits, "overlap at %.6f: %s" % (s0, live))
        if kind == "mutex":  # czxid tokens grow in hold order
            tokens = [tok for _s, _e, _m, _n, tok in sorted(holds)]
            self.assertEqual(tokens, sorted(tokens))
        sys.stderr.write("\n  %s: %d holds, %d timeouts ... " % (recipe, counts["ok"], counts["fail"]))

    def test_lock(self):
        self.hammer("kazoo-lock", "mutex")

    def test_semaphore(self):
        self.hammer("kazoo-semaphore", "semaphore", permits=2)

    def test_rwlock(self):
        self.hammer("kazoo-rwlock", "rwlock", modes=("read", "read", "write"))


class ProtocolTest(Base):
    def test_startup_time(self):
        w = self.worker("kazoo-lock", "w")
        w.init(self.path, "mutex")
        sys.stderr.write("\n  worker start-up (spawn to init reply): %.3fs ... " % w.init_reply_s)
        self.assertLess(w.init_reply_s, 5)
        w.close()

    def test_close_before_init_and_bad_recipe(self):
        w = self.worker("kazoo-lock", "w")
        w.expect("close", "ok")
        self.assertEqual(w.p.wait(15), 0)
        w2 = self.worker("kazoo-nonesuch", "w2")
        self.assertEqual(w2.p.wait(15), 2)
        # -S: no site-packages, so no kazoo (zlcworker needs only the standard library).
        p = subprocess.run([PYTHON, "-S", WORKER, "kazoo-lock"], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=15)
        self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
        self.assertIn("cannot import kazoo", p.stderr)


class ProtocolV2Test(Base):
    """Protocol v2: the version agreed at init, the clock, cycles run by the worker."""

    def cycle(self, w, timeout=20, **fields):
        """Sends a cycle request; returns its step reports and its reply, checking
        each report's shape and that its time lies between the send and its arrival
        (the worker's clock is CLOCK_MONOTONIC, as is time.monotonic_ns here)."""
        rid = w.next_id
        w.next_id += 1
        req = {"id": rid, "op": "cycle"}
        req.update(fields)
        sent = time.monotonic_ns()
        w.send_raw(json.dumps(req))
        deadline = time.monotonic() + timeout
        with w.cond:
            while True:
                mine = [(t, m) for t, m in w.msgs if m.get("id") == rid]
                if mine and "type" in mine[-1][1]:
                    break
                left = deadline - time.monotonic()
                if left <= 0 or w.eof:
                    self.fail("%s: no reply to %s; stderr:\n%s" % (w.name, req, w.stderr_tail()))
                w.cond.wait(left)
        reports = [m for _t, m in mine[:-1]]
        last = sent
        for t, m in mine[:-1]:
            self.assertIn(m["step"], ("invoke", "ok", "fail", "info"), m)
            self.assertIn(m["f"], ("acquire", "release"), m)
            self.assertLessEqual(last, m["mono_ns"], "report times go forward: %s" % m)
            self.assertLessEqual(m["mono_ns"], int(t * 1e9) + 1000000, "reported before it arrived: %s" % m)
            last = m["mono_ns"]
        self.assertEqual(mine[-1][1]["type"], "ok", mine[-1][1])
        return reports, mine[-1][1]

    @staticmethod
    def steps(reports):
        return [(m["f"], m["step"]) for m in reports]

    def test_cycle_acquires_holds_releases(self):
        a, b = self.worker("kazoo-lock", "a"), self.worker("kazoo-lock", "b")
        self.assertEqual(a.init(self.path, "mutex", protocol=2).get("protocol"), 2)
        b.init(self.path, "mutex")
        c1, c2 = a.expect("clock", "ok")["mono_ns"], a.expect("clock", "ok")["mono_ns"]
        self.assertLessEqual(c1, c2)
        reports, _ = self.cycle(a, timeout_ms=3000, hold_us=300000)
        self.assertEqual(self.steps(reports), [("acquire", "invoke"), ("acquire", "ok"),
                                               ("release", "invoke"), ("release", "ok")])
        self.assertIsInstance(reports[1].get("token"), int, reports[1])
        self.assertGreaterEqual(reports[2]["mono_ns"] - reports[1]["mono_ns"], 300000000, "held for hold_us")
        self.assertEqual(self.zk.children(self.path), [])
        # A held lock: the cycle's acquire times out, and nothing is released.
        b.acquire_ok()
        reports, _ = self.cycle(a, timeout_ms=400, hold_us=1000)
        self.assertEqual(self.steps(reports), [("acquire", "invoke"), ("acquire", "fail")])
        self.assertEqual(reports[1].get("error"), "timeout")
        self.assertGreaterEqual(reports[1]["mono_ns"] - reports[0]["mono_ns"], 380000000)
        b.expect("release", "ok")
        a.close()
        b.close()

    def test_lost_during_the_hold_ends_the_cycle(self):
        a = self.worker("kazoo-lock", "a")
        a.init(self.path, "mutex", protocol=2)
        passwd = base64.b64decode(a.events("session")[0]["passwd"])
        rid = a.next_id
        result = {}
        t = threading.Thread(target=lambda: result.update(r=self.cycle(a, timeout_ms=3000, hold_us=20000000)))
        t.start()
        deadline = time.monotonic() + 10
        while not [m for _t, m in list(a.msgs) if m.get("id") == rid and m.get("step") == "ok"]:
            self.assertLess(time.monotonic(), deadline, "no acquire ok report")
            time.sleep(0.02)
        MiniZK(Server.port, a.session, passwd).close_session()
        t.join(15)
        self.assertFalse(t.is_alive(), "the cycle did not end after the lock was lost")
        reports, _ = result["r"]
        self.assertEqual(self.steps(reports), [("acquire", "invoke"), ("acquire", "ok")])
        self.assertEqual(len(a.events("lost")), 1)
        a.close()

    def test_v1_unless_offered(self):
        a = self.worker("kazoo-lock", "a")
        self.assertNotIn("protocol", a.init(self.path, "mutex"))
        a.send_raw(json.dumps({"id": 5, "op": "cycle", "timeout_ms": 100, "hold_us": 1}))
        self.assertNotEqual(a.p.wait(15), 0, "a v2 request after a v1 init exits non-zero")


def _on_signal(signum, _frame):
    raise KeyboardInterrupt("signal %d" % signum)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGHUP, _on_signal)
    try:
        unittest.main()
    finally:  # unittest.main exits via SystemExit; Ctrl-C skips tearDownModule
        stop_server()
