"""The worker protocol (v2 and v1, docs/protocol.md) for the Python workers of recipes/python.

One implementation every such worker shares, as recipes/jvm/ZlcWorker.java is the JVM
workers': a worker is a script that hands ``serve()`` a recipe (its library behind
four calls) and this module does the rest.

stdin carries the harness's requests, stdout only protocol lines (replies and events,
one JSON object a line), stderr every log line. Requests are answered one at a time,
in order, on the main thread, which is also the only thread that calls the recipe.

A recipe is an object with:

- ``init(init, events)``: connect as ``init`` (an ``Init``) says; raise ``Refused``
  for a configuration it does not run (a kind it does not speak), anything else when
  the servers may be unreachable for now.
- ``acquire(timeout_ms, mode)``: take the lock within ``timeout_ms`` (0: no limit), in
  ``mode`` (the rwlock kind's "read" or "write", else None); return an ``Acquired``,
  or None when the time ran out.
- ``release()``: release the innermost hold; raise ``NotHeld`` when none was left.
- ``close()``: end the client and its connections (called once, at close or EOF;
  it may run while a request abandoned at EOF still runs).
- and, for the counter workload, ``read()`` (the counter's value, 0 when never
  written) and ``write(value)``, called only while holding.

How each request is answered:

- init: ok, fail (``Refused``) or info (anything else). After a fail or info it may
  be sent again; after an ok it may not. The harness's offer of protocol 2 or 3 is
  answered ``"protocol":2`` on an ok. Events the recipe reports during init are
  written after the ok, and dropped when init did not succeed.
- acquire: ok (with the token and the lock's place when the recipe gives them), fail
  "timeout" when it returned None.
- release, read: ok (read: with the value).
- write: ok; an error other than a refusal is retried for init's ``write_retry_ms``,
  100 ms apart (its outcome is unknown, and writing the same value again is
  harmless), then answers info; a refusal after such a retry answers info too.
- clock (v2): ok with ``mono_ns`` (``time.monotonic_ns()``).
- cycle (v2): acquire ``depth`` times, hold ``hold_us``, release as often as acquired,
  reporting each step on the cycle's id as it happens (an invoke report before the
  call, an outcome report after it, each stamped ``mono_ns``), then the reply ok. It
  ends early after the first acquire's fail, any info, or a failed release; a nested
  acquire that fails ends the acquiring (the levels held are held and released); a
  lost event while holding with nothing in flight ends it with no release. Events the
  recipe reports while an acquire runs are written right after its outcome report, and
  a lost one among them ends the cycle there, with no release: the harness reads it
  after the ok as that hold's end (a lock lost as it was granted), as it reads one
  after a plain acquire's reply.
- close: ``close()`` (bounded to 1.5 s), then ok and exit 0. EOF on stdin does the
  same without a reply; a request still running 200 ms after EOF is abandoned.

Events the recipe reports while a request other than a cycle runs (a lease that ran
out as its acquire returned) are written right after the request's reply: the
harness ignores an event while a request is in flight, and reads one after an
acquire's ok as that hold's end.

In every request ``NotHeld`` answers fail "not held: ...", ``Refused`` fail with its
message, ``Fenced`` fail "fenced: ...", ``Unknown`` info with its message, and any
other exception info. ``GaveUp`` (an ``Unknown``) answers info too, and from then on
every acquire, release, read and write (a cycle's acquire included) answers info
"gave up earlier: ..." without calling the recipe: a recipe raises it when it can
vouch for nothing any more (a library call that never returned); clock and close are
answered as ever. A line that is not a JSON object, an unknown op, an op before an
init that succeeded or an init after one: exit 1 without a reply.

Events: a recipe reports ``events.lost(why)`` when its library tells it (or it can
compute) that the lock is gone, and ``events.session(id, passwd)`` for a new
server-side session, from any thread. Lost events and a cycle's step reports are
written under one lock, so that the order the harness reads is the order in which the
worker decided.
"""

import json
import logging
import os
import queue
import sys
import threading
import time

log = logging.getLogger("zlc.worker")


class Refused(Exception):
    """A request refused, certainly without effect: answered fail with its message."""


class Unknown(Exception):
    """A request whose outcome the recipe cannot know: answered info with its message."""


class GaveUp(Unknown):
    """The recipe can vouch for nothing any more: this request and every later one but
    clock and close answer info, and the recipe is not called again but for close."""


class NotHeld(Exception):
    """Nothing was held (a lease ran out): answered fail "not held: why"."""


class Fenced(Exception):
    """A fenced read or write was refused: answered fail "fenced: why"."""


class ProtocolError(Exception):
    """A request line out of the protocol: the worker exits 1 without a reply."""


