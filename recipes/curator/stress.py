#!/usr/bin/env python3
"""A short harness-like run of the Curator worker against one local ZooKeeper, checked
by zlockcheck's own checker (run by test.sh when a zlockcheck binary is at hand).

    stress.py ZK_HOST:PORT RUN_CMD RECIPE WORKLOAD SECONDS OUTDIR ZLOCKCHECK [PERMITS]

Like `zlockcheck run` (docs/running.md, docs/history-format.md: workload loop, history format, crash rules), but
without network namespaces: W=5 worker processes loop acquire (timeout 1 s) -> hold
1..100 ms -> release; a worker whose op returns info, or that crashes, is replaced by a
new process. Faults on a fixed schedule: the server is SIGSTOPped for 3 s (longer than
the clients' read timeout, 2/3 of the session timeout: every connection is suspended,
holders report lost), later for 1.5 s (shorter: nobody notices but everything waits),
and one worker is SIGKILLed. The history goes to OUTDIR/history.jsonl and
`zlockcheck check` must call it valid.

Not here: closing a holder's session from outside (the nemesis's session-expire). That
ends the hold on the servers at once, before any client can know, so the next holder
may be granted before the old one hears of it: the checker rightly calls such a
history invalid (it is the case fencing exists for), whatever the worker does.
protocol_test.py checks the worker's side of it (lost, then a new session event).
"""

import json
import os
import queue
import random
import shlex
import signal
import subprocess
import sys
import threading
import time

ZK, RUN, RECIPE, WORKLOAD = sys.argv[1], shlex.split(sys.argv[2]), sys.argv[3], sys.argv[4]
SECONDS, OUT, CHECKER = float(sys.argv[5]), sys.argv[6], sys.argv[7]
PERMITS = int(sys.argv[8]) if len(sys.argv) > 8 else 1
WORKERS = 5
SESSION_MS = 4000
ACQUIRE_MS = 1000
LIMIT = ACQUIRE_MS / 1000 + 3 * SESSION_MS / 1000 + 5  # as the harness
SERVER_PID = int(os.environ["ZLC_ZK_PID"])
PATH = "/zlc/stress%d/l0" % os.getpid()

T0 = time.monotonic_ns()
rec_lock = threading.Lock()
history = []
next_process = [0]
stats = {"ok": 0, "fail": 0, "info": 0, "lost": 0, "crash": 0}
workers = {}  # slot -> Proc


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


def record(typ, f, process, **extra):
    with rec_lock:
        op = {"index": len(history), "type": typ, "f": f, "process": process,
              "time": time.monotonic_ns() - T0, "key": "l0"}
        op.update({k: v for k, v in extra.items() if v is not None})
        history.append(op)


class Crash(Exception):
    pass


