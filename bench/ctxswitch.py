#!/usr/bin/env python3
"""Context switches by role while a run goes on, from /proc: one line per INTERVAL seconds.

    python3 bench/ctxswitch.py [INTERVAL] > ctx.log &   # then run zlockcheck; kill it after

Roles as bench/cpushare.py's (zk, harness, workers, plain-loop, other). Each line gives,
per role, the voluntary and involuntary switches of all its threads over the interval
(ROLE.v, ROLE.n). A thread that blocks and is woken again is two switches of the
machine's; divided by a phase's cycles these say how many wake-ups a lock cycle costs
each role (BENCHMARKS.md, issue 15).
"""
import os
import sys
import time

from cpushare import ROLES, role


def switches():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        r = role(pid)
        if r is None:
            continue
        try:
            for tid in os.listdir(f"/proc/{pid}/task"):
                vol = invol = 0
                for line in open(f"/proc/{pid}/task/{tid}/status"):
                    if line.startswith("voluntary_ctxt_switches"):
                        vol = int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol = int(line.split()[1])
                out[(pid, tid)] = (r, vol, invol)
        except OSError:
            continue  # the process or thread ended meanwhile
    return out


def main():
    interval = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    prev, t0 = switches(), time.time()
    print("t " + " ".join(f"{r}.v {r}.n" for r in ROLES), flush=True)
    while True:
        time.sleep(interval)
        cur = switches()
        total = {r: [0, 0] for r in ROLES}
        for key, (r, vol, invol) in cur.items():
            _, pvol, pinvol = prev.get(key, (r, 0, 0))
            total[r][0] += vol - pvol
            total[r][1] += invol - pinvol
        print(f"{time.time() - t0:.2f} " + " ".join(f"{v} {n}" for v, n in total.values()), flush=True)
        prev = cur


if __name__ == "__main__":
    main()
