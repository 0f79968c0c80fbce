"""The zlockcheck worker protocol, version 1, for an example worker in Python.

A worker is a program zlockcheck starts once per client process; it reads requests
on stdin and answers on stdout, one JSON object per line (docs/protocol.md). This
module is the protocol; a worker supplies the lock, as an object with:

- ``open(init, events)``: connect to ``init["connect"]`` (the service's own format,
  docs/protocol.md#what-init-means-on-each-service); raise ``Refused`` for what it
  cannot do (another workload kind);
- ``acquire(timeout_s)``: take the lock within ``timeout_s`` (None: wait as long as
  it takes); return where it lives (a dict for the acquire's ``"lock"``, or None),
  raise ``TimedOut`` when it was not taken, ``Unknown`` when it may have been;
- ``release()``: raise ``NotHeld`` when the lock was not held, ``Unknown`` when the
  release may not have happened;
- ``close()``: end the session (the lock, if held, goes as the service lets it).

``events.session(id)`` reports the server-side id of a new connection (an int),
``events.lost(why)`` that the lock is no longer held; both may be called from any
thread. Replies: ok (it happened), fail (it did not), info (unknown: zlockcheck then
replaces the worker).
"""

import json
import os
import sys
import threading


class Refused(Exception):
    """init asks for what the worker cannot do: answered fail, not info."""


class TimedOut(Exception):
    """The acquire did not take the lock within its timeout."""


class NotHeld(Exception):
    """The release found the lock not held (expired, taken by another)."""


class Unknown(Exception):
    """The outcome is unknown (a connection lost mid-request)."""


# Every op a request may name; anything else is a protocol error.
OPS = {"init", "acquire", "release", "close", "read", "write", "clock", "cycle"}


class Events:
    """What the lock reports outside a request; writes are whole lines."""

    def __init__(self, out):
        self._out = out
        self._mu = threading.Lock()

    def write(self, obj):
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        with self._mu:
            self._out.write(line)
            self._out.flush()

    def session(self, session_id):
        self.write({"event": "session", "session_id": hex(session_id)})

    def lost(self, why):
        self.write({"event": "lost", "error": why})

    def renewed(self):
        """A renewal found the lease still this worker's and renewed it (optional)."""
        self.write({"event": "renewed"})


def _protocol_error(why):
    # A line the worker cannot act on: exit non-zero without replying.
    print("zlcworker: protocol error: " + why, file=sys.stderr)
    sys.stderr.flush()
    os._exit(2)


def _parse(line):
    try:
        req = json.loads(line)
    except ValueError as e:
        _protocol_error("not JSON: %s" % e)
    if not isinstance(req, dict):
        _protocol_error("not an object")
    if not isinstance(req.get("id"), int) or isinstance(req.get("id"), bool):
        _protocol_error("no integer id")
    if req.get("op") not in OPS:
        _protocol_error("unknown op %r" % req.get("op"))
    return req


def serve(lock):
    """Answer requests on stdin until close or EOF, then exit 0."""
    # The protocol owns the real stdout; anything a library prints goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    events = Events(out)
    opened = False
    while True:
        line = sys.stdin.readline()
        if not line:
            break  # EOF: end the session, exit 0
        req = _parse(line)
        op, reply = req["op"], {"id": req["id"], "type": "ok"}
        if not opened and op != "init":
            _protocol_error(op + " before init")
        try:
            if op == "init":
                if req.get("kind", "mutex") != "mutex":
                    raise Refused("only the mutex workload (got %s)" % req.get("kind"))
                lock.open(req, events)
                opened = True
            elif op == "acquire":
                timeout_ms = req.get("timeout_ms") or 0
                place = lock.acquire(timeout_ms / 1000 if timeout_ms > 0 else None)
                if place:
                    reply["lock"] = place
            elif op == "release":
                lock.release()
            elif op == "close":
                opened = False
                lock.close()
                events.write(reply)
                break
            else:
                raise Refused("op %s is not supported by this worker" % op)
        except (Refused, TimedOut, NotHeld) as e:
            reply = {"id": req["id"], "type": "fail", "error": "timeout" if isinstance(e, TimedOut) else str(e)}
        except Exception as e:  # Unknown, and anything unexpected: the outcome is not known
            reply = {"id": req["id"], "type": "info", "error": "%s: %s" % (type(e).__name__, e)}
        events.write(reply)
    if opened:
        try:
            lock.close()
        except Exception:
            pass
    out.flush()
    os._exit(0)
