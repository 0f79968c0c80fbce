#!/usr/bin/python3
"""zlockcheck worker for Kazoo's lock recipes, speaking worker protocol v2 (and v1).

Usage (always Debian's system Python, which has python3-kazoo; a pyenv or venv
``python3`` earlier on the PATH usually has no kazoo)::

    /usr/bin/python3 recipes/python/kazoo_worker.py RECIPE

RECIPE is one of

- ``kazoo-lock``: kazoo.recipe.lock.Lock; init kinds ``mutex`` and ``counter``;
- ``kazoo-semaphore``: kazoo.recipe.lock.Semaphore with max_leases = init's
  ``permits``; init kind ``semaphore``;
- ``kazoo-rwlock``: kazoo.recipe.lock.ReadLock / WriteLock on the same path, chosen
  by the acquire's ``mode``; init kind ``rwlock``.

With zlockcheck: ``zlockcheck run --recipe exec --worker-cmd
"/usr/bin/python3 /work/main/recipes/python/kazoo_worker.py kazoo-lock"``.

Requests come one per line on stdin and are answered one at a time, in the main
thread; replies and events go to stdout, one JSON object per line, each written and
flushed under one lock (Kazoo's connection thread writes events too). Nothing else
ever reaches stdout: file descriptor 1 is pointed at stderr at start-up and the
protocol uses a private duplicate of the original stdout. All logging, Kazoo's
included, goes to stderr.

Protocol v2 (docs/protocol.md, "Worker protocol v2"): when init offers ``"protocol":2`` the ok
reply says ``"protocol":2``; ``clock`` answers ``time.monotonic_ns()``; ``cycle`` runs
acquire, hold ``hold_us``, release in this thread, each step reported as it happens
(an invoke report is written before the request goes out). A lost event while
holding ends the cycle's hold: no release (the node is stale, as in v1).

Replies: ok = certainly happened, fail = certainly did not happen, info = unknown
(the harness then replaces the worker).

How the recipes are driven
--------------------------

- Every acquire uses a fresh recipe object (Lock/ReadLock/WriteLock/Semaphore), as a
  short-lived user of the recipe would; objects never carry state from one hold to the
  next. The acquire is the recipe's own ``acquire(blocking=True, timeout=T)``; a
  watchdog calls the recipe's ``cancel()`` at T as well, because Lock waits the full
  timeout again each time its predecessor changes, so kazoo alone may overrun T.
  ``timeout_ms`` 0 (or absent) means no timeout, as in zlockcheck's Go worker.
- Bounded replies: Kazoo's blocking calls wait for as long as the client is
  disconnected, so the recipe runs in a thread of its own. If it has not returned
  T + session timeout + 1 s after the acquire began (and does not within 0.5 s of a
  ``cancel()``), the worker gives up: it replies info, stops its client in the
  background and answers every later request info (close: ok, exit 0). The worker's
  own ZooKeeper calls (checks, deletes, counter ops) wait at most one session timeout.
  So an acquire is answered within about T + 2 session timeouts + 2 s, well inside
  the harness's T + 3 session timeouts + 5 s.
- Success: the lock node is the recipe's own record of it (``Lock.node``, the child
  name created with the recipe's uuid prefix; ``Semaphore.create_path``). The worker
  stats it: it must exist and be owned (ephemeralOwner) by the current session, and no
  connection event may have happened since that stat started; then ok with
  ``token`` = the node's czxid. Anything else is info.
- Failure (LockTimeout, the watchdog's CancelledError, a retry deadline, any error):
  Kazoo's own clean-up (``_best_effort_cleanup``) swallows errors, so it may leave
  the node behind. The worker therefore checks itself: sync, then every child of the
  lock path (and of the Semaphore's internal lock path ``PATH-__lock__``) whose
  ephemeralOwner is one of this worker's sessions is deleted. Only if that succeeds
  is the reply fail ("timeout", or the error); otherwise info.
- Release deletes the held node itself (Kazoo's release swallows NoNodeError and would
  report success for a node deleted behind its back): ok when deleted; fail "not held"
  when nothing is held or the node was already gone; a connection loss is retried
  within the session timeout only while the node still exists; info if the outcome
  is unknown.
- Lost: a state listener reports ``{"event":"lost"}`` once per hold on SUSPENDED or
  LOST while holding (Kazoo's advice: locks are not valid while suspended). The node
  may survive a suspension, so it is remembered as stale and deleted before the next
  acquire (else it would keep the lock, blocking everyone, ourselves included).
- Counter (kind ``counter``, only while holding): read = get (missing/empty = 0);
  write = set, or with ``fenced`` a transaction check(lock node, -1) + set_data that
  commits only while our lock node exists. Fencing works for every recipe here since
  the node path is always known.

Retry policy
------------

- connection_retry: unlimited attempts (max_tries=-1), delay 0.1 s doubling up to
  1 s: the client keeps reconnecting for as long as the process lives and reconnects
  within a second of a healed partition (Kazoo's default grows to an hour), so a
  session that is still alive is resumed rather than left to expire.
- command_retry (``client.retry``, used by Semaphore.acquire and the recipes'
  release): unlimited attempts bounded by a deadline of one session timeout, delay
  0.1 s doubling up to 1 s. Re-running after a connection loss is safe for these
  recipes because they never re-issue a blind create: Lock (which has its own retry,
  deadline = the acquire timeout) looks for its uuid-prefixed node before creating
  another, and Semaphore checks whether its fixed lease path exists first. The
  worker's own writes (release's delete, counter set, fenced transaction) never go
  through Kazoo's retry: a write whose reply was lost is info (release retries only
  while the node provably still exists); a counter write with an unknown outcome is
  tried again, 0.1 s apart, for init's ``write_retry_ms`` (as an application's retry
  loop would), then info. Its own calls are bounded by the session timeout
  (Kazoo's blocking calls wait forever while disconnected).
"""