class Proc:
    def __init__(self, slot):
        with rec_lock:
            self.process = next_process[0]
            next_process[0] += 1
        self.log = open(os.path.join(OUT, "w%d-p%d.stderr.log" % (slot + 1, self.process)), "w")
        self.p = subprocess.Popen(RUN + [RECIPE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=self.log, bufsize=0)
        PROCS.append(self.p)
        self.q = queue.Queue()
        self.session = None
        self.next_id = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.p.stdout:
            try:
                m = json.loads(raw)
            except ValueError:
                self.q.put(Crash("malformed line %r" % raw))
                return
            if m.get("event") == "session":
                self.session = m
            self.q.put(m)
        self.q.put(Crash("exited"))

    def send(self, msg):
        msg["id"] = self.next_id
        self.next_id += 1
        try:
            self.p.stdin.write((json.dumps(msg) + "\n").encode())
            self.p.stdin.flush()
        except OSError as e:
            raise Crash("write: %s" % e)
        return msg["id"]

    def next(self, timeout):
        try:
            m = self.q.get(timeout=max(timeout, 0))
        except queue.Empty:
            return None
        if isinstance(m, Crash):
            raise m
        return m

    def call(self, msg, limit):
        rid = self.send(msg)
        deadline = time.monotonic() + limit
        while True:
            m = self.next(deadline - time.monotonic())
            if m is None:
                raise Crash("no reply within %ss" % limit)
            if "event" in m:
                continue  # lost while in flight: the op decides (as the harness)
            assert m["id"] == rid, m
            return m

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        self.log.close()

    def close(self):
        try:
            self.send({"op": "close"})
            self.p.stdin.close()
            self.p.wait(timeout=3)
        except (Crash, OSError, subprocess.TimeoutExpired):
            pass
        self.kill()


def slot_loop(slot, deadline, rng):
    while time.monotonic() < deadline:
        w = Proc(slot)
        try:
            r = w.call({"op": "init", "connect": ZK, "session_timeout_ms": SESSION_MS, "path": PATH,
                        "kind": WORKLOAD, "permits": PERMITS, "worker": w.process}, 2 * SESSION_MS / 1000 + 10)
        except Crash:
            w.kill()
            continue
        if r["type"] != "ok":
            w.kill()
            time.sleep(0.5)
            continue
        workers[slot] = w
        dead = run_worker(w, deadline, rng)
        if dead:
            w.kill()
        else:
            w.close()


def run_worker(w, deadline, rng):
    """Lock cycles until the deadline; True if the worker must be killed."""
    while time.monotonic() < deadline:
        mode = None
        if WORKLOAD == "rwlock":
            mode = "read" if rng.random() < 0.7 else "write"
        record("invoke", "acquire", w.process, mode=mode)
        req = {"op": "acquire", "timeout_ms": ACQUIRE_MS}
        if mode:
            req["mode"] = mode
        try:
            r = w.call(req, LIMIT)
        except Crash as e:
            stats["crash"] += 1
            record("info", "acquire", w.process, mode=mode, error=str(e))
            return True
        value = {"token": r["token"]} if r["type"] == "ok" and "token" in r else None
        record(r["type"], "acquire", w.process, mode=mode, error=r.get("error"), value=value)
        stats[r["type"]] += 1
        if r["type"] == "info":
            return True
        if r["type"] != "ok":
            continue
        # Hold, watching for events.
        hold_until = time.monotonic() + rng.uniform(0.001, 0.100)
        holding = True
        while holding:
            left = hold_until - time.monotonic()
            if left <= 0:
                break
            try:
                m = w.next(left)
            except Crash as e:
                stats["crash"] += 1
                record("invoke", "release", w.process, mode=mode)
                record("info", "release", w.process, mode=mode, error=str(e))
                return True
            if m is not None and m.get("event") == "lost":
                stats["lost"] += 1
                record("invoke", "release", w.process, mode=mode, lost=True, error=m.get("error"))
                record("ok", "release", w.process, mode=mode, lost=True, error=m.get("error"))
                holding = False
        if not holding:
            continue
        record("invoke", "release", w.process, mode=mode)
        try:
            r = w.call({"op": "release"}, LIMIT)
        except Crash as e:
            stats["crash"] += 1
            record("info", "release", w.process, mode=mode, error=str(e))
            return True
        record(r["type"], "release", w.process, mode=mode, error=r.get("error"))
        if r["type"] == "info":
            stats["info"] += 1
            return True
    return False


def faults(deadline):
    def sleep_until(t):
        while time.monotonic() < min(t, deadline):
            time.sleep(0.05)
        return time.monotonic() < deadline

    start = time.monotonic()
    if not sleep_until(start + SECONDS * 0.2):
        return
    print("    fault: server SIGSTOPped for 3 s")
    os.kill(SERVER_PID, signal.SIGSTOP)
    time.sleep(3)
    os.kill(SERVER_PID, signal.SIGCONT)
    if not sleep_until(start + SECONDS * 0.55):
        return
    print("    fault: server SIGSTOPped for 1.5 s")
    os.kill(SERVER_PID, signal.SIGSTOP)
    time.sleep(1.5)
    os.kill(SERVER_PID, signal.SIGCONT)
    if not sleep_until(start + SECONDS * 0.75):
        return
    w = workers.get(2)
    if w:
        print("    fault: SIGKILL process %d" % w.process)
        w.p.kill()


def main():
    os.makedirs(OUT, exist_ok=True)
    deadline = time.monotonic() + SECONDS
    threads = [threading.Thread(target=slot_loop, args=(i, deadline, random.Random(i))) for i in range(WORKERS)]
    for t in threads:
        t.start()
    ft = threading.Thread(target=faults, args=(deadline,))
    ft.start()
    for t in threads:
        t.join()
    ft.join()
    hp = os.path.join(OUT, "history.jsonl")
    with open(hp, "w") as f:
        for op in history:
            f.write(json.dumps(op) + "\n")
    model = {"mutex": "mutex", "reentrant": "mutex", "semaphore": "semaphore", "rwlock": "rwlock"}[WORKLOAD]
    cmd = [CHECKER, "check", "--model", model]
    if model == "semaphore":
        cmd += ["--permits", str(PERMITS)]
    cmd.append(hp)
    res = subprocess.run(cmd, capture_output=True, text=True)
    acquires_ok = sum(1 for o in history if o["f"] == "acquire" and o["type"] == "ok")
    print("    %d ops, %d processes, acquires ok %d / fail %d / info %d, lost events %d, crashes %d"
          % (len(history), next_process[0], acquires_ok, stats["fail"], stats["info"], stats["lost"], stats["crash"]))
    out = (res.stdout + res.stderr).strip().splitlines()
    for line in out[:12]:
        print("    | " + line)
    ok = res.returncode == 0 and acquires_ok >= 10
    print("  %s  %s %s: zlockcheck check --model %s -> exit %d" % ("ok  " if ok else "FAIL", RECIPE, WORKLOAD, model,
                                                                   res.returncode))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
