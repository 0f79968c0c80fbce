#!/usr/bin/python3
"""Kazoo's lock recipes as a zlockcheck worker, on the protocol of zlcworker.py.

Usage (Debian's system Python, which has python3-kazoo; a pyenv or venv ``python3``
earlier on the PATH usually has no kazoo; the kazoo-2.11-* recipes run it in the
virtual environment of requirements.txt, which has Kazoo 2.11 from PyPI)::

    /usr/bin/python3 recipes/python/kazoo_worker.py RECIPE

RECIPE is one of

- ``kazoo-lock``: kazoo.recipe.lock.Lock; init kinds ``mutex`` and ``counter``;
- ``kazoo-semaphore``: kazoo.recipe.lock.Semaphore with max_leases = init's
  ``permits``; init kind ``semaphore``;
- ``kazoo-rwlock``: kazoo.recipe.lock.ReadLock / WriteLock on the same path, chosen
  by the acquire's ``mode``; init kind ``rwlock``.

With zlockcheck: ``zlockcheck run --recipe exec --worker-cmd
"/usr/bin/python3 /work/main/recipes/python/kazoo_worker.py kazoo-lock"``.

zlcworker.py speaks the protocol (v2 and v1: parsing, replies, cycles, the clock,
close and EOF, stdout's lock; its docstring is the rules); this script is the recipe
behind it, Kazoo driven as below. Without kazoo the script exits 2 saying so.

How the recipes are driven
--------------------------

- Every acquire uses a fresh recipe object (Lock/ReadLock/WriteLock/Semaphore), as a
  short-lived user of the recipe would; objects never carry state from one hold to the
  next. The acquire is the recipe's own ``acquire(blocking=True, timeout=T)``; a
  watchdog calls the recipe's ``cancel()`` at T as well, because Lock waits the full
  timeout again each time its predecessor changes, so kazoo alone may overrun T.
  ``timeout_ms`` 0 means no timeout, as in zlockcheck's Go worker.
- Bounded replies: Kazoo's blocking calls wait for as long as the client is
  disconnected, so the recipe runs in a thread of its own. If it has not returned
  T + session timeout + 1 s after the acquire began (and does not within 0.5 s of a
  ``cancel()``), the worker gives up: it stops its client in the background and raises
  ``zlcworker.GaveUp``, so that this and every later request answers info (close: ok,
  exit 0). The worker's own ZooKeeper calls (checks, deletes, counter ops) wait at
  most one session timeout. So an acquire is answered within about T + 2 session
  timeouts + 2 s, well inside the harness's T + 3 session timeouts + 5 s.
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
  report success for a node deleted behind its back): ok when deleted; fail "not held:
  ..." when nothing is held or the node was already gone; a connection loss is retried
  within the session timeout only while the node still exists; info if the outcome
  is unknown.
- Lost: a state listener reports lost (``events.lost``) once per hold on SUSPENDED or
  LOST while holding (Kazoo's advice: locks are not valid while suspended); zlcworker
  ends a cycle's hold on it. The node may survive a suspension, so it is remembered as
  stale and deleted before the next acquire (else it would keep the lock, blocking
  everyone, ourselves included). Each new session is reported (``events.session``)
  with its hex id and its password in base64.
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
  while the node provably still exists). A counter write makes one attempt and raises
  ``zlcworker.Unknown`` when its outcome is unknown: zlcworker tries it again, 0.1 s
  apart, for init's ``write_retry_ms`` (as an application's retry loop would), then
  answers info. Its own calls are bounded by the session timeout (Kazoo's blocking
  calls wait forever while disconnected).

Where zlcworker's rules changed an answer
-----------------------------------------

Until it joined zlcworker.py this worker spoke the protocol with its own code. The
answers that changed, each zlcworker's documented rule:

- init that cannot connect within 2 session timeouts answers info (was fail): the
  servers may be unreachable for now, which is no refusal of the configuration.
  Configurations the recipe does not run (kind, permits, path, counter_path,
  write_retry_ms, timeout) still answer fail; fields of the wrong JSON type are a
  protocol error (exit 1), as for every Python worker.
- "not held" always carries why: "not held: nothing held" (was a bare "not held").
- close and EOF wait at most 1.5 s for the client to stop (was 2 session timeouts +
  2 s), then close answers info and the worker exits: the harness waits 2 s for the
  exit and kills the worker after, so the longer bound never helped; the session then
  ends by expiry, as after a kill. EOF abandons a request still running 200 ms later.
- write_retry_ms defaults to 8000 when init leaves it out (was 0).
- A counter write being retried checks the hold at each attempt: once the hold is
  reported lost, the write answers info (was: retried against the lock node it began
  with, which a fenced write still checks).

A loss reported while a cycle's acquire runs (between the node's check and the ok) is
still written after the ok report and ends the cycle there: zlcworker holds a cycle's
acquire's events back until its outcome report, as this worker did.
"""