import base64
import json
import logging
import os
import sys
import threading
import time

try:
    from kazoo.client import KazooClient
    from kazoo.exceptions import (
        CancelledError,
        ConnectionLoss,
        LockTimeout,
        NodeExistsError,
        NoNodeError,
        OperationTimeoutError,
    )
    from kazoo.protocol.states import KazooState
    from kazoo.recipe.lock import Lock, ReadLock, Semaphore, WriteLock
    from kazoo.retry import KazooRetry

    KAZOO_IMPORT_ERROR = None
except ImportError as _e:  # reported by main()
    KAZOO_IMPORT_ERROR = _e

RECIPES = {
    "kazoo-lock": ("mutex", "counter"),
    "kazoo-semaphore": ("semaphore",),
    "kazoo-rwlock": ("rwlock",),
}

OPS = ("init", "acquire", "release", "close", "read", "write", "clock", "cycle")

log = logging.getLogger("kazoo_worker")


class Malformed(Exception):
    """A request line that breaks the protocol: the worker exits 1."""


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def parse_request(line):
    try:
        req = json.loads(line)
    except ValueError as e:
        raise Malformed("not JSON: %s" % e)
    if not isinstance(req, dict):
        raise Malformed("not a JSON object")
    if not is_int(req.get("id")):
        raise Malformed("field id: want an integer, got %r" % (req.get("id"),))
    op = req.get("op")
    if op not in OPS:
        raise Malformed("field op: unknown op %r" % (op,))
    if op == "write" and not is_int(req.get("value")):
        raise Malformed("field value: write needs an integer value")
    if op == "cycle":
        for field in ("depth", "hold_us", "timeout_ms"):
            v = req.get(field, 0)
            if v is not None and (not is_int(v) or v < 0):
                raise Malformed("field %s: want a non-negative integer, got %r" % (field, v))
    return req


class Output(object):
    """Protocol lines to the harness: one line per write, flushed, under lock."""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.RLock()

    def send(self, msg):
        line = json.dumps(msg, separators=(",", ":")) + "\n"
        with self.lock:
            self.stream.write(line)
            self.stream.flush()


class Done(Exception):
    """Raised to stop serving; code is the exit status."""

    def __init__(self, code):
        Exception.__init__(self, code)
        self.code = code


