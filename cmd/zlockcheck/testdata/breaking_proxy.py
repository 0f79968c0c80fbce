#!/usr/bin/env python3
"""A worker that breaks the worker protocol in one way, chosen by its first argument,
in front of a real worker (its other arguments: the command line of one):

  wrong-release-id  every release is answered with the wrong id (the request's id +
                    1000): only a harness that checks reply ids notices;
  place             every acquire's ok says the lock lives where the environment's
                    ZLC_TEST_PLACE (the JSON of a "lock", docs/protocol.md) says: only a
                    harness that checks places notices.

It passes every other line through both ways, and keeps the worker behind it on
protocol v1 (its acquires and releases are requests of their own, answered by
replies), whatever the harness offers. The locking itself is the real worker's and
correct. Standard library only.
"""

import json
import os
import subprocess
import sys
import threading


def main():
    mode = sys.argv[1]
    if mode not in ("wrong-release-id", "place"):
        sys.exit("breaking_proxy.py: unknown mode %r (want wrong-release-id or place)" % mode)
    place = json.loads(os.environ["ZLC_TEST_PLACE"]) if mode == "place" else None
    op = "release" if mode == "wrong-release-id" else "acquire"
    child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    ids = set()  # the requests whose replies it rewrites
    lock = threading.Lock()

    def rewrite(msg):
        if mode == "wrong-release-id":
            msg["id"] += 1000
        elif msg.get("type") == "ok":
            msg["lock"] = place
        return msg

    def replies():
        for line in child.stdout:
            msg = json.loads(line)
            with lock:
                if msg.get("id") in ids:
                    line = json.dumps(rewrite(msg), separators=(",", ":")) + "\n"
            sys.stdout.write(line)
            sys.stdout.flush()

    threading.Thread(target=replies, daemon=True).start()
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "init" and "protocol" in req:
            del req["protocol"]  # a v1 proxy, whatever the harness offers
            line = json.dumps(req, separators=(",", ":")) + "\n"
        if req.get("op") == op:
            with lock:
                ids.add(req["id"])
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()
    child.wait()


if __name__ == "__main__":
    main()
