#!/usr/bin/env python3
"""A worker that says a wrong place for its lock: the environment's ZLC_TEST_PLACE is
the JSON of a "lock" (docs/protocol.md) that it puts on every acquire's ok in place of
the real worker's.

It runs a real worker (its arguments: the command line of one) and passes every
line through both ways, keeping the worker behind it on protocol v1 (acquires answered
by replies) and rewriting only the acquires' ok replies. The locking itself is the real
worker's: only a harness that checks where a worker says its lock lives notices.
Standard library only.
"""

import json
import os
import subprocess
import sys
import threading


def main():
    place = json.loads(os.environ["ZLC_TEST_PLACE"])
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    acquires = set()
    lock = threading.Lock()

    def replies():
        for line in child.stdout:
            msg = json.loads(line)
            with lock:
                if msg.get("type") == "ok" and msg.get("id") in acquires:
                    msg["lock"] = place
                    line = json.dumps(msg, separators=(",", ":")) + "\n"
            sys.stdout.write(line)
            sys.stdout.flush()

    threading.Thread(target=replies, daemon=True).start()
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "init" and "protocol" in req:
            del req["protocol"]
            line = json.dumps(req, separators=(",", ":")) + "\n"
        if req.get("op") == "acquire":
            with lock:
                acquires.add(req["id"])
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()
    child.wait()


if __name__ == "__main__":
    main()
