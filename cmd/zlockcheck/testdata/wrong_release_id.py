#!/usr/bin/env python3
"""A worker that breaks the worker protocol in one way: it answers every release with
the wrong id (the request's id + 1000).

It runs a real worker (its arguments: the command line of one) and passes every line
through both ways, rewriting only the id of the replies to release requests (and
dropping init's offer of protocol v2, so the worker behind it speaks v1). The locking
itself is the real worker's and correct: only a harness that checks reply ids notices.
Standard library only.
"""

import json
import subprocess
import sys
import threading


def main():
    child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    releases = set()
    lock = threading.Lock()

    def replies():
        for line in child.stdout:
            msg = json.loads(line)
            with lock:
                if "id" in msg and msg["id"] in releases:
                    msg["id"] += 1000
                    line = json.dumps(msg, separators=(",", ":")) + "\n"
            sys.stdout.write(line)
            sys.stdout.flush()

    threading.Thread(target=replies, daemon=True).start()
    for line in sys.stdin:
        req = json.loads(line)
        if req.get("op") == "init" and "protocol" in req:
            # A v1 proxy: it keeps the worker behind it on protocol v1 (whose
            # releases are requests of their own), whatever the harness offers.
            del req["protocol"]
            line = json.dumps(req, separators=(",", ":")) + "\n"
        if req.get("op") == "release":
            with lock:
                releases.add(req["id"])
        child.stdin.write(line)
        child.stdin.flush()
    child.stdin.close()
    child.wait()


if __name__ == "__main__":
    main()
