#!/usr/bin/env python3
"""ZooKeeper's request counters while a run goes on: one line per INTERVAL seconds.

    python3 bench/zkcounters.py [INTERVAL [KEY...]] > zk.log &   # then run zlockcheck; kill it after

Each line sums, over the servers of the run under way (the namespaces zlc<run>s<N> the
harness made), mntr's zk_packets_received (client requests, pings included) and
zk_proposal_count (writes the leader proposed), and says which phase was running:
W (zlockcheck worker processes), P (zlockcheck plain-loop processes) or - (neither).
bench/cpucycle.sh turns two phases' differences into requests and writes per lock
cycle: the same per cycle means ZooKeeper was asked for the same work in both. Other
mntr counters can be named instead (KEY...), e.g. zk_sum_updatelatency and
zk_cnt_updatelatency for the servers' own write latency interval by interval.

It enters each server's namespace with setns(2) (root) instead of starting a process
per sample, so it costs the machine next to nothing.
"""
import ctypes
import os
import re
import socket
import subprocess
import sys
import time

CLONE_NEWNET = 0x40000000
DEFAULT_KEYS = ["zk_packets_received", "zk_proposal_count"]
libc = ctypes.CDLL("libc.so.6", use_errno=True)


def setns(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), "setns " + path)
    finally:
        os.close(fd)


def servers():
    """The namespaces of the run's servers and each one's address (eth0)."""
    out = []
    for ns in sorted(os.listdir("/run/netns") if os.path.isdir("/run/netns") else []):
        if re.fullmatch(r"zlc[0-9a-f]+s\d+", ns):
            addr = subprocess.run(["ip", "-n", ns, "-4", "-o", "addr", "show", "eth0"],
                                  capture_output=True, text=True).stdout.split()
            if len(addr) > 3:
                out.append((ns, addr[3].split("/")[0]))
    return out


def mntr(ns, addr, home):
    """Server ns's mntr answer as a dict, asked from inside its namespace."""
    setns("/run/netns/" + ns)
    try:
        s = socket.create_connection((addr, 2181), timeout=1)
    finally:
        setns(home)
    with s:
        s.sendall(b"mntr")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return dict(line.split("\t", 1) for line in data.decode().splitlines() if "\t" in line)


def phase():
    for tag, pattern in (("W", "zlockcheck worker"), ("P", "zlockcheck plain-loop")):
        if subprocess.run(["pgrep", "-f", pattern], capture_output=True).returncode == 0:
            return tag
    return "-"


def main():
    interval = float(sys.argv[1]) if len(sys.argv) > 1 else 4.0
    keys = sys.argv[2:] or DEFAULT_KEYS
    # This process's own namespace, held open to come back to after each server's.
    home = f"/proc/self/fd/{os.open('/proc/self/ns/net', os.O_RDONLY)}"
    known = []
    print("t phase " + " ".join(k.removeprefix("zk_") for k in keys), flush=True)
    while True:
        t = time.time()
        known = known or servers()
        total = dict.fromkeys(keys, 0)
        for ns, addr in known:
            try:
                m = mntr(ns, addr, home)
            except OSError:
                known = []  # a new run, or a server down: look again next time
                continue
            for k in keys:
                total[k] += int(float(m.get(k, "0")))
        print(f"{t:.1f} {phase()} " + " ".join(str(total[k]) for k in keys), flush=True)
        time.sleep(max(0.0, interval - (time.time() - t)))


if __name__ == "__main__":
    main()
