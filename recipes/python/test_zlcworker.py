#!/usr/bin/python3
"""Tests of zlcworker.py, the worker protocol of recipes/python, through a real process.

The recipe behind the protocol here is a fake, in this test only (FAKE below): a lock
in the worker's memory whose behaviour each request's timeout picks, so that every
answer of the protocol can be asked for. The real recipes are tested against real
servers (zlockcheck conformance, cmd/zlockcheck's end-to-end tests).

    /usr/bin/python3 recipes/python/test_zlcworker.py     exit 0 when every check passed
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))

# The fake recipe: acquire's timeout_ms says what happens (1: time runs out, 2: refused,
# 3: unknown outcome, 4: ok, then lost 50 ms later, 5: ok, lost before it returns, 6: the
# recipe gives up); init's kind "refuse" is refused; write fails with an unknown outcome
# once, then as write's value says.
FAKE = r'''
import sys, threading
sys.path.insert(0, %(here)r)
import zlcworker

class Fake:
    def __init__(self):
        self.held = 0
        self.writes = 0
    def init(self, init, events):
        if init.kind == "refuse":
            raise zlcworker.Refused("kind refuse is refused")
        self.events = events
        print("a stray print, which must not reach the protocol")
        events.session("0x2a", "cGFzcw==")
    def acquire(self, timeout_ms, mode):
        if timeout_ms == 1:
            return None
        if timeout_ms == 2:
            raise zlcworker.Refused("no such acquire")
        if timeout_ms == 3:
            raise zlcworker.Unknown("the reply was lost")
        if timeout_ms == 6:
            raise zlcworker.GaveUp("stuck")
        self.held += 1
        if timeout_ms == 4:
            threading.Timer(0.05, self.events.lost, args=("gone",)).start()
        if timeout_ms == 5:
            self.events.lost("ran out as it was granted")
        return zlcworker.Acquired(token=self.held, lock={"keys": ["k"], "value": "v", "mode": mode})
    def release(self):
        if self.held == 0:
            raise zlcworker.NotHeld("nothing held")
        self.held -= 1
    def read(self):
        return 7
    def write(self, value):
        self.writes += 1
        if self.writes == 1:
            raise ConnectionError("reset")
        if value == 13:
            raise zlcworker.Fenced("older token")
    def close(self):
        open(%(closed)r, "w").write("closed")

zlcworker.serve(Fake())
'''


class Worker:
    def __init__(self, test):
        d = tempfile.mkdtemp(prefix="zlc-pytest-")
        self.closed = os.path.join(d, "closed")
        script = os.path.join(d, "fake.py")
        with open(script, "w") as f:
            f.write(FAKE % {"here": HERE, "closed": self.closed})
        test.addCleanup(lambda: subprocess.run(["rm", "-rf", d]))
        self.p = subprocess.Popen([sys.executable, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True)
        test.addCleanup(self.kill)
        self.next_id = 0

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.p.stdout.close()
        self.p.stdin.close()

    def send(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def req(self, op, **fields):
        self.next_id += 1
        self.send(json.dumps(dict(id=self.next_id, op=op, **fields)))
        return self.next_id

    def line(self):
        line = self.p.stdout.readline()
        if not line:
            raise AssertionError("EOF on the worker's stdout")
        return json.loads(line)

    def call(self, op, **fields):
        rid = self.req(op, **fields)
        r = self.line()
        assert r["id"] == rid, r
        return r

    def init(self, **fields):
        f = dict(connect="h:1", session_timeout_ms=1000, path="/l", kind="mutex", protocol=3)
        f.update(fields)
        return self.call("init", **f)


class ZlcWorkerTest(unittest.TestCase):
    def test_redis_cluster_refused(self):
        # No Python recipe follows a Redis Cluster's slots yet: an init naming one
        # fails before the recipe connects anywhere.
        w = Worker(self)
        self.assertEqual(w.init(redis_cluster=True), {"id": 1, "type": "fail",
                         "error": "init: redis_cluster: the Python workers have no Redis Cluster mode yet (docs/redis.md)"})
        self.assertEqual(w.init(), {"id": 2, "type": "ok", "protocol": 2})

    def test_requests(self):
        w = Worker(self)
        self.assertEqual(w.init(kind="refuse"), {"id": 1, "type": "fail", "error": "kind refuse is refused"})
        # A failed init may be sent again; the session the recipe reports comes after
        # init's ok, never before it, and nothing else reaches stdout.
        self.assertEqual(w.init(), {"id": 2, "type": "ok", "protocol": 2})
        self.assertEqual(w.line(), {"event": "session", "session_id": "0x2a", "passwd": "cGFzcw=="})
        self.assertEqual(w.call("acquire", timeout_ms=10),
                         {"id": 3, "type": "ok", "token": 1, "lock": {"keys": ["k"], "value": "v", "mode": None}})
        self.assertEqual(w.call("release"), {"id": 4, "type": "ok"})
        self.assertEqual(w.call("release"), {"id": 5, "type": "fail", "error": "not held: nothing held"})
        self.assertEqual(w.call("acquire", timeout_ms=1), {"id": 6, "type": "fail", "error": "timeout"})
        self.assertEqual(w.call("acquire", timeout_ms=2), {"id": 7, "type": "fail", "error": "no such acquire"})
        self.assertEqual(w.call("acquire", timeout_ms=3), {"id": 8, "type": "info", "error": "the reply was lost"})
        self.assertEqual(w.call("acquire", timeout_ms=10, mode="read")["lock"]["mode"], "read")
        self.assertEqual(w.call("read"), {"id": 10, "type": "ok", "value": 7})
        # The first write's outcome is unknown, so the fenced refusal after its retry is
        # unknown too: the first attempt may have been applied.
        r = w.call("write", value=13)
        self.assertEqual(r["type"], "info")
        self.assertIn("fenced: older token (after 1 attempts whose outcome is unknown)", r["error"])
        self.assertEqual(w.call("write", value=14), {"id": 12, "type": "ok"})
        self.assertGreater(w.call("clock")["mono_ns"], 0)
        # A loss reported while the acquire runs comes after its reply, where the
        # harness reads it as that hold's end.
        self.assertEqual(w.call("acquire", timeout_ms=5)["type"], "ok")
        self.assertEqual(w.line(), {"event": "lost", "error": "ran out as it was granted"})
        self.assertEqual(w.call("close"), {"id": 15, "type": "ok"})
        self.assertEqual(w.p.wait(5), 0)
        self.assertTrue(os.path.exists(w.closed), "close did not close the recipe")

    def test_cycle(self):
        w = Worker(self)
        w.init()
        w.line()  # the session
        rid = w.req("cycle", timeout_ms=10, hold_us=1000, depth=2)
        steps = [w.line() for _ in range(8)]
        self.assertEqual([(s["step"], s["f"]) for s in steps],
                         [("invoke", "acquire"), ("ok", "acquire"), ("invoke", "acquire"), ("ok", "acquire"),
                          ("invoke", "release"), ("ok", "release"), ("invoke", "release"), ("ok", "release")])
        self.assertTrue(all(s["id"] == rid for s in steps))
        stamps = [s["mono_ns"] for s in steps]
        self.assertEqual(stamps, sorted(stamps))
        self.assertGreaterEqual(stamps[4] - stamps[3], 1_000_000, "held less than hold_us")
        self.assertEqual(steps[1]["token"], 1)
        self.assertEqual(w.line(), {"id": rid, "type": "ok"})
        # A lost event while holding ends the cycle with no release.
        rid = w.req("cycle", timeout_ms=4, hold_us=2_000_000)
        self.assertEqual([w.line()["step"] for _ in range(2)], ["invoke", "ok"])
        self.assertEqual(w.line(), {"event": "lost", "error": "gone"})
        self.assertEqual(w.line(), {"id": rid, "type": "ok"})
        # A loss the recipe reports while the acquire runs comes right after the ok
        # report, where the harness reads it as that hold's end: no hold, no release.
        start = time.monotonic()
        rid = w.req("cycle", timeout_ms=5, hold_us=2_000_000)
        self.assertEqual([(s["step"], s["f"]) for s in (w.line(), w.line())], [("invoke", "acquire"), ("ok", "acquire")])
        self.assertEqual(w.line(), {"event": "lost", "error": "ran out as it was granted"})
        self.assertEqual(w.line(), {"id": rid, "type": "ok"})
        self.assertLess(time.monotonic() - start, 1.5, "held after the loss")
        # A first acquire that fails ends the cycle.
        rid = w.req("cycle", timeout_ms=1)
        self.assertEqual([w.line()["step"] for _ in range(2)], ["invoke", "fail"])
        self.assertEqual(w.line(), {"id": rid, "type": "ok"})
        w.p.stdin.close()  # EOF: close, exit 0
        self.assertEqual(w.p.wait(5), 0)
        self.assertTrue(os.path.exists(w.closed))

    def test_gave_up(self):
        w = Worker(self)
        w.init()
        w.line()
        self.assertEqual(w.call("acquire", timeout_ms=6), {"id": 2, "type": "info", "error": "stuck"})
        # From then on every request but clock and close is info, at once (a write is
        # not retried), and the recipe is not called.
        start = time.monotonic()
        for op, fields in (("release", {}), ("acquire", {"timeout_ms": 10}), ("read", {}), ("write", {"value": 1})):
            r = w.call(op, **fields)
            self.assertEqual((r["type"], r["error"]), ("info", "gave up earlier: stuck"), (op, r))
        self.assertLess(time.monotonic() - start, 1)
        rid = w.req("cycle", timeout_ms=10, hold_us=1000)
        self.assertEqual([(s["step"], s["f"], s.get("error")) for s in (w.line(), w.line())],
                         [("invoke", "acquire", None), ("info", "acquire", "gave up earlier: stuck")])
        self.assertEqual(w.line(), {"id": rid, "type": "ok"})
        self.assertGreater(w.call("clock")["mono_ns"], 0)
        self.assertEqual(w.call("close")["type"], "ok")
        self.assertEqual(w.p.wait(5), 0)
        self.assertTrue(os.path.exists(w.closed))

    def test_v1_has_no_cycle(self):
        w = Worker(self)
        self.assertEqual(w.init(protocol=None), {"id": 1, "type": "ok"})
        w.line()
        w.req("clock")
        self.assertEqual(w.p.wait(5), 1)
        self.assertEqual(w.p.stdout.read(), "")

    def test_protocol_errors(self):
        for lines in (['{"id":1,"op":"acquire","timeout_ms":1}'],  # before init
                      ['not json'],
                      ['{"id":1,"op":"frob"}'],
                      ['{"id":"1","op":"init"}'],
                      ['{"id":1,"op":"init","connect":"h:1","session_timeout_ms":1,"path":"/l","kind":"mutex"}',
                       '{"id":2,"op":"init","connect":"h:1","session_timeout_ms":1,"path":"/l","kind":"mutex"}']):
            w = Worker(self)
            for line in lines:
                w.send(line)
            start = time.monotonic()
            self.assertEqual(w.p.wait(5), 1, lines)
            out = w.p.stdout.read()
            # Only the first init of the last case is answered (ok, then its session).
            self.assertEqual(out.count('"id":'), 1 if len(lines) == 2 else 0, (lines, out))
            self.assertLess(time.monotonic() - start, 5)


if __name__ == "__main__":
    unittest.main(verbosity=2)
