#!/usr/bin/env python3
"""A FAKE worker for the conformance suite's unit tests (conformance_test.go), not a
lock recipe: it speaks the worker protocol over a lock that is an flock'd file, with no
ZooKeeper. init's "connect" is a directory (the test's fake server); the lock is a file
in it named after init's path; a session ends when a file expired-<session id> appears
in it (the fake server's Expire writes it).

Without an argument it keeps every rule. With a MODE it breaks one on purpose:

  init-info         answers init with info                        (rule init)
  garbage-line      writes a line that is not JSON first          (rule replies)
  double-reply      answers every acquire twice                   (rule replies)
  release-fails     answers every release with fail               (rule acquire-release)
  no-timeout        an acquire of a held lock waits forever       (rule timeout)
  early-fail        an acquire of a held lock fails at once       (rule timeout)
  leak-on-timeout   a timed-out acquire keeps waiting and takes
                    the lock later, for good (an orphan waiter)   (rule timeout)
  deaf-waiter       a waiter never sees the release               (rule handover)
  no-lost           says nothing when its session ends            (rule lost)
  close-no-exit     answers close, keeps running                  (rule close)
  eof-exit-1        exits 1 on EOF                                (rule eof)
  ignore-bad-lines  skips request lines it cannot parse           (rule bad-request)
  accept-any-kind   answers ok to init of any kind                (rule refuse)
  v1                never agrees to protocol v2                   (rules cycle, cycle-lost: skipped)
  cycle-no-hold     a cycle releases at once, ignoring hold_us    (rule cycle)
  cycle-release-after-lost  a cycle still releases after it
                    sent lost                                     (rule cycle-lost)
  v3                keeps every rule, speaking protocol v3
  v3-invoke-reports speaks v3 but reports invokes as v2 does      (rule cycle)
  v3-reply-after-last  speaks v3 but replies to a cycle its last
                    report ended                                  (rule cycle)

It speaks protocol v2 when init offers it (clock: time.monotonic_ns; cycle: acquire,
hold, release, each step reported as it happens); in a v3 mode, v3 when offered (one
report per op, with its invoke's time; no reply when the last report ends the cycle).

Standard library only.
"""

import base64
import fcntl
import hashlib
import json
import os
import sys
import threading
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "good"
KINDS = ("mutex", "semaphore", "rwlock", "reentrant", "counter")
out = threading.Lock()


def emit(obj):
    with out:
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()


