#!/usr/bin/env python3
"""Scripted worker-protocol sessions against the Curator worker (run by test.sh).

    protocol_test.py ZK_HOST:PORT RUN_CMD LOGDIR

RUN_CMD is the worker command without its recipe argument (e.g. "run.sh OUTDIR").
Every worker's stderr goes to LOGDIR/<name>.stderr.log. Exits 0 when every check
passed, 1 otherwise. Talks to ZooKeeper itself through a tiny client (just enough of
the wire protocol to list, stat, read and delete nodes and to close a session by id
and password), so it needs nothing but the standard library.
"""

import base64
import json
import os
import queue
import shlex
import signal
import socket
import struct
import subprocess
import sys
import threading
import time

ZK = sys.argv[1]
RUN = shlex.split(sys.argv[2])
LOGDIR = sys.argv[3]
RUN_ID = "t%d" % os.getpid()
failures = []
passes = 0


# Every worker process started, so that SIGTERM/SIGINT can end them all.
PROCS = []


def _terminate(signum, _frame):
    for p in PROCS:
        if p.poll() is None:
            p.kill()
    for p in PROCS:
        try:
            p.wait(timeout=5)
        except Exception:
            pass
    if os.environ.get("ZLC_ZK_PID"):
        try:
            os.kill(int(os.environ["ZLC_ZK_PID"]), signal.SIGCONT)  # in case it was paused
        except OSError:
            pass
    sys.stdout.flush()
    os._exit(128 + signum)  # not sys.exit: worker threads would keep the process alive


signal.signal(signal.SIGTERM, _terminate)
signal.signal(signal.SIGINT, _terminate)


def check(cond, what, detail=""):
    global passes
    if cond:
        passes += 1
        print("  ok    %s" % what)
    else:
        failures.append(what)
        print("  FAIL  %s %s" % (what, detail))


# --------------------------------------------------------------- ZooKeeper client


class ZKError(Exception):
    def __init__(self, code):
        super().__init__("zookeeper error %d" % code)
        self.code = code


NONODE = -101


class MiniZK:
    """A synchronous ZooKeeper client: one request at a time, no watches."""

    def __init__(self, hostport, session_id=0, passwd=b"\0" * 16, timeout_ms=4000):
        host, port = hostport.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=10)
        self.xid = 0
        req = struct.pack(">iqiq", 0, 0, timeout_ms, session_id) + self._buf(passwd) + b"\0"
        self._send(req)
        resp = self._recv()
        _, self.timeout, self.session_id = struct.unpack(">iiq", resp[:16])
        if self.session_id == 0:
            raise ZKError(-112)  # session expired

    @staticmethod
    def _buf(b):
        return struct.pack(">i", len(b)) + b

    @staticmethod
    def _str(s):
        return MiniZK._buf(s.encode())

    def _send(self, payload):
        self.s.sendall(struct.pack(">i", len(payload)) + payload)

    def _recvn(self, n):
        out = b""
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise EOFError("zookeeper closed the connection")
            out += chunk
        return out

    def _recv(self):
        (n,) = struct.unpack(">i", self._recvn(4))
        return self._recvn(n)

    def call(self, typ, body):
        self.xid += 1
        self._send(struct.pack(">ii", self.xid, typ) + body)
        while True:
            resp = self._recv()
            xid, _zxid, err = struct.unpack(">iqi", resp[:16])
            if xid == self.xid:
                break  # skip pings/notifications (-2, -1)
        if err != 0:
            raise ZKError(err)
        return resp[16:]

    @staticmethod
    def _stat(b, off):
        f = struct.unpack(">qqqqiiiqiiq", b[off:off + 68])
        keys = ["czxid", "mzxid", "ctime", "mtime", "version", "cversion", "aversion",
                "ephemeralOwner", "dataLength", "numChildren", "pzxid"]
        return dict(zip(keys, f))

    def children(self, path):
        b = self.call(12, self._str(path) + b"\0")
        (n,) = struct.unpack(">i", b[:4])
        off, out = 4, []
        for _ in range(n):
            (ln,) = struct.unpack(">i", b[off:off + 4])
            out.append(b[off + 4:off + 4 + ln].decode())
            off += 4 + ln
        return out

    def exists(self, path):
        try:
            return self._stat(self.call(3, self._str(path) + b"\0"), 0)
        except ZKError as e:
            if e.code == NONODE:
                return None
            raise

    def get(self, path):
        b = self.call(4, self._str(path) + b"\0")
        (ln,) = struct.unpack(">i", b[:4])
        return b[4:4 + max(ln, 0)]

    def delete(self, path):
        self.call(2, self._str(path) + struct.pack(">i", -1))

    def close(self):
        try:
            self.call(-11, b"")
        except Exception:
            pass
        self.s.close()