class Worker(object):
    def __init__(self, recipe, out):
        self.recipe = recipe
        self.out = out
        # One lock for the shared state below and for stdout: an ok reply and the
        # state it reports are published atomically with respect to the listener.
        self.mu = out.lock
        self.client = None
        self.cfg = None
        self.st = None  # session timeout, seconds
        self.held = None  # full path of the node we hold
        self.stale = []  # nodes of holds reported lost that may still exist
        self.conn_events = 0  # SUSPENDED/LOST transitions seen
        self.sessions = set()  # every session id this worker has had
        self.reported = None  # last session id sent as an event
        self.announce = False  # session events only after init's reply
        self.dead = None  # why the worker gave up (then every op is info)
        self.protocol = 1  # the version init agreed
        self.step = None  # (cycle id, op) whose outcome reply() reports (v2)
        self.lost_ev = None  # set when a cycle's hold is lost (v2)

    # ---- output -----------------------------------------------------------------

    def reply(self, rid, typ, error=None, **extra):
        """Replies to request rid, or during a v2 cycle reports the outcome of the
        step in flight; returns typ."""
        if self.step is not None:
            return self._report(typ, error, **extra)
        msg = {"id": rid, "type": typ}
        if error is not None and typ != "ok":
            msg["error"] = error
        msg.update(extra)
        if typ == "ok":
            log.info("reply %d ok %s", rid, extra or "")
        else:
            log.info("reply %d %s: %s", rid, typ, error)
        self.out.send(msg)
        return typ

    # ---- protocol v2: cycles ----------------------------------------------------------

    def _report(self, step, error=None, **extra):
        cid, f = self.step
        msg = {"id": cid, "step": step, "f": f, "mono_ns": time.monotonic_ns()}
        if error is not None and step != "ok":
            msg["error"] = error
        if step == "ok" and "token" in extra:
            msg["token"] = extra["token"]
        log.info("report %d %s %s %s", cid, f, step, error or "")
        self.out.send(msg)
        return step

    def _invoke(self, cid, f):
        """Reports that f is invoked (before its request goes out); False, reporting
        nothing, if the lock was lost while held (then the cycle ends)."""
        with self.mu:
            if f == "release" and self.lost_ev.is_set():
                return False
            self.out.send({"id": cid, "step": "invoke", "f": f, "mono_ns": time.monotonic_ns()})
        self.step = (cid, f)
        return True

    def _run_step(self, fn):
        try:
            return fn()
        finally:
            self.step = None

    def cycle(self, rid, req):
        depth = max(req.get("depth") or 1, 1)
        with self.mu:
            self.lost_ev = threading.Event()
        try:
            held = 0
            while held < depth:
                self._invoke(rid, "acquire")
                if self.dead:
                    typ = self._run_step(lambda: self.reply(rid, "info", "worker gave up earlier: " + self.dead))
                else:
                    typ = self._run_step(lambda: self.acquire(rid, req))
                if typ == "ok":
                    held += 1
                    continue
                if typ == "info" or held == 0:
                    return self.reply(rid, "ok")
                break
            if self.lost_ev.wait((req.get("hold_us") or 0) / 1e6):
                return self.reply(rid, "ok")
            while held > 0:
                if not self._invoke(rid, "release"):
                    break
                if self._run_step(lambda: self.release(rid)) != "ok":
                    break
                held -= 1
            return self.reply(rid, "ok")
        finally:
            with self.mu:
                self.lost_ev = None

    def _note_session_locked(self, client):
        cid = client.client_id
        if not cid or not cid[0]:
            return
        sid, passwd = cid
        self.sessions.add(sid)
        if self.announce and sid != self.reported:
            self.reported = sid
            sid_hex = "0x%x" % (sid & 0xFFFFFFFFFFFFFFFF)
            log.info("event session %s", sid_hex)
            self.out.send({
                "event": "session",
                "session_id": sid_hex,
                "passwd": base64.b64encode(passwd or b"").decode("ascii"),
            })

    # ---- Kazoo's connection thread ----------------------------------------------

    def _on_state(self, client, state):
        # Runs on Kazoo's connection thread: it must not block and must not call
        # ZooKeeper. Writing a line to stdout is all it does.
        try:
            with self.mu:
                if client is not self.client:
                    return False
                log.info("connection state %s", state)
                if state in (KazooState.SUSPENDED, KazooState.LOST):
                    self.conn_events += 1
                    if self.held is not None:
                        node, self.held = self.held, None
                        self.stale.append(node)
                        why = ("connection suspended" if state == KazooState.SUSPENDED
                               else "session lost")
                        log.info("event lost: %s while holding %s", why, node)
                        self.out.send({"event": "lost", "error": why})
                        if self.lost_ev is not None:
                            self.lost_ev.set()
                elif state == KazooState.CONNECTED:
                    self._note_session_locked(client)
        except Exception:  # never let a listener error pass silently
            log.exception("state listener")
        return False

    # ---- ZooKeeper calls of our own, bounded in time --------------------------------

    def call(self, async_result, timeout=None):
        """Waits for one of our own async requests; KazooTimeoutError after timeout
        (the request may still be sent later: treat the outcome as unknown)."""
        if timeout is None:
            timeout = self.st
        return async_result.get(timeout=max(timeout, 0.001))

    def _owned(self, parents, deadline):
        """Children of parents that are ephemeral nodes of any of our sessions, after
        a sync (a server we reconnected to may lag behind a create we never heard
        back from)."""
        with self.mu:
            sids = set(self.sessions)
        found = []
        for parent in parents:
            self.call(self.client.sync_async(parent), deadline - time.monotonic())
            try:
                children = self.call(self.client.get_children_async(parent),
                                     deadline - time.monotonic())
            except NoNodeError:
                continue
            for child in children:
                p = parent + "/" + child
                stat = self.call(self.client.exists_async(p), deadline - time.monotonic())
                if stat is not None and stat.ephemeralOwner in sids:
                    found.append(p)
        return found

    def _clear_leftovers(self, parents):
        """Deletes every node our sessions own under parents. Returns None when none
        is left, else why that is not certain."""
        deadline = time.monotonic() + self.st
        try:
            for p in self._owned(parents, deadline):
                log.info("deleting leftover node %s", p)
                try:
                    self.call(self.client.delete_async(p), deadline - time.monotonic())
                except NoNodeError:
                    pass
        except Exception as e:
            return "%s: %s" % (type(e).__name__, e)
        return None

    def _clear_stale(self):
        """Deletes nodes of holds reported lost. None on success, else the error."""
        while True:
            with self.mu:
                if not self.stale:
                    return None
                node = self.stale[0]
            try:
                self.call(self.client.delete_async(node))
                log.info("deleted stale node %s", node)
            except NoNodeError:
                pass
            except Exception as e:
                return "deleting stale lock node %s: %s: %s" % (node, type(e).__name__, e)
            with self.mu:
                if node in self.stale:
                    self.stale.remove(node)

    def _session_id(self):
        cid = self.client.client_id if self.client else None
        return cid[0] if cid else None

    # ---- requests -----------------------------------------------------------------

    def init(self, rid, req):
        if self.client is not None:
            raise Malformed("init twice")
        kind = req.get("kind")
        kinds = RECIPES[self.recipe]
        if kind not in kinds:
            return self.reply(rid, "fail", "recipe %s does not support kind %r (supports %s)"
                              % (self.recipe, kind, ", ".join(kinds)))
        hosts = ",".join(h.strip() for h in str(req.get("connect") or "").split(",") if h.strip())
        st_ms = req.get("session_timeout_ms")
        path = req.get("path")
        permits = req.get("permits") or 0
        if not hosts:
            return self.reply(rid, "fail", "init: connect is empty")
        if not is_int(st_ms) or st_ms <= 0:
            return self.reply(rid, "fail", "init: session_timeout_ms must be a positive integer, got %r" % (st_ms,))
        if not isinstance(path, str) or not path.startswith("/") or len(path) < 2 or path.endswith("/"):
            return self.reply(rid, "fail", "init: path must be an absolute znode path, got %r" % (path,))
        if not is_int(permits):
            return self.reply(rid, "fail", "init: permits must be an integer, got %r" % (permits,))
        if kind == "semaphore" and permits < 1:
            return self.reply(rid, "fail", "init: a semaphore needs permits >= 1, got %d" % permits)
        if kind != "semaphore" and permits > 1:
            return self.reply(rid, "fail", "init: kind %s has one permit, got permits %d" % (kind, permits))
        counter_path = req.get("counter_path")
        if kind == "counter" and (not isinstance(counter_path, str) or not counter_path.startswith("/")
                                  or counter_path.endswith("/")):
            return self.reply(rid, "fail", "init: kind counter needs an absolute counter_path, got %r"
                              % (counter_path,))
        # fenced needs our lock node's path: every recipe here records it (Lock.node,
        # Semaphore.create_path), so fencing is supported for all of them.
        fenced = bool(req.get("fenced"))
        write_retry_ms = req.get("write_retry_ms", 0)
        if not is_int(write_retry_ms) or write_retry_ms < 0:
            return self.reply(rid, "fail", "init: write_retry_ms must be a non-negative integer, got %r"
                              % (write_retry_ms,))

        st = st_ms / 1000.0
        self.st = st
        self.cfg = {
            "kind": kind, "path": path, "permits": permits, "counter_path": counter_path,
            "fenced": fenced, "worker": req.get("worker"), "write_retry_ms": write_retry_ms,
        }
        client = KazooClient(
            hosts=hosts,
            timeout=st,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
            command_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0,
                                     deadline=st),
            logger=logging.getLogger("kazoo.client"),
        )
        client.add_listener(lambda state, c=client: self._on_state(c, state))
        with self.mu:
            self.client = client
        t0 = time.monotonic()
        try:
            client.start(timeout=2 * st)
        except Exception as e:
            with self.mu:
                self.client = None
            try:
                client.stop()
                client.close()
            except Exception:
                pass
            return self.reply(rid, "fail", "init: connecting to %s failed within %.1fs: %s: %s"
                              % (hosts, 2 * st, type(e).__name__, e))
        log.info("connected to %s in %.3fs (recipe %s, kind %s, path %s, worker %s)",
                 hosts, time.monotonic() - t0, self.recipe, kind, path, req.get("worker"))
        with self.mu:
            proto = req.get("protocol")
            if is_int(proto) and proto >= 2:
                self.protocol = 2
                self.reply(rid, "ok", protocol=2)
            else:
                self.reply(rid, "ok")
            self.announce = True
            self._note_session_locked(client)

    def acquire(self, rid, req):
        cfg = self.cfg
        timeout_ms = req.get("timeout_ms", 0)
        if timeout_ms is None:
            timeout_ms = 0
        if not is_int(timeout_ms) or timeout_ms < 0:
            return self.reply(rid, "fail", "acquire: bad timeout_ms %r" % (timeout_ms,))
        mode = req.get("mode") or ""
        if cfg["kind"] == "rwlock":
            if mode not in ("read", "write"):
                return self.reply(rid, "fail", "acquire: kind rwlock needs mode read or write, got %r" % (mode,))
        elif mode:
            return self.reply(rid, "fail", "acquire: kind %s has no modes, got mode %r" % (cfg["kind"], mode))
        with self.mu:
            if self.held is not None:
                return self.reply(rid, "fail", "already held (the recipes are not re-entrant)")
        err = self._clear_stale()
        if err:
            return self.reply(rid, "fail", err)

        path = cfg["path"]
        ident = "zlockcheck-worker-%s" % (cfg["worker"],)
        timeout = timeout_ms / 1000.0 if timeout_ms > 0 else None
        if cfg["kind"] == "semaphore":
            prim = Semaphore(self.client, path, ident, max_leases=cfg["permits"])
            parents = [path, prim.lock_path]
        else:
            cls = {"read": ReadLock, "write": WriteLock}.get(mode, Lock)
            prim = cls(self.client, path, ident)
            parents = [path]

        # The recipe runs in its own thread: Kazoo's blocking calls wait for as long
        # as the client is disconnected, and the reply must come in bounded time.
        outcome = {}
        watchdog = None
        if timeout is not None:
            watchdog = threading.Timer(timeout, prim.cancel)
            watchdog.daemon = True

        def run():
            try:
                outcome["got"] = prim.acquire(blocking=True, timeout=timeout)
            except BaseException as e:
                outcome["exc"] = e

        t0 = time.monotonic()
        runner = threading.Thread(target=run, name="acquire", daemon=True)
        if watchdog:
            watchdog.start()
        runner.start()
        runner.join(None if timeout is None else timeout + self.st + 1.0)
        if runner.is_alive():
            prim.cancel()
            runner.join(0.5)
        if watchdog:
            watchdog.cancel()
            watchdog.join()
        if runner.is_alive():
            why = ("acquire: the recipe did not return within %.1fs (timeout + session timeout + 1s); "
                   "Kazoo's calls block while disconnected" % (time.monotonic() - t0))
            self._give_up(why)
            return self.reply(rid, "info", why)
        if isinstance(prim, Semaphore):
            # Semaphore leaves its session listener registered; one per acquire
            # would pile up.
            self.client.remove_listener(prim._watch_session)

        got = bool(outcome.get("got"))
        why = None
        exc = outcome.get("exc")
        if isinstance(exc, (LockTimeout, CancelledError)):
            log.info("acquire: %s: %s", type(exc).__name__, exc)
            why = "timeout"
        elif exc is not None:
            log.warning("acquire: %s: %s", type(exc).__name__, exc)
            why = "acquire: %s: %s" % (type(exc).__name__, exc)
        elif not got:
            why = "timeout"  # the recipe's retry deadline (= timeout) ran out
        log.info("acquire (%s) returned after %.3fs: %s", mode or cfg["kind"],
                 time.monotonic() - t0, "acquired" if got else why)

        if not got:
            err = self._clear_leftovers(parents)
            if err:
                return self.reply(rid, "info", "%s, and making sure no node of ours is left failed: %s"
                                  % (why, err))
            return self.reply(rid, "fail", why)

        if isinstance(prim, Semaphore):
            node = prim.create_path
        else:
            node = path + "/" + prim.node if prim.node else None
        if not node:
            return self.reply(rid, "info", "acquired, but the recipe recorded no lock node")
        with self.mu:
            snap = self.conn_events
        sid = self._session_id()
        try:
            stat = self.call(self.client.exists_async(node))
        except Exception as e:
            return self._acquired_but(rid, node, "stat of lock node %s failed: %s: %s"
                                      % (node, type(e).__name__, e))
        if stat is None:
            return self._acquired_but(rid, node, "lock node %s was gone right after" % node)
        if sid is None or stat.ephemeralOwner != sid:
            return self._acquired_but(rid, node, "lock node %s is owned by session 0x%x, not ours (%s)"
                                      % (node, stat.ephemeralOwner, "0x%x" % sid if sid else "none"))
        with self.mu:
            if self.conn_events != snap or self.client.state != KazooState.CONNECTED:
                return self._acquired_but(rid, node, "connection interrupted while confirming the hold")
            self.held = node
            log.info("holding %s (czxid %d)", node, stat.czxid)
            return self.reply(rid, "ok", token=stat.czxid)

    def _give_up(self, why):
        """The worker cannot vouch for anything any more: end the session in the
        background (it may not get through) and answer info from now on."""
        log.error("giving up: %s", why)
        self.dead = why
        client = self.client
        with self.mu:
            self.held = None
            self.client = None  # the listener ignores what follows

        def stop():
            try:
                client.stop()
                client.close()
            except Exception as e:
                log.warning("stopping the client: %s: %s", type(e).__name__, e)

        threading.Thread(target=stop, name="give-up", daemon=True).start()

    def _acquired_but(self, rid, node, why):
        # We held the lock at some point but cannot vouch for it now: info. Try to
        # give the node back so that the others need not wait for our session to end.
        try:
            self.call(self.client.delete_async(node), min(self.st, 1.0))
        except Exception:
            pass
        return self.reply(rid, "info", "acquired, but " + why)

    def release(self, rid):
        with self.mu:
            node = self.held
        if node is None:
            return self.reply(rid, "fail", "not held")
        deadline = time.monotonic() + self.st
        retried = False
        while True:
            try:
                if retried:
                    # A delete's reply was lost. Retry only while the node provably
                    # still exists; if it is gone we cannot tell who removed it.
                    if self.call(self.client.exists_async(node), deadline - time.monotonic()) is None:
                        self._forget(node)
                        return self.reply(rid, "info", "release: the delete's reply was lost and %s is gone now"
                                          % node)
                self.call(self.client.delete_async(node), deadline - time.monotonic())
                self._forget(node)
                log.info("released %s", node)
                return self.reply(rid, "ok")
            except NoNodeError:
                self._forget(node)
                if retried:
                    return self.reply(rid, "info", "release: the delete's reply was lost and %s is gone now"
                                      % node)
                return self.reply(rid, "fail", "not held: the lock node was already gone")
            except Exception as e:
                name = type(e).__name__
                if isinstance(e, (ConnectionLoss, OperationTimeoutError)) and time.monotonic() < deadline - 0.2:
                    log.info("release: %s; retrying", name)
                    retried = True
                    time.sleep(0.2)
                    continue
                return self.reply(rid, "info", "release: %s: %s" % (name, e))

    def _forget(self, node):
        with self.mu:
            if self.held == node:
                self.held = None
            if node in self.stale:
                self.stale.remove(node)

    def _counter_check(self, rid):
        if self.cfg["kind"] != "counter":
            self.reply(rid, "fail", "counter ops need kind counter, this worker has kind %s" % self.cfg["kind"])
            return None
        with self.mu:
            node = self.held
        if node is None:
            self.reply(rid, "fail", "not held")
        return node

    def read(self, rid):
        if self._counter_check(rid) is None:
            return
        cp = self.cfg["counter_path"]
        try:
            data, _ = self.call(self.client.get_async(cp))
        except NoNodeError:
            data = b""
        except Exception as e:
            # A read has no effect: whatever happened, it did not change anything.
            return self.reply(rid, "fail", "read: %s: %s" % (type(e).__name__, e))
        text = (data or b"").decode("utf-8", "replace").strip()
        try:
            value = int(text) if text else 0
        except ValueError:
            return self.reply(rid, "fail", "read: counter %s holds %r, not an integer" % (cp, text))
        self.reply(rid, "ok", value=value)

    def write(self, rid, req):
        node = self._counter_check(rid)
        if node is None:
            return
        # Like an application's retry loop (Kazoo's KazooRetry, Curator's RetryLoop):
        # a write whose outcome is unknown is tried again until write_retry_ms is up.
        deadline = time.monotonic() + self.cfg["write_retry_ms"] / 1000.0
        attempt = 0
        while True:
            typ, error = self._write_once(node, str(req["value"]).encode("ascii"))
            if typ == "fail" and attempt > 0:
                # An earlier attempt may have been applied: the outcome stays unknown.
                return self.reply(rid, "info", "%s (after %d attempts whose outcome is unknown)" % (error, attempt))
            attempt += 1
            if typ != "info" or time.monotonic() + 0.1 >= deadline:
                return self.reply(rid, typ, error)
            log.info("write %s: %s: retrying", req["value"], error)
            time.sleep(0.1)

    def _write_once(self, node, data):
        """One attempt of a counter write: ("ok", None), ("fail", why) or ("info", why)."""
        cp = self.cfg["counter_path"]
        if not self.cfg["fenced"]:
            try:
                self.call(self.client.set_async(cp, data))
                return "ok", None
            except NoNodeError:
                pass
            except Exception as e:
                return "info", ("write: %s: %s" % (type(e).__name__, e))
            try:  # the counter does not exist yet
                self.call(self.client.create_async(cp, data, makepath=True))
                return "ok", None
            except NodeExistsError:
                return "fail", ("write: counter %s appeared while creating it" % cp)
            except Exception as e:
                return "info", ("write: create %s: %s: %s" % (cp, type(e).__name__, e))

        def commit(create):
            tx = self.client.transaction()
            tx.check(node, -1)
            if create:
                tx.create(cp, data)
            else:
                tx.set_data(cp, data)
            return self.call(tx.commit_async())

        for create in (False, True):
            try:
                results = commit(create)
            except Exception as e:
                return "info", ("fenced write: %s: %s" % (type(e).__name__, e))
            if not any(isinstance(r, Exception) for r in results):
                return "ok", None
            # The transaction failed as a whole: nothing was written.
            if isinstance(results[0], NoNodeError):
                return "fail", ("fenced: lock node gone")
            if not create and isinstance(results[1], NoNodeError):
                parent = cp.rsplit("/", 1)[0]
                if parent:
                    try:
                        self.call(self.client.ensure_path_async(parent))
                    except Exception as e:
                        return "fail", ("fenced write: counter %s is missing and creating its "
                                        "parent failed: %s: %s" % (cp, type(e).__name__, e))
                continue
            return "fail", ("fenced write rejected: %s" % ", ".join(
                type(r).__name__ for r in results if isinstance(r, Exception)))

    def shutdown(self, wait):
        """Stops the client (ending the session) within wait seconds; True if done."""
        client = self.client
        if client is None:
            return True
        with self.mu:
            self.held = None
            self.client = None  # the listener ignores what follows

        def stop():
            try:
                client.stop()
                client.close()
            except Exception as e:
                log.warning("stopping the client: %s: %s", type(e).__name__, e)

        t = threading.Thread(target=stop, daemon=True)
        t.start()
        t.join(wait)
        return not t.is_alive()

    def handle(self, req):
        rid, op = req["id"], req["op"]
        log.info("request %s", json.dumps(req, separators=(",", ":")))
        if op == "close":
            done = self.shutdown(2 * (self.st or 1) + 2)
            if done:
                self.reply(rid, "ok")
            else:
                self.reply(rid, "info", "close: the client did not stop in time")
            raise Done(0)
        if op == "init":
            if self.dead:
                raise Malformed("init twice")
            return self.init(rid, req)
        if op in ("clock", "cycle") and self.protocol < 2:
            raise Malformed("%s is protocol v2, and init agreed v1" % op)
        if op == "clock":
            return self.reply(rid, "ok", mono_ns=time.monotonic_ns())
        if op == "cycle":
            return self.cycle(rid, req)
        if self.dead:
            return self.reply(rid, "info", "worker gave up earlier: " + self.dead)
        if self.client is None:
            raise Malformed("%s before a successful init" % op)
        if op == "acquire":
            return self.acquire(rid, req)
        if op == "release":
            return self.release(rid)
        if op == "read":
            return self.read(rid)
        if op == "write":
            return self.write(rid, req)
        raise Malformed("unknown op %r" % op)


