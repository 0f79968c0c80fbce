#!/usr/bin/env python3
"""A deliberately broken lock worker, for testing that the checker catches a bad lock.

It speaks worker protocol v1 (JSON Lines: requests on stdin, replies on stdout, logs
on stderr) but never talks to ZooKeeper: every acquire is granted at once, so several
workers "hold" the lock together and a run using it must be judged invalid.
Replies: init ok, acquire ok, release ok, close ok and exit 0. EOF on stdin exits 0.
A malformed request line exits 1. Standard library only.
"""

import json
import sys


def write(msg):
    # One line per message, flushed at once: the harness reads replies as they come.
    sys.stdout.write(json.dumps(msg, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def log(text):
    sys.stderr.write("broken_worker: " + text + "\n")
    sys.stderr.flush()


def main():
    worker = None
    while True:
        line = sys.stdin.readline()  # no read-ahead: answer each request as it comes
        if not line:
            break
        line = line.strip()
        if not line:
            continue
        try:
            req = json.loads(line)
            rid = req["id"]
            op = req["op"]
        except (ValueError, KeyError, TypeError) as e:
            log("malformed request line %r: %s" % (line, e))
            return 1
        if op == "init":
            worker = req.get("worker")
            log("init: worker %s, path %s (ignoring ZooKeeper)" % (worker, req.get("path")))
            write({"id": rid, "type": "ok"})
        elif op in ("acquire", "release"):
            write({"id": rid, "type": "ok"})
        elif op == "close":
            write({"id": rid, "type": "ok"})
            return 0
        else:
            log("unknown op %r" % (op,))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