class Z:
    """ZooKeeper helpers that each use a fresh, short-lived session (MiniZK does not
    ping, and the test server caps sessions at 4 s)."""

    def __getattr__(self, name):
        def f(*args):
            c = MiniZK(ZK)
            try:
                return getattr(c, name)(*args)
            finally:
                c.close()
        return f


def own_nodes(_zk, parent, sid):
    """Children of parent whose ephemeral owner is sid: [(path, stat)]."""
    out = []
    zk = MiniZK(ZK)
    try:
        names = zk.children(parent)
    except ZKError as e:
        zk.close()
        if e.code == NONODE:
            return out
        raise
    for c in names:
        st = zk.exists(parent + "/" + c)
        if st and st["ephemeralOwner"] == sid:
            out.append((parent + "/" + c, st))
    zk.close()
    return out


# --------------------------------------------------------------- workers


class Worker:
    def __init__(self, name, recipe):
        self.name = name
        self.recipe = recipe
        self.log = open(os.path.join(LOGDIR, name + ".stderr.log"), "w")
        self.started = time.monotonic()
        self.p = subprocess.Popen(RUN + [recipe], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, bufsize=0)
        PROCS.append(self.p)
        self.q = queue.Queue()
        self.events = []
        self.bad_lines = []
        self.next_id = 0
        self.session = None
        t = threading.Thread(target=self._read, daemon=True)
        t.start()

    def _read(self):
        for raw in self.p.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            try:
                m = json.loads(line)
                if not isinstance(m, dict) or ("id" in m) == ("event" in m):
                    raise ValueError("neither a reply nor an event")
            except ValueError as e:
                self.bad_lines.append(line)
                print("  [%s] non-protocol stdout line: %r (%s)" % (self.name, line, e))
                continue
            self.q.put(m)
        self.q.put(None)

    def _take(self, timeout):
        m = self.q.get(timeout=timeout)
        if m is not None and "event" in m:
            self.events.append(m)
            if m["event"] == "session":
                self.session = m
        return m

    def send_raw(self, line):
        self.p.stdin.write((line + "\n").encode())
        self.p.stdin.flush()

    def _send(self, op, fields):
        """Sends request op with fields under a fresh id; returns the id and the message."""
        rid = self.next_id
        self.next_id += 1
        msg = {"id": rid, "op": op}
        msg.update(fields)
        self.send_raw(json.dumps(msg))
        return rid, msg

    def _answer(self, rid, msg, deadline):
        """The next message for request rid (events are kept aside), by deadline."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("%s: no reply to %s in time" % (self.name, msg))
            try:
                m = self._take(left)
            except queue.Empty:
                continue
            if m is None:
                raise AssertionError("%s: exited (rc %s) before answering %s" % (self.name, self.p.wait(), msg))
            if "event" in m:
                continue
            if m.get("id") != rid:
                raise AssertionError("%s: %s does not answer %s" % (self.name, m, msg))
            return m

    def req(self, op, timeout=20, **fields):
        t0 = time.monotonic()
        rid, msg = self._send(op, fields)
        m = self._answer(rid, msg, t0 + timeout)
        m["_ms"] = (time.monotonic() - t0) * 1000
        return m

    def cycle(self, timeout=30, **fields):
        """Protocol v2: sends a cycle request; returns its step reports and reply. Each
        report's mono_ns (System.nanoTime, CLOCK_MONOTONIC like time.monotonic_ns
        here) must lie between the send and its arrival, and go forward."""
        sent = last = time.monotonic_ns()
        rid, msg = self._send("cycle", fields)
        deadline = time.monotonic() + timeout
        reports = []
        while True:
            m = self._answer(rid, msg, deadline)
            if "type" in m:
                check(m["type"] == "ok", "%s: cycle reply ok" % self.name, str(m))
                return reports, m
            now = time.monotonic_ns()
            check(sent <= last <= m.get("mono_ns", -1) <= now,
                  "%s: report time between the send and its arrival, going forward" % self.name, str(m))
            last = m.get("mono_ns", last)
            reports.append(m)

    def drain(self, wait=0.0):
        """Collects events that arrive within wait seconds."""
        deadline = time.monotonic() + wait
        while True:
            try:
                m = self._take(max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if m is None:
                return
            if "event" not in m:
                failures.append("%s: unexpected reply %s" % (self.name, m))

    def wait_event(self, kind, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for e in self.events:
                if e["event"] == kind and not e.get("_seen"):
                    e["_seen"] = True
                    return e
            self.drain(0.1)
        return None

    def expect(self, what, op, typ, timeout=20, error=None, **fields):
        r = self.req(op, timeout=timeout, **fields)
        ok = r["type"] == typ and (error is None or error in r.get("error", ""))
        check(ok, "%s: %s" % (self.name, what), "got %s" % r)
        return r

    def init(self, kind, path, permits=1, **extra):
        fields = dict(connect=ZK, session_timeout_ms=4000, path=path, kind=kind, permits=permits,
                      worker=self.next_id)
        fields.update(extra)
        r = self.req("init", **fields)
        r["_since_start_ms"] = (time.monotonic() - self.started) * 1000
        return r

    def sid(self):
        return int(self.session["session_id"], 16)

    def close(self):
        if self.p.poll() is None:
            try:
                r = self.req("close", timeout=10)
                check(r["type"] == "ok", "%s: close -> ok" % self.name, "got %s" % r)
            except (AssertionError, BrokenPipeError) as e:
                check(False, "%s: close" % self.name, str(e))
            try:
                self.p.stdin.close()
            except Exception:
                pass
            try:
                rc = self.p.wait(timeout=10)
                check(rc == 0, "%s: exits 0 after close" % self.name, "rc %s" % rc)
            except subprocess.TimeoutExpired:
                check(False, "%s: exits after close" % self.name)
                self.p.kill()
        self.p.wait()
        check(not self.bad_lines, "%s: stdout carried only protocol lines" % self.name, str(self.bad_lines))
        self.log.close()

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.log.close()


def started(w, kind, path, **extra):
    r = w.init(kind, path, **extra)
    check(r["type"] == "ok", "%s: init %s %s -> ok" % (w.name, w.recipe, kind), "got %s" % r)
    e = w.wait_event("session", 5)
    check(e is not None and e["session_id"].startswith("0x") and len(base64.b64decode(e.get("passwd", ""))) == 16,
          "%s: session event with id and 16-byte passwd" % w.name, "got %s" % e)
    return r


# --------------------------------------------------------------- scenarios


def base(name):
    return "/zlc/%s/%s" % (RUN_ID, name)


def test_mutex(zk):
    print("curator-mutex: mutual exclusion")
    path = base("mutex")
    a, b = Worker("mutex-a", "curator-mutex"), Worker("mutex-b", "curator-mutex")
    try:
        r = started(a, "mutex", path)
        print("  (worker start-up to init reply: %.0f ms; init itself %.0f ms)" % (r["_since_start_ms"], r["_ms"]))
        started(b, "mutex", path)
        ra = a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        nodes = own_nodes(zk, path, a.sid())
        check(len(nodes) == 1 and ra.get("token") == nodes[0][1]["czxid"],
              "mutex-a: token is the czxid of its lock node", "token %s nodes %s" % (ra.get("token"), nodes))
        a.expect("second acquire while holding -> fail (no re-entry)", "acquire", "fail", timeout_ms=200)
        rb = b.expect("acquire while A holds -> fail timeout", "acquire", "fail", error="timeout", timeout_ms=500)
        check(400 <= rb["_ms"] < 3000, "mutex-b: the timed-out acquire waited about its timeout", "%.0f ms" % rb["_ms"])
        check(own_nodes(zk, path, b.sid()) == [], "mutex-b: no node left after the timeout")
        a.expect("release -> ok", "release", "ok")
        check(own_nodes(zk, path, a.sid()) == [], "mutex-a: its node is gone after release")
        b.expect("acquire after A released -> ok", "acquire", "ok", timeout_ms=2000)
        a.expect("release when not holding -> fail not held", "release", "fail", error="not held")
        # B waits in the queue while A is blocked: A's acquire gets the lock when B releases.
        a.send_raw(json.dumps({"id": a.next_id, "op": "acquire", "timeout_ms": 5000}))
        rid = a.next_id
        a.next_id += 1
        time.sleep(0.3)
        b.expect("release -> ok", "release", "ok")
        m = a._take(10)
        while m is not None and "event" in m:
            m = a._take(10)
        check(m is not None and m.get("id") == rid and m["type"] == "ok", "mutex-a: waiting acquire granted when B released",
              "got %s" % m)
        # EOF while an acquire waits: the worker closes its session and exits 0 at once.
        c = Worker("mutex-c", "curator-mutex")
        started(c, "mutex", path)
        c.send_raw(json.dumps({"id": c.next_id, "op": "acquire", "timeout_ms": 20000}))
        time.sleep(0.5)
        check(len(own_nodes(zk, path, c.sid())) == 1, "mutex-c: waits with a node in the queue")
        t0 = time.monotonic()
        c.p.stdin.close()
        rc = c.p.wait(timeout=10)
        check(rc == 0 and time.monotonic() - t0 < 3, "mutex-c: EOF during a waiting acquire -> exit 0 at once",
              "rc %s after %.1fs" % (rc, time.monotonic() - t0))
        check(own_nodes(zk, path, c.sid()) == [], "mutex-c: its session was closed (no node left)")
        c.kill()
        a.expect("acquire with a mode -> fail", "acquire", "fail", timeout_ms=100, mode="read")
        a.expect("release -> ok", "release", "ok")
        a.expect("read on kind mutex -> fail", "read", "fail")
        a.expect("acquire with negative timeout -> fail", "acquire", "fail", timeout_ms=-1)
    finally:
        a.close()
        b.close()


def test_release_after_delete(zk):
    print("curator-mutex: release after the lock node was deleted behind the worker's back")
    path = base("deleted")
    a, b = Worker("del-a", "curator-mutex"), Worker("del-b", "curator-mutex")
    try:
        started(a, "mutex", path)
        started(b, "mutex", path)
        a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        nodes = own_nodes(zk, path, a.sid())
        check(len(nodes) == 1, "del-a: owns one lock node", str(nodes))
        for p, _ in nodes:
            zk.delete(p)
        b.expect("acquire once A's node was deleted -> ok", "acquire", "ok", timeout_ms=2000)
        a.expect("release of the deleted node -> fail not held", "release", "fail", error="not held")
        a.expect("acquire again (B holds) -> fail timeout", "acquire", "fail", error="timeout", timeout_ms=300)
        b.expect("release -> ok", "release", "ok")
        a.expect("acquire after B released -> ok", "acquire", "ok", timeout_ms=2000)
        a.expect("release -> ok", "release", "ok")
    finally:
        a.close()
        b.close()


def test_semaphore(zk):
    print("curator-semaphore: permits 2")
    path = base("sem")
    ws = [Worker("sem-%s" % n, "curator-semaphore") for n in "abc"]
    a, b, c = ws
    try:
        for w in ws:
            started(w, "semaphore", path, permits=2)
        ra = a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        leases = own_nodes(zk, path + "/leases", a.sid())
        check(len(leases) == 1 and ra.get("token") == leases[0][1]["czxid"],
              "sem-a: token is the czxid of its lease node", "token %s leases %s" % (ra.get("token"), leases))
        b.expect("acquire -> ok (second permit)", "acquire", "ok", timeout_ms=2000)
        c.expect("third acquire -> fail timeout", "acquire", "fail", error="timeout", timeout_ms=500)
        check(own_nodes(zk, path + "/leases", c.sid()) == [], "sem-c: no lease node left after the timeout")
        a.expect("release -> ok", "release", "ok")
        c.expect("acquire after A released -> ok", "acquire", "ok", timeout_ms=2000)
        a.expect("acquire while B and C hold -> fail timeout", "acquire", "fail", error="timeout", timeout_ms=300)
        # A lease deleted behind C's back: its release fails.
        for p, _ in own_nodes(zk, path + "/leases", c.sid()):
            zk.delete(p)
        c.expect("release of a deleted lease -> fail not held", "release", "fail", error="not held")
        b.expect("release -> ok", "release", "ok")
        a.expect("release when not holding -> fail", "release", "fail", error="not held")
    finally:
        for w in ws:
            w.close()


def test_semaphore_bad_init():
    print("curator-semaphore: init errors")
    w = Worker("sem-bad", "curator-semaphore")
    try:
        w.expect("init kind mutex -> fail", "init", "fail", error="does not support kind mutex",
                 connect=ZK, session_timeout_ms=4000, path=base("x"), kind="mutex", permits=1, worker=1)
        w.expect("init permits 0 -> fail", "init", "fail", error="permits",
                 connect=ZK, session_timeout_ms=4000, path=base("x"), kind="semaphore", permits=0, worker=1)
        w.expect("init with a relative path -> fail", "init", "fail", error="path",
                 connect=ZK, session_timeout_ms=4000, path="rel/path", kind="semaphore", permits=2, worker=1)
        w.expect("init after failed inits -> ok", "init", "ok",
                 connect=ZK, session_timeout_ms=4000, path=base("x"), kind="semaphore", permits=2, worker=1)
    finally:
        w.close()


def test_rwlock(zk):
    print("curator-rwlock: readers share, a writer excludes")
    path = base("rw")
    ws = [Worker("rw-%s" % n, "curator-rwlock") for n in "abc"]
    a, b, c = ws
    try:
        for w in ws:
            started(w, "rwlock", path)
        a.expect("read acquire -> ok", "acquire", "ok", timeout_ms=2000, mode="read")
        b.expect("second read acquire -> ok (shared)", "acquire", "ok", timeout_ms=2000, mode="read")
        c.expect("write acquire while readers hold -> fail timeout", "acquire", "fail", error="timeout",
                 timeout_ms=500, mode="write")
        a.expect("release -> ok", "release", "ok")
        c.expect("write acquire while one reader holds -> fail timeout", "acquire", "fail", error="timeout",
                 timeout_ms=300, mode="write")
        b.expect("release -> ok", "release", "ok")
        c.expect("write acquire, no readers -> ok", "acquire", "ok", timeout_ms=2000, mode="write")
        a.expect("read acquire while a writer holds -> fail timeout", "acquire", "fail", error="timeout",
                 timeout_ms=300, mode="read")
        b.expect("write acquire while a writer holds -> fail timeout", "acquire", "fail", error="timeout",
                 timeout_ms=300, mode="write")
        c.expect("release -> ok", "release", "ok")
        a.expect("read acquire after the writer released -> ok", "acquire", "ok", timeout_ms=2000, mode="read")
        a.expect("release -> ok", "release", "ok")
        a.expect("acquire without mode -> fail", "acquire", "fail", timeout_ms=100)
        check(own_nodes(zk, path, a.sid()) + own_nodes(zk, path, b.sid()) + own_nodes(zk, path, c.sid()) == [],
              "rwlock: no lock nodes left")
    finally:
        for w in ws:
            w.close()


def test_reentrant(zk):
    print("curator-reentrant: acquire twice, release twice")
    path = base("re")
    a, b = Worker("re-a", "curator-reentrant"), Worker("re-b", "curator-reentrant")
    try:
        started(a, "reentrant", path)
        started(b, "mutex", path)
        r1 = a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        r2 = a.expect("acquire again while holding -> ok (re-entered)", "acquire", "ok", timeout_ms=2000)
        check(r1.get("token") is not None and r1.get("token") == r2.get("token"),
              "re-a: both levels carry the same token", "%s %s" % (r1.get("token"), r2.get("token")))
        check(len(own_nodes(zk, path, a.sid())) == 1, "re-a: one lock node for two levels")
        b.expect("acquire while A holds two levels -> fail timeout", "acquire", "fail", error="timeout", timeout_ms=300)
        a.expect("first release -> ok", "release", "ok")
        check(len(own_nodes(zk, path, a.sid())) == 1, "re-a: node still there after one release")
        b.expect("acquire while A holds one level -> fail timeout", "acquire", "fail", error="timeout", timeout_ms=300)
        a.expect("second release -> ok", "release", "ok")
        check(own_nodes(zk, path, a.sid()) == [], "re-a: node gone after the second release")
        a.expect("third release -> fail not held", "release", "fail", error="not held")
        b.expect("acquire after A released both -> ok", "acquire", "ok", timeout_ms=2000)
        b.expect("release -> ok", "release", "ok")
        # Two levels held, node deleted behind A's back: the next release fails and
        # ends both levels.
        a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        a.expect("acquire again -> ok", "acquire", "ok", timeout_ms=2000)
        for p, _ in own_nodes(zk, path, a.sid()):
            zk.delete(p)
        a.expect("release after the node was deleted -> fail not held", "release", "fail", error="not held")
        a.expect("release again -> fail not held (every level ended)", "release", "fail", error="not held")
        a.expect("acquire afresh -> ok", "acquire", "ok", timeout_ms=2000)
        check(len(own_nodes(zk, path, a.sid())) == 1, "re-a: a new lock node")
        a.expect("release -> ok", "release", "ok")
    finally:
        a.close()
        b.close()


def test_counter(zk, fenced):
    tag = "fenced" if fenced else "unfenced"
    print("curator-mutex: counter, %s" % tag)
    path = base("cnt-%s" % tag)
    cpath = base("counter-%s" % tag)
    a, b = Worker("cnt-%s-a" % tag, "curator-mutex"), Worker("cnt-%s-b" % tag, "curator-mutex")
    try:
        started(a, "counter", path, counter_path=cpath, fenced=fenced)
        started(b, "counter", path, counter_path=cpath, fenced=fenced)
        a.expect("read while not holding -> fail", "read", "fail", error="not held")
        a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        r = a.expect("read of a missing counter -> ok 0", "read", "ok")
        check(r.get("value") == 0, "%s: value 0" % a.name, str(r))
        a.expect("write 17 (creates the counter) -> ok", "write", "ok", value=17)
        r = a.expect("read -> ok 17", "read", "ok")
        check(r.get("value") == 17, "%s: value 17" % a.name, str(r))
        a.expect("write 18 -> ok", "write", "ok", value=18)
        check(zk.get(cpath) == b"18", "%s: the counter znode holds 18" % a.name, repr(zk.get(cpath)))
        a.expect("release -> ok", "release", "ok")
        a.expect("write while not holding -> fail", "write", "fail", error="not held", value=99)
        b.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        r = b.expect("read -> ok 18", "read", "ok")
        check(r.get("value") == 18, "%s: value 18" % b.name, str(r))
        # The lock node deleted behind B's back (its lock is gone).
        for p, _ in own_nodes(zk, path, b.sid()):
            zk.delete(p)
        if fenced:
            b.expect("write after the lock node was deleted -> fail fenced", "write", "fail", error="fenced", value=19)
            check(zk.get(cpath) == b"18", "%s: the fenced write did not land" % b.name, repr(zk.get(cpath)))
        else:
            b.expect("write after the lock node was deleted -> ok (unfenced writes blindly)", "write", "ok", value=19)
            check(zk.get(cpath) == b"19", "%s: the unfenced write landed" % b.name, repr(zk.get(cpath)))
        b.expect("release -> fail not held", "release", "fail", error="not held")
    finally:
        a.close()
        b.close()


def test_lost(zk, server_pid):
    print("curator-mutex: lost event when the connection is suspended (server SIGSTOPped)")
    path = base("lost")
    a, b = Worker("lost-a", "curator-mutex"), Worker("lost-b", "curator-mutex")
    try:
        started(a, "mutex", path)
        started(b, "mutex", path)
        a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        os.kill(server_pid, signal.SIGSTOP)
        try:
            e = a.wait_event("lost", 6)
        finally:
            os.kill(server_pid, signal.SIGCONT)
        check(e is not None and "suspended" in e.get("error", ""), "lost-a: lost event (connection suspended)", str(e))
        time.sleep(0.5)
        a.drain(0.5)
        check(len([x for x in a.events if x["event"] == "lost"]) == 1, "lost-a: exactly one lost event")
        a.expect("release after lost -> fail not held", "release", "fail", error="not held")
        # Whether or not the session survived, A's old node must not block anyone.
        b.expect("B acquires once A's hold was given up -> ok", "acquire", "ok", timeout_ms=8000, timeout=30)
        b.expect("release -> ok", "release", "ok")
        a.expect("A acquires again -> ok", "acquire", "ok", timeout_ms=8000, timeout=30)
        check(len(own_nodes(zk, path, a.sid())) == 1, "lost-a: exactly one node of its session")
        a.expect("release -> ok", "release", "ok")

        print("curator-mutex: lost event when the session is expired (closed with its id and passwd)")
        a.expect("acquire -> ok", "acquire", "ok", timeout_ms=2000)
        old = a.session["session_id"]
        evil = MiniZK(ZK, int(old, 16), base64.b64decode(a.session["passwd"]))
        evil.close()  # closes A's session on the server
        e = a.wait_event("lost", 10)
        check(e is not None, "lost-a: lost event after its session was closed", str(e))
        s = a.wait_event("session", 15)
        check(s is not None and s["session_id"] != old, "lost-a: session event for the new session", str(s))
        a.expect("release after lost -> fail not held", "release", "fail", error="not held")
        a.expect("acquire in the new session -> ok", "acquire", "ok", timeout_ms=4000)
        a.expect("release -> ok", "release", "ok")
    finally:
        a.close()
        b.close()


def steps(reports):
    return [(m["f"], m["step"]) for m in reports]


def test_v2(zk):
    print("protocol v2: agreed at init, clock, cycles (mutex, re-entered mutex)")
    path = base("v2")
    a, b = Worker("v2-a", "curator-mutex"), Worker("v2-b", "curator-mutex")
    r = Worker("v2-r", "curator-reentrant")
    try:
        ra = started(a, "mutex", path, protocol=2)
        check(ra.get("protocol") == 2, "v2-a: init offering v2 -> ok with protocol 2", str(ra))
        rb = started(b, "mutex", path)
        check("protocol" not in rb, "v2-b: init without the offer stays v1", str(rb))
        c1, c2 = a.req("clock"), a.req("clock")
        check(c1["type"] == "ok" and c1["mono_ns"] <= c2["mono_ns"], "v2-a: clock -> ok mono_ns", "%s %s" % (c1, c2))
        reports, _ = a.cycle(timeout_ms=3000, hold_us=200000)
        check(steps(reports) == [("acquire", "invoke"), ("acquire", "ok"), ("release", "invoke"), ("release", "ok")],
              "v2-a: a cycle on a free lock reports acquire and release", str(reports))
        if len(reports) == 4:
            check(isinstance(reports[1].get("token"), int), "v2-a: the acquire ok report carries the token")
            check(reports[2]["mono_ns"] - reports[1]["mono_ns"] >= 200_000_000, "v2-a: held for hold_us")
        check(own_nodes(zk, path, a.sid()) == [], "v2-a: nothing left after the cycle")
        b.expect("B holds -> ok", "acquire", "ok", timeout_ms=2000)
        reports, _ = a.cycle(timeout_ms=500, hold_us=1000)
        check(steps(reports) == [("acquire", "invoke"), ("acquire", "fail")] and reports[1].get("error") == "timeout",
              "v2-a: a cycle on a held lock times out and releases nothing", str(reports))
        b.expect("release -> ok", "release", "ok")
        started(r, "reentrant", base("v2r"), protocol=2)
        reports, _ = r.cycle(timeout_ms=3000, hold_us=1000, depth=2)
        check(steps(reports) == [("acquire", "invoke"), ("acquire", "ok")] * 2 + [("release", "invoke"), ("release", "ok")] * 2,
              "v2-r: a cycle of depth 2 acquires twice and releases twice", str(reports))
        b.send_raw(json.dumps({"id": 99, "op": "cycle", "timeout_ms": 100, "hold_us": 1}))
        check(b.p.wait(timeout=10) != 0, "v2-b: a cycle after a v1 init exits non-zero")
    finally:
        a.close()
        r.close()
        b.kill()


def test_protocol_errors():
    # Malformed and out-of-order lines and EOF are zlockcheck conformance's rules
    # (bad-request, eof), run on this worker by conformance/integration_test.go.
    print("protocol: unknown recipe, no server")
    w = Worker("proto-recipe", "curator-frob")
    w.expect("unknown recipe -> init fails", "init", "fail", error="unknown recipe",
             connect=ZK, session_timeout_ms=4000, path=base("x"), kind="mutex", permits=1, worker=1)
    w.close()
    w = Worker("proto-noserver", "curator-mutex")
    r = w.req("init", connect="127.0.0.1:1", session_timeout_ms=500, path=base("x"), kind="mutex", permits=1, worker=1)
    check(r["type"] == "info" and "no session" in r.get("error", ""),
          "init against no server -> info (no session; not a refusal)", str(r))
    w.close()


def main():
    server_pid = int(os.environ["ZLC_ZK_PID"])
    zk = Z()
    t0 = time.monotonic()
    try:
        test_mutex(zk)
        test_release_after_delete(zk)
        test_semaphore(zk)
        test_semaphore_bad_init()
        test_rwlock(zk)
        test_reentrant(zk)
        test_counter(zk, fenced=False)
        test_counter(zk, fenced=True)
        test_protocol_errors()
        test_v2(zk)
        test_lost(zk, server_pid)
    except AssertionError as e:
        failures.append(str(e))
        print("  FAIL  %s" % e)
    print("%d checks passed, %d failed (%.1f s)" % (passes, len(failures), time.monotonic() - t0))
    for f in failures:
        print("  failed: %s" % f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