class Init:
    """What init says: the fields every service's init has (docs/protocol.md)."""

    def __init__(self, req):
        self.connect = _str(req, "connect").split(",")
        self.session_timeout_ms = _num(req, "session_timeout_ms")
        self.path = _str(req, "path")
        self.kind = _str(req, "kind")
        self.permits = _num(req, "permits", 1)
        self.fenced = req.get("fenced") is True
        self.counter_path = _str(req, "counter_path") if "counter_path" in req else None
        self.write_retry_ms = _num(req, "write_retry_ms", 8000)
        self.worker = _num(req, "worker", 0)
        # Redis's sentinel topology: connect names the sentinels, and this the name
        # they know the primary by (None on any other).
        self.sentinel_master = _str(req, "sentinel_master") if "sentinel_master" in req else None
        # Redis's cluster topology: connect names a Redis Cluster's instances. No
        # recipe here follows a cluster's slots yet: init refuses it.
        self.redis_cluster = req.get("redis_cluster") is True


class Acquired:
    """An acquire's outcome: its fencing token and where the lock lives, each optional."""

    def __init__(self, token=None, lock=None):
        self.token = token
        self.lock = lock


def _str(req, k):
    v = req.get(k)
    if not isinstance(v, str):
        raise ProtocolError("field %s: want a string" % k)
    return v


def _num(req, k, default=None):
    if k not in req and default is not None:
        return default
    v = req.get(k)
    if not isinstance(v, int) or isinstance(v, bool):
        raise ProtocolError("field %s: want an integer" % k)
    return v


_EOF = object()


class _Events:
    """What the recipe reports, written as event lines (held back while init runs)."""

    def __init__(self, worker):
        self._w = worker

    def lost(self, why):
        log.warning("lost: %s", why)
        with self._w.state:
            self._w.event({"event": "lost", "error": str(why)})
            self._w.lost_seq += 1
            self._w.state.notify_all()

    def session(self, session_id, passwd=None):
        ev = {"event": "session", "session_id": session_id}
        if passwd is not None:
            ev["passwd"] = passwd
        log.info("session %s", session_id)
        self._w.event(ev)