def main(argv):
    # Keep the real stdout for protocol lines only; anything else that writes to
    # fd 1 or sys.stdout lands on stderr.
    proto = open(os.dup(1), "w", encoding="utf-8", newline="\n")
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO,
        format="%(asctime)s.%(msecs)03d kazoo_worker[" + str(os.getpid()) + "] %(name)s %(levelname)s %(message)s",
        datefmt="%H:%M:%S")
    if len(argv) != 2 or argv[1] not in RECIPES:
        log.error("usage: /usr/bin/python3 %s RECIPE  (RECIPE: %s)", argv[0], " | ".join(sorted(RECIPES)))
        return 2
    if KAZOO_IMPORT_ERROR is not None:
        log.error("cannot import kazoo (%s) with %s: run with /usr/bin/python3, "
                  "which has Debian's python3-kazoo", KAZOO_IMPORT_ERROR, sys.executable)
        return 2
    worker = Worker(argv[1], Output(proto))
    stdin = sys.stdin.buffer
    code = 0
    try:
        while True:
            raw = stdin.readline()
            if not raw:
                log.info("stdin closed; closing")
                worker.shutdown(2 * (worker.st or 1) + 2)
                break
            line = raw.decode("utf-8", "replace").strip()
            if not line:
                continue
            try:
                req = parse_request(line)
                worker.handle(req)
            except Malformed as e:
                log.error("malformed request line %r: %s", line, e)
                worker.shutdown(1.0)
                code = 1
                break
    except Done as d:
        code = d.code
    except BrokenPipeError:
        log.error("stdout closed")
        worker.shutdown(1.0)
        code = 1
    except Exception:
        log.exception("worker failed")
        worker.shutdown(1.0)
        code = 1
    try:
        proto.flush()
    except Exception:
        pass
    logging.shutdown()
    # Kazoo's threads are daemons, but do not let any straggler hold the exit.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
