#!/usr/bin/env python3
"""CPU by role while a run goes on, from /proc: one line per INTERVAL seconds.

    python3 bench/cpushare.py [INTERVAL] > cpu.log &   # then run zlockcheck; kill it after

Roles: zk (the servers' JVMs), harness (zlockcheck run), workers (zlockcheck worker, and
the Java and Python workers), plain-loop (zlockcheck plain-loop, run --baseline-processes),
other (everything else). Figures are cores busy (1.00 = one core) over the interval.
BENCHMARKS.md (issue 15) reads the workload's and each baseline's seconds off this.
"""
import os
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")
ROLES = ["zk", "harness", "workers", "plain-loop", "other"]


def role(pid):
    try:
        argv = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
    except OSError:
        return None
    line = b" ".join(argv)
    if argv and argv[0].endswith(b"java") and b"zookeeper.server" in line.lower():
        return "zk"
    if len(argv) > 1 and os.path.basename(argv[0]) == b"zlockcheck":
        r = {b"run": "harness", b"worker": "workers", b"plain-loop": "plain-loop"}.get(argv[1])
        if r:
            return r
    if b"ZlcCuratorWorker" in line or b"kazoo_worker.py" in line:
        return "workers"
    return "other"


def ticks():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        r = role(pid)
        if r is not None:
            out[pid] = (r, int(fields[11]) + int(fields[12]))
    return out


def main():
    interval = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
    prev, t0 = ticks(), time.time()
    print("t " + " ".join(ROLES), flush=True)
    while True:
        time.sleep(interval)
        cur = ticks()
        busy = dict.fromkeys(ROLES, 0)
        for pid, (r, t) in cur.items():
            busy[r] += t - prev[pid][1] if pid in prev else t
        print(f"{time.time() - t0:.0f} " + " ".join(f"{busy[r] / HZ / interval:.2f}" for r in ROLES), flush=True)
        prev = cur


if __name__ == "__main__":
    main()