class FileLock(object):
    def __init__(self, directory, path):
        self.file = os.path.join(directory, hashlib.sha1(path.encode()).hexdigest() + ".lock")
        self.fd = None

    def try_lock(self):
        # An orphan waiter of another live process queues ahead of everyone (as a
        # lock node left behind would in ZooKeeper): see Worker.orphan.
        try:
            with open(self.file + ".orphan") as f:
                pid = int(f.read())
            if pid != os.getpid():
                os.kill(pid, 0)
                return False
        except (OSError, ValueError):
            pass
        fd = os.open(self.file, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self.fd = fd
        return True

    def unlock(self):
        if self.fd is not None:
            os.close(self.fd)  # closing the descriptor drops the flock
            self.fd = None


class Worker(object):
    def __init__(self):
        self.lock = None
        self.directory = None
        self.session = "0x%x" % os.getpid()
        self.mu = threading.Lock()
        self.v2 = False
        self.v3 = False
        self.lost_ev = threading.Event()
        self.step = None  # (cycle id, op) whose outcome emit_reply reports

    def init(self, rid, req):
        if MODE == "init-info":
            return emit({"id": rid, "type": "info", "error": "fake: init-info"})
        if req.get("kind") not in KINDS and MODE != "accept-any-kind":
            return emit({"id": rid, "type": "fail", "error": "unsupported kind %r" % req.get("kind")})
        self.directory = req["connect"]
        self.lock = FileLock(self.directory, req["path"])
        emit({"event": "session", "session_id": self.session,
              "passwd": base64.b64encode(b"fake").decode("ascii")})
        threading.Thread(target=self.watch_session, daemon=True).start()
        if req.get("protocol", 1) >= 3 and MODE.startswith("v3"):
            self.v2 = self.v3 = True
            return emit({"id": rid, "type": "ok", "protocol": 3})
        if req.get("protocol", 1) >= 2 and MODE != "v1":
            self.v2 = True
            return emit({"id": rid, "type": "ok", "protocol": 2})
        emit({"id": rid, "type": "ok"})

    def watch_session(self):
        expired = os.path.join(self.directory, "expired-" + self.session)
        while not os.path.exists(expired):
            time.sleep(0.02)
        with self.mu:
            held = self.lock.fd is not None
            self.lock.unlock()
        if held and MODE != "no-lost":
            emit({"event": "lost", "error": "fake: session expired"})
            self.lost_ev.set()

    def acquire(self, rid, timeout_ms):
        deadline = time.monotonic() + timeout_ms / 1000.0
        first = True
        while True:
            with self.mu:
                if self.lock.try_lock():
                    self.reply(rid, {"id": rid, "type": "ok"})
                    if MODE == "double-reply":
                        emit({"id": rid, "type": "ok"})
                    return
            if first and MODE == "early-fail":
                break
            if first and MODE == "deaf-waiter":
                time.sleep(timeout_ms / 1000.0)
                break
            first = False
            if time.monotonic() >= deadline and MODE != "no-timeout":
                break
            time.sleep(0.01)
        if MODE == "leak-on-timeout":
            # Queued for good (as a lock node left behind would be): a marker every
            # fake's try_lock honours while this process lives, written before the
            # reply; then it takes the lock once free and never lets it go.
            with open(self.lock.file + ".orphan", "w") as f:
                f.write(str(os.getpid()))
            threading.Thread(target=self.orphan, daemon=True).start()
        self.reply(rid, {"id": rid, "type": "fail", "error": "timeout"})

    def orphan(self):
        fd = os.open(self.lock.file, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX)

    def release(self, rid):
        if MODE == "release-fails":
            return emit({"id": rid, "type": "fail", "error": "fake: release-fails"})
        with self.mu:
            held = self.lock is not None and self.lock.fd is not None
            if held:
                self.lock.unlock()
        self.reply(rid, {"id": rid, "type": "ok"} if held else {"id": rid, "type": "fail", "error": "not held"})

    def reply(self, rid, msg):
        """Replies, or during a cycle reports the outcome of its step in flight."""
        if self.step is None:
            return emit(msg)
        cid, f = self.step
        report = {"id": cid, "step": msg["type"], "f": f, "mono_ns": time.monotonic_ns()}
        if "error" in msg:
            report["error"] = msg["error"]
        if self.v3:
            report["invoke_ns"] = self.invoked
        emit(report)
        self.outcome = msg["type"]

    def run_step(self, cid, f, fn):
        self.invoked = time.monotonic_ns()
        if not self.v3 or MODE == "v3-invoke-reports":
            emit({"id": cid, "step": "invoke", "f": f, "mono_ns": self.invoked})
        self.step, self.outcome = (cid, f), None
        try:
            fn()
        finally:
            self.step = None
        return self.outcome

    def cycle(self, rid, req):
        self.lost_ev.clear()
        reported = True  # the last report ends the cycle (v3: then no reply)
        if self.run_step(rid, "acquire", lambda: self.acquire(rid, req.get("timeout_ms", 0))) == "ok":
            hold = 0 if MODE == "cycle-no-hold" else req.get("hold_us", 0) / 1e6
            lost = self.lost_ev.wait(hold)
            if not lost or MODE == "cycle-release-after-lost":
                self.run_step(rid, "release", lambda: self.release(rid))
            else:
                reported = False
        if not self.v3 or not reported or MODE == "v3-reply-after-last":
            emit({"id": rid, "type": "ok"})


def main():
    if MODE == "garbage-line":
        print("ready", flush=True)
    w = Worker()
    for raw in sys.stdin:
        try:
            req = json.loads(raw)
            rid, op = req["id"], req["op"]
            if op == "write" and "value" not in req:
                raise ValueError("write without a value")
            if op not in ("init", "acquire", "release", "close", "read", "write", "clock", "cycle"):
                raise ValueError("unknown op %r" % op)
            if op in ("clock", "cycle") and not w.v2:
                raise ValueError("%s is protocol v2, and init agreed v1" % op)
            if op != "init" and op != "close" and w.lock is None:
                raise ValueError("%s before init" % op)
        except (ValueError, KeyError, TypeError) as e:
            if MODE == "ignore-bad-lines":
                continue
            sys.stderr.write("fake worker: bad request %r: %s\n" % (raw, e))
            sys.exit(1)
        if op == "init":
            w.init(rid, req)
        elif op == "acquire":
            w.acquire(rid, req.get("timeout_ms", 0))
        elif op == "release":
            w.release(rid)
        elif op == "clock":
            emit({"id": rid, "type": "ok", "mono_ns": time.monotonic_ns()})
        elif op == "cycle":
            w.cycle(rid, req)
        elif op in ("read", "write"):
            emit({"id": rid, "type": "fail", "error": "fake: no counter"})
        else:
            emit({"id": rid, "type": "ok"})
            if MODE == "close-no-exit":
                continue
            sys.exit(0)
    sys.exit(1 if MODE == "eof-exit-1" else 0)


if __name__ == "__main__":
    main()