import base64
import logging
import os
import sys
import threading
import time

import zlcworker

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
except ImportError as _e:  # reported by make()
    KAZOO_IMPORT_ERROR = _e

RECIPES = {
    "kazoo-lock": ("mutex", "counter"),
    "kazoo-semaphore": ("semaphore",),
    "kazoo-rwlock": ("rwlock",),
}

log = logging.getLogger("kazoo_worker")


def described(e):
    return "%s: %s" % (type(e).__name__, e)


class KazooRecipe:
    def __init__(self, name):
        self.name = name
        # One lock for the state below, shared with Kazoo's connection thread.
        self.mu = threading.Lock()
        self.events = None
        self.client = None
        self.st = None  # session timeout, seconds
        self.kind = None
        self.path = None
        self.permits = 1
        self.counter_path = None
        self.fenced = False
        self.worker = 0
        self.held = None  # full path of the node we hold
        self.stale = []  # nodes of holds reported lost that may still exist
        self.conn_events = 0  # SUSPENDED/LOST transitions seen
        self.sessions = set()  # every session id this worker has had
        self.reported = None  # last session id reported

    # ---- init and close ------------------------------------------------------------

    def init(self, init, events):
        self.configure(init)
        self.events = events
        hosts = ",".join(h.strip() for h in init.connect if h.strip())
        st = self.st
        client = KazooClient(
            hosts=hosts,
            timeout=st,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
            command_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0, deadline=st),
            logger=logging.getLogger("kazoo.client"),
        )
        client.add_listener(lambda state, c=client: self.on_state(c, state))
        with self.mu:
            self.client = client
        t0 = time.monotonic()
        try:
            client.start(timeout=2 * st)
        except Exception as e:
            stop(self.detach())
            # Not a refusal of the configuration: the servers may be unreachable for now.
            raise zlcworker.Unknown("init: connecting to %s failed within %.1fs: %s" % (hosts, 2 * st, described(e)))
        log.info("connected to %s in %.3fs (recipe %s, kind %s, path %s, worker %s)",
                 hosts, time.monotonic() - t0, self.name, self.kind, self.path, self.worker)
        with self.mu:
            self.note_session(client)

    def configure(self, init):
        """Takes init's configuration, or raises Refused for one this recipe does not run."""
        kinds = RECIPES[self.name]
        kind = init.kind
        if kind not in kinds:
            raise zlcworker.Refused("recipe %s does not support kind %r (supports %s)"
                                    % (self.name, kind, ", ".join(kinds)))
        path, permits, cp = init.path, init.permits, init.counter_path
        if not any(h.strip() for h in init.connect):
            raise zlcworker.Refused("init: connect is empty")
        if init.session_timeout_ms <= 0:
            raise zlcworker.Refused("init: session_timeout_ms must be positive, got %d" % init.session_timeout_ms)
        if not path.startswith("/") or len(path) < 2 or path.endswith("/"):
            raise zlcworker.Refused("init: path must be an absolute znode path, got %r" % (path,))
        if kind == "semaphore" and permits < 1:
            raise zlcworker.Refused("init: a semaphore needs permits >= 1, got %d" % permits)
        if kind != "semaphore" and permits > 1:
            raise zlcworker.Refused("init: kind %s has one permit, got permits %d" % (kind, permits))
        if kind == "counter" and (cp is None or not cp.startswith("/") or cp.endswith("/")):
            raise zlcworker.Refused("init: kind counter needs an absolute counter_path, got %r" % (cp,))
        if init.write_retry_ms < 0:
            raise zlcworker.Refused("init: write_retry_ms must not be negative, got %d" % init.write_retry_ms)
        # fenced needs our lock node's path: every recipe here records it (Lock.node,
        # Semaphore.create_path), so fencing is supported for all of them.
        self.kind, self.path, self.permits, self.counter_path = kind, path, permits, cp
        self.fenced, self.worker = init.fenced, init.worker
        self.st = init.session_timeout_ms / 1000.0

    def close(self):
        """Stops the client, ending the session (zlcworker bounds the wait)."""
        stop(self.detach())

    def give_up(self, why):
        """The worker cannot vouch for anything any more: end the session in the
        background (it may not get through); zlcworker answers info from now on."""
        log.error("giving up: %s", why)
        threading.Thread(target=stop, args=(self.detach(),), name="give-up", daemon=True).start()
        raise zlcworker.GaveUp(why)

    def detach(self):
        """The client, which this recipe (and its listener) no longer uses."""
        with self.mu:
            client, self.client, self.held = self.client, None, None
        return client

    # ---- Kazoo's connection thread -----------------------------------------------------

    def on_state(self, client, state):
        # Runs on Kazoo's connection thread: it must not block and must not call
        # ZooKeeper. Reporting an event is all it does.
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
                        why = "connection suspended" if state == KazooState.SUSPENDED else "session lost"
                        log.info("lost: %s while holding %s", why, node)
                        self.events.lost(why)
                elif state == KazooState.CONNECTED:
                    self.note_session(client)
        except Exception:  # never let a listener error pass silently
            log.exception("state listener")
        return False

    def note_session(self, client):
        """Reports client's session if it is a new one (under mu)."""
        cid = client.client_id
        if not cid or not cid[0]:
            return
        sid, passwd = cid
        self.sessions.add(sid)
        if sid != self.reported:
            self.reported = sid
            self.events.session("0x%x" % (sid & 0xFFFFFFFFFFFFFFFF), base64.b64encode(passwd or b"").decode("ascii"))

    # ---- ZooKeeper calls of our own, bounded in time ------------------------------------

    def call(self, async_result, timeout=None):
        """Waits for one of our own async requests; KazooTimeoutError after timeout
        (the request may still be sent later: treat the outcome as unknown)."""
        if timeout is None:
            timeout = self.st
        return async_result.get(timeout=max(timeout, 0.001))

    def owned(self, parents, deadline):
        """Children of parents that are ephemeral nodes of any of our sessions, after
        a sync (a server we reconnected to may lag behind a create we never heard
        back from)."""
        with self.mu:
            sids = set(self.sessions)
        found = []
        for parent in parents:
            self.call(self.client.sync_async(parent), deadline - time.monotonic())
            try:
                children = self.call(self.client.get_children_async(parent), deadline - time.monotonic())
            except NoNodeError:
                continue
            for child in children:
                p = parent + "/" + child
                stat = self.call(self.client.exists_async(p), deadline - time.monotonic())
                if stat is not None and stat.ephemeralOwner in sids:
                    found.append(p)
        return found

    def clear_leftovers(self, parents):
        """Deletes every node our sessions own under parents. Returns None when none
        is left, else why that is not certain."""
        deadline = time.monotonic() + self.st
        try:
            for p in self.owned(parents, deadline):
                log.info("deleting leftover node %s", p)
                try:
                    self.call(self.client.delete_async(p), deadline - time.monotonic())
                except NoNodeError:
                    pass
        except Exception as e:
            return described(e)
        return None

    def clear_stale(self):
        """Deletes nodes of holds reported lost, or raises Refused (nothing acquired)."""
        while True:
            with self.mu:
                if not self.stale:
                    return
                node = self.stale[0]
            try:
                self.call(self.client.delete_async(node))
                log.info("deleted stale node %s", node)
            except NoNodeError:
                pass
            except Exception as e:
                raise zlcworker.Refused("deleting stale lock node %s: %s" % (node, described(e)))
            self.forget(node)

    def forget(self, node):
        with self.mu:
            if self.held == node:
                self.held = None
            if node in self.stale:
                self.stale.remove(node)

    def session_id(self):
        cid = self.client.client_id if self.client else None
        return cid[0] if cid else None

    # ---- acquire and release ------------------------------------------------------------

    def acquire(self, timeout_ms, mode):
        if timeout_ms < 0:
            raise zlcworker.Refused("acquire: bad timeout_ms %d" % timeout_ms)
        if self.kind == "rwlock":
            if mode not in ("read", "write"):
                raise zlcworker.Refused("acquire: kind rwlock needs mode read or write, got %r" % (mode,))
        elif mode:
            raise zlcworker.Refused("acquire: kind %s has no modes, got mode %r" % (self.kind, mode))
        with self.mu:
            if self.held is not None:
                raise zlcworker.Refused("already held (the recipes are not re-entrant)")
        self.clear_stale()

        path = self.path
        ident = "zlockcheck-worker-%s" % (self.worker,)
        timeout = timeout_ms / 1000.0 if timeout_ms > 0 else None
        if self.kind == "semaphore":
            prim = Semaphore(self.client, path, ident, max_leases=self.permits)
            parents = [path, prim.lock_path]
        else:
            cls = {"read": ReadLock, "write": WriteLock}.get(mode, Lock)
            prim = cls(self.client, path, ident)
            parents = [path]

        got, why = self.run_bounded(prim, timeout)
        log.info("acquire (%s) returned: %s", mode or self.kind, "acquired" if got else why)
        if not got:
            err = self.clear_leftovers(parents)
            if err:
                raise zlcworker.Unknown("%s, and making sure no node of ours is left failed: %s" % (why, err))
            if why == "timeout":
                return None
            raise zlcworker.Refused(why)
        node = prim.create_path if isinstance(prim, Semaphore) else (path + "/" + prim.node if prim.node else None)
        if not node:
            raise zlcworker.Unknown("acquired, but the recipe recorded no lock node")
        return zlcworker.Acquired(token=self.confirm(node))

    def run_bounded(self, prim, timeout):
        """Runs prim's acquire in a thread of its own, bounded (see the docstring):
        (True, None) when acquired, else (False, why); GaveUp when it never returned."""
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
            self.give_up("acquire: the recipe did not return within %.1fs (timeout + session timeout + 1s); "
                         "Kazoo's calls block while disconnected" % (time.monotonic() - t0))
        if isinstance(prim, Semaphore):
            # Semaphore leaves its session listener registered; one per acquire
            # would pile up.
            self.client.remove_listener(prim._watch_session)
        exc = outcome.get("exc")
        if isinstance(exc, (LockTimeout, CancelledError)):
            log.info("acquire: %s", described(exc))
            return False, "timeout"
        if exc is not None:
            log.warning("acquire: %s", described(exc))
            return False, "acquire: " + described(exc)
        if not outcome.get("got"):
            return False, "timeout"  # the recipe's retry deadline (= timeout) ran out
        return True, None

    def confirm(self, node):
        """The czxid of node, our hold, when our session owns it and the connection
        held all along; else Unknown."""
        with self.mu:
            snap = self.conn_events
        sid = self.session_id()
        try:
            stat = self.call(self.client.exists_async(node))
        except Exception as e:
            raise self.acquired_but(node, "stat of lock node %s failed: %s" % (node, described(e)))
        if stat is None:
            raise self.acquired_but(node, "lock node %s was gone right after" % node)
        if sid is None or stat.ephemeralOwner != sid:
            raise self.acquired_but(node, "lock node %s is owned by session 0x%x, not ours (%s)"
                                    % (node, stat.ephemeralOwner, "0x%x" % sid if sid else "none"))
        with self.mu:
            if self.conn_events == snap and self.client is not None and self.client.state == KazooState.CONNECTED:
                self.held = node
                log.info("holding %s (czxid %d)", node, stat.czxid)
                return stat.czxid
        raise self.acquired_but(node, "connection interrupted while confirming the hold")

    def acquired_but(self, node, why):
        """We held the lock at some point but cannot vouch for it now: an Unknown to
        raise. The node is given back so that the others need not wait for our session
        to end."""
        try:
            self.call(self.client.delete_async(node), min(self.st, 1.0))
        except Exception:
            pass
        return zlcworker.Unknown("acquired, but " + why)

    def release(self):
        with self.mu:
            node = self.held
        if node is None:
            raise zlcworker.NotHeld("nothing held")
        deadline = time.monotonic() + self.st
        retried = False
        while True:
            try:
                if retried:
                    # A delete's reply was lost. Retry only while the node provably
                    # still exists; if it is gone we cannot tell who removed it.
                    if self.call(self.client.exists_async(node), deadline - time.monotonic()) is None:
                        self.forget(node)
                        raise zlcworker.Unknown("release: the delete's reply was lost and %s is gone now" % node)
                self.call(self.client.delete_async(node), deadline - time.monotonic())
                self.forget(node)
                log.info("released %s", node)
                return
            except NoNodeError:
                self.forget(node)
                if retried:
                    raise zlcworker.Unknown("release: the delete's reply was lost and %s is gone now" % node)
                raise zlcworker.NotHeld("the lock node was already gone")
            except (ConnectionLoss, OperationTimeoutError) as e:
                if time.monotonic() >= deadline - 0.2:
                    raise zlcworker.Unknown("release: " + described(e))
                log.info("release: %s; retrying", type(e).__name__)
                retried = True
                time.sleep(0.2)
            except zlcworker.Unknown:
                raise
            except Exception as e:
                raise zlcworker.Unknown("release: " + described(e))

    # ---- the counter workload -------------------------------------------------------------

    def holding(self):
        """Our lock node, for a counter op; Refused or NotHeld when there is none."""
        if self.kind != "counter":
            raise zlcworker.Refused("counter ops need kind counter, this worker has kind %s" % self.kind)
        with self.mu:
            node = self.held
        if node is None:
            raise zlcworker.NotHeld("nothing held")
        return node

    def read(self):
        self.holding()
        cp = self.counter_path
        try:
            data, _ = self.call(self.client.get_async(cp))
        except NoNodeError:
            data = b""
        except Exception as e:
            # A read has no effect: whatever happened, it did not change anything.
            raise zlcworker.Refused("read: " + described(e))
        text = (data or b"").decode("utf-8", "replace").strip()
        try:
            return int(text) if text else 0
        except ValueError:
            raise zlcworker.Refused("read: counter %s holds %r, not an integer" % (cp, text))

    def write(self, value):
        """One attempt: Unknown when its outcome is unknown (zlcworker tries again)."""
        node = self.holding()
        data = str(value).encode("ascii")
        cp = self.counter_path
        if not self.fenced:
            try:
                self.call(self.client.set_async(cp, data))
                return
            except NoNodeError:
                pass
            except Exception as e:
                raise zlcworker.Unknown("write: " + described(e))
            try:  # the counter does not exist yet
                self.call(self.client.create_async(cp, data, makepath=True))
                return
            except NodeExistsError:
                raise zlcworker.Refused("write: counter %s appeared while creating it" % cp)
            except Exception as e:
                raise zlcworker.Unknown("write: create %s: %s" % (cp, described(e)))

        for create in (False, True):
            tx = self.client.transaction()
            tx.check(node, -1)
            if create:
                tx.create(cp, data)
            else:
                tx.set_data(cp, data)
            try:
                results = self.call(tx.commit_async())
            except Exception as e:
                raise zlcworker.Unknown("fenced write: " + described(e))
            if not any(isinstance(r, Exception) for r in results):
                return
            # The transaction failed as a whole: nothing was written.
            if isinstance(results[0], NoNodeError):
                raise zlcworker.Fenced("lock node gone")
            if not create and isinstance(results[1], NoNodeError):
                parent = cp.rsplit("/", 1)[0]
                if parent:
                    try:
                        self.call(self.client.ensure_path_async(parent))
                    except Exception as e:
                        raise zlcworker.Refused("fenced write: counter %s is missing and creating its parent "
                                                "failed: %s" % (cp, described(e)))
                continue
            raise zlcworker.Refused("fenced write rejected: %s" % ", ".join(
                type(r).__name__ for r in results if isinstance(r, Exception)))


def stop(client):
    if client is None:
        return
    try:
        client.stop()
        client.close()
    except Exception as e:
        log.warning("stopping the client: %s", described(e))


def make():
    if KAZOO_IMPORT_ERROR is not None:
        print("kazoo_worker: cannot import kazoo (%s) with %s: run with /usr/bin/python3, which has "
              "Debian's python3-kazoo, or in a virtual environment with kazoo" % (KAZOO_IMPORT_ERROR, sys.executable),
              file=sys.stderr)
        sys.stderr.flush()
        os._exit(2)
    return KazooRecipe(sys.argv[1])


if __name__ == "__main__":
    zlcworker.main(RECIPES, make)