class _Worker:
    def __init__(self, recipe, out):
        self.recipe = recipe
        self.out = out
        self.out_mu = threading.Lock()
        self.state = threading.Condition()
        self.lost_seq = 0
        self.lines = queue.Queue()
        self.busy = False
        self.init_tried = False
        self.initialized = False
        self.protocol = 1
        self.write_retry_ms = 8000
        self.deferred = None  # under out_mu
        self.gave_up = None  # why the recipe gave up (GaveUp): every request is info
        self.events = _Events(self)
        self.shutdown_mu = threading.Lock()

    # ------------------------------------------------------------ output

    def emit(self, obj):
        with self.out_mu:
            self.write_locked(obj)

    def write_locked(self, obj):
        line = json.dumps(obj, separators=(",", ":")) + "\n"
        try:
            self.out.write(line)
            self.out.flush()
        except OSError as e:
            log.warning("writing to stdout failed: %s", e)

    def defer(self):
        """Holds back the events the recipe reports from now until release_events."""
        with self.out_mu:
            self.deferred = []

    def release_events(self, write=True):
        """Writes (or, write False, drops) the events held back since defer, in order,
        before any reported later."""
        with self.out_mu:
            held, self.deferred = self.deferred, None
            for ev in held if write else ():
                self.write_locked(ev)

    def event(self, obj):
        with self.out_mu:
            if self.deferred is not None:
                self.deferred.append(obj)
                return
        self.emit(obj)

    def reply(self, rid, r):
        self.emit(dict({"id": rid}, **r))

    # ------------------------------------------------------------ serving

    def run(self):
        threading.Thread(target=self.read_stdin, name="zlc-stdin", daemon=True).start()
        while True:
            line = self.lines.get()
            if line is _EOF:
                log.info("stdin closed; closing")
                self.shutdown(0, None)
            if not line.strip():
                continue
            self.busy = True
            try:
                self.handle(line)
            except ProtocolError as e:
                log.error("malformed or out-of-protocol request line %.300s: %s", line.rstrip(), e)
                self.shutdown(1, None)
            except Exception:
                log.exception("internal error on request line %.300s", line.rstrip())
                self.shutdown(1, None)
            finally:
                self.busy = False

    def read_stdin(self):
        for line in sys.stdin:
            self.lines.put(line)
        self.lines.put(_EOF)
        # The main thread answers the requests read before EOF, then closes; one still
        # running 200 ms after EOF is abandoned: nobody is left to read its reply.
        ticks = 0
        while True:
            time.sleep(0.05)
            if self.lines.empty():
                return  # the main thread took EOF
            if not self.busy:
                ticks = 0
                continue
            ticks += 1
            if ticks >= 4:
                log.info("stdin closed while a request runs; closing")
                self.shutdown(0, None)

    def handle(self, line):
        try:
            req = json.loads(line)
        except ValueError as e:
            raise ProtocolError("not JSON: %s" % e)
        if not isinstance(req, dict):
            raise ProtocolError("not one JSON object")
        rid = _num(req, "id")
        op = _str(req, "op")
        if not self.initialized and op not in ("init", "close"):
            raise ProtocolError(op + " before an init that succeeded")
        t0 = time.monotonic()
        if op == "init":
            if self.initialized:
                raise ProtocolError("init after an init that succeeded")
            self.init(rid, req)
        elif op == "acquire":
            timeout, mode = _num(req, "timeout_ms"), _mode(req)
            self.request(rid, "acquire", t0, lambda: self.acquire(timeout, mode))
        elif op == "release":
            self.request(rid, op, t0, self.release)
        elif op == "read":
            self.counter(op)
            self.request(rid, op, t0, lambda: {"type": "ok", "value": self.recipe.read()})
        elif op == "write":
            self.counter(op)
            value = _num(req, "value")
            self.request(rid, "write %d" % value, t0, lambda: self.write_retrying(value))
        elif op in ("clock", "cycle"):
            if self.protocol < 2:
                raise ProtocolError(op + " is protocol v2, and init agreed v1")
            if op == "clock":
                self.reply(rid, {"type": "ok", "mono_ns": time.monotonic_ns()})
            else:
                self.cycle(rid, _num(req, "timeout_ms"), _mode(req), max(_num(req, "hold_us", 0), 0),
                           max(_num(req, "depth", 1), 1))
                self.reply(rid, {"type": "ok"})
        elif op == "close":
            self.shutdown(0, rid)
        else:
            raise ProtocolError("unknown op " + op)

    def init(self, rid, req):
        init = Init(req)
        self.write_retry_ms = init.write_retry_ms
        offered = isinstance(req.get("protocol"), int) and req["protocol"] >= 2
        self.defer()
        self.init_tried = True
        t0 = time.monotonic()

        def body():
            if init.redis_cluster:
                raise Refused("init: redis_cluster: the Python workers have no Redis Cluster mode yet (docs/redis.md)")
            self.recipe.init(init, self.events)
            return {"type": "ok", "protocol": 2} if offered else {"type": "ok"}

        r = self.call(body)
        ok = r["type"] == "ok"
        if ok:
            self.initialized = True
            self.protocol = 2 if offered else 1
        log.info("request %d: init -> %s%s (protocol v%d, %d ms)", rid, r["type"],
                 " (%s)" % r["error"] if "error" in r else "", self.protocol, (time.monotonic() - t0) * 1000)
        self.reply(rid, r)
        self.release_events(ok)

    def request(self, rid, what, t0, body):
        """Runs a plain request: events the recipe reports meanwhile come after its reply."""
        self.defer()
        r = self.call(body)
        self.logged(rid, what, t0, r)
        self.release_events()

    def logged(self, rid, what, t0, r):
        extra = ""
        if "token" in r:
            extra = " token %s" % r["token"]
        elif "value" in r:
            extra = " value %s" % r["value"]
        log.info("request %d: %s -> %s%s%s (%d ms)", rid, what, r["type"],
                 " (%s)" % r["error"] if "error" in r else "", extra, (time.monotonic() - t0) * 1000)
        self.reply(rid, r)

    def counter(self, op):
        if not (hasattr(self.recipe, "read") and hasattr(self.recipe, "write")):
            raise ProtocolError(op + ": the recipe has no counter workload")

    # ------------------------------------------------------------ requests

    def call(self, body):
        """Runs body: its reply, fail for a refusal or nothing held, else info."""
        if self.gave_up is not None:
            return {"type": "info", "error": "gave up earlier: " + self.gave_up}
        try:
            return body()
        except Refused as e:
            return {"type": "fail", "error": str(e)}
        except Fenced as e:
            return {"type": "fail", "error": "fenced: %s" % e}
        except NotHeld as e:
            return {"type": "fail", "error": "not held: %s" % e}
        except GaveUp as e:
            log.error("the recipe gave up: %s", e)
            self.gave_up = str(e)
            return {"type": "info", "error": str(e)}
        except Unknown as e:
            return {"type": "info", "error": str(e)}
        except Exception as e:
            log.warning("request failed", exc_info=True)
            return {"type": "info", "error": "%s: %s" % (type(e).__name__, e)}

    def acquire(self, timeout_ms, mode):
        a = self.recipe.acquire(timeout_ms, mode)
        if a is None:
            return {"type": "fail", "error": "timeout"}
        r = {"type": "ok"}
        if a.token is not None:
            r["token"] = a.token
        if a.lock is not None:
            r["lock"] = a.lock
        return r

    def release(self):
        self.recipe.release()
        return {"type": "ok"}

    def write_retrying(self, value):
        """Writes value, again every 100 ms while its outcome is unknown, for write_retry_ms."""
        end = time.monotonic() + self.write_retry_ms / 1000
        attempt = 0
        while True:
            try:
                self.recipe.write(value)
                return {"type": "ok"}
            except GaveUp:
                raise
            except (Fenced, Refused, NotHeld) as e:
                if attempt == 0:
                    raise
                what = {Fenced: "fenced: ", NotHeld: "not held: "}.get(type(e), "") + str(e)
                raise Unknown("%s (after %d attempts whose outcome is unknown)" % (what, attempt))
            except Exception as e:
                if time.monotonic() + 0.1 >= end:
                    raise
                log.info("write of unknown outcome, again in 100 ms: %s", e)
                time.sleep(0.1)
            attempt += 1

    # ------------------------------------------------------------ cycle (v2)

    def step(self, rid, f, outcome):
        line = {"id": rid, "step": "invoke" if outcome is None else outcome["type"], "f": f,
                "mono_ns": time.monotonic_ns()}
        if outcome is not None:
            line.update((k, v) for k, v in outcome.items() if k != "type")
        self.emit(line)

    def cycle(self, rid, timeout_ms, mode, hold_us, depth):
        held = 0
        while True:
            with self.state:
                if held == 0:
                    seq = self.lost_seq  # a loss from now on ends the hold
                elif self.lost_seq != seq:
                    return  # lost between two levels: no more acquires, no release
                self.step(rid, "acquire", None)
            self.defer()
            r = self.call(lambda: self.acquire(timeout_ms, mode))
            self.step(rid, "acquire", r)
            self.release_events()
            if r["type"] == "ok":
                held += 1
                if held < depth:
                    continue
                break
            if r["type"] == "info" or held == 0:
                return
            break  # a nested acquire failed: hold and release the levels held
        if not self.hold_unless_lost(hold_us / 1e6, seq):
            return
        while held > 0:
            with self.state:
                if self.lost_seq != seq:
                    return
                self.step(rid, "release", None)
            r = self.call(self.release)
            with self.state:
                self.step(rid, "release", r)
                seq = self.lost_seq
            if r["type"] != "ok":
                return
            held -= 1

    def hold_unless_lost(self, seconds, seq):
        """Holds for seconds unless a lost event is written (lost_seq moves past seq)."""
        end = time.monotonic() + seconds
        with self.state:
            while self.lost_seq == seq:
                left = end - time.monotonic()
                if left <= 0:
                    return True
                self.state.wait(left)
            return False

    # ------------------------------------------------------------ closing

    def shutdown(self, code, close_id):
        """Closes the recipe (bounded to 1.5 s), writes close's reply if any and exits."""
        with self.shutdown_mu:
            done = threading.Event()

            def close():
                try:
                    if self.init_tried:
                        self.recipe.close()
                except Exception as e:
                    log.warning("closing: %s", e)
                done.set()

            threading.Thread(target=close, name="zlc-close", daemon=True).start()
            finished = done.wait(1.5)
            if close_id is not None:
                self.reply(close_id, {"type": "ok"} if finished else
                           {"type": "info", "error": "closing did not finish within 1.5s"})
            sys.stderr.flush()
            os._exit(code)


def _mode(req):
    return _str(req, "mode") if "mode" in req else None


def serve(recipe):
    """Serves recipe on stdin/stdout until close or EOF; never returns.

    Call it first thing: it points file descriptor 1 at stderr (a stray print from any
    library cannot corrupt the protocol) and logs to stderr.
    """
    logging.basicConfig(stream=sys.stderr, level=logging.INFO,
                        format="%(asctime)s.%(msecs)03d %(levelname)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    _Worker(recipe, out).run()


def main(recipes, make):
    """A worker script's main: serves make() when its one argument is one of recipes,
    else prints its usage and exits 2."""
    if len(sys.argv) != 2 or sys.argv[1] not in recipes:
        print("usage: %s RECIPE (one of %s)" % (os.path.basename(sys.argv[0]), ", ".join(recipes)), file=sys.stderr)
        sys.stderr.flush()
        os._exit(2)
    serve(make())
