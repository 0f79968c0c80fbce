"""The Redis clients of the Python workers' Redis locks, and the lease they share.

One place for what every Redis lock worker of recipes/python does at init: refuse
what a mutex without a token cannot run, and connect with redis-py's defaults to
init's addresses (the only instance, the primary of the replicas topology, or each
independent primary of the redlock topology). And one place for a lock whose library
tells its holder nothing but the lease it asked for (``Leased``): the worker polls the
library's one-try acquire at the library's pace, and reports "lost" when the lease's
validity has run out.
"""

import logging
import os
import threading
import time

import redis

import zlcworker

log = logging.getLogger("zlc.redis")


def _addrs(recipe, init, token):
    """init's addresses as (host, port), after refusing another workload kind,
    fencing (a random value is no fencing token) and a connect that is not host:port."""
    if init.kind != "mutex":
        raise zlcworker.Refused("%s speaks the mutex workload, not %s" % (recipe, init.kind))
    if init.fenced:
        raise zlcworker.Refused("%s cannot fence: its %s is a random value" % (recipe, token))
    addrs = []
    for a in init.connect:
        host, _, port = a.rpartition(":")
        if not host or not port.isdigit():
            raise zlcworker.Refused("init: connect %r is not host:port" % a)
        addrs.append((host, int(port)))
    return addrs


def _password():
    """The password of a server the user runs, from $REDISCLI_AUTH (zlockcheck run
    --connect), as for every Redis worker; None when unset."""
    return os.environ.get("REDISCLI_AUTH") or None


def _pinged(clients):
    """clients, once each answered PING; all closed if one did not (the harness tries
    the init again: info)."""
    try:
        for c in clients:
            c.ping()
    except Exception:
        for c in clients:
            c.close()
        raise
    return clients


def mutex_clients(recipe, init, token):
    """A client for each of init's addresses (RedLock's independent primaries), for a
    mutex recipe whose lock value is token. A server that is not there yet raises
    (info: the harness tries again). A recipe over several primaries has no Sentinel
    mode: init's sentinel_master is refused.
    """
    if init.sentinel_master is not None:
        raise zlcworker.Refused("init: sentinel_master %r: recipe %s has no Sentinel mode" % (init.sentinel_master, recipe))
    return _pinged([redis.Redis(host=h, port=p, password=_password()) for h, p in _addrs(recipe, init, token)])


def mutex_client(recipe, init, token):
    """The client of a lock on one primary, for a mutex recipe whose lock value is
    token: init's first address; or, when init names sentinels (sentinel_master), the
    primary they name, through redis-py's Sentinel as its documentation shows
    (``Sentinel(sentinels).master_for(name)``, the library's defaults): the client asks
    the sentinels again after a connection error, and so follows a failover.
    """
    if init.sentinel_master is None:
        clients = mutex_clients(recipe, init, token)
        for c in clients[1:]:
            c.close()
        return clients[0]
    from redis.sentinel import Sentinel
    sentinels = Sentinel(_addrs(recipe, init, token))
    return _pinged([sentinels.master_for(init.sentinel_master, password=_password())])[0]


def resend_window(client):
    """How long a command of client may wait before redis-py's default Retry sends it
    again: its socket timeout (redis-py 8: 5 s), or None when it has none."""
    return client.connection_pool.connection_kwargs.get("socket_timeout")


def released_by_resend(began, window):
    """Whether a release that found no lock of its own, begun at began (monotonic),
    may have been sent twice: it took at least the client's socket timeout, after
    which redis-py's default Retry sends the script again. The first send may then
    have released the lock, and the second found nothing: its "not owned" is no
    proof of anything, so the worker answers Unknown."""
    return window is not None and time.monotonic() - began >= window


def unknown_release(began, why):
    """The Unknown a release whose "not owned" may be its own re-send's answers."""
    return zlcworker.Unknown(
        "release: %s after %.1fs, past redis-py's socket timeout: its Retry sent the script "
        "again, and the first send may have released the lock" % (why, time.monotonic() - began))


class Leased:
    """A recipe whose lock is a lease of init's session timeout, which its library
    neither renews nor watches: the caller knows only the lease it asked for.

    acquire polls the subclass's ``try_acquire(lock)`` (one try of the library's own
    acquire) every ``pause(lock)`` until it wins or the timeout has passed, so that
    the lease's validity starts at the try that won. The validity is the TTL less 1%
    and 2 ms for clock drift (as the Go Redis recipes' and RedLock's), from the moment
    before that try; a grant whose reply came after its validity is given back
    (``give_back(lock)``) and polled on. While held, a timer reports "lost" when the
    validity runs out, unless release came first. Subclasses give ``new_lock()``,
    ``try_acquire``, ``pause``, ``give_back``, ``unlock(lock)`` (raising NotHeld or
    Unknown) and ``place(lock)`` (the acquire's "lock" object), and set ``self.name``
    and ``self.resend_window`` (resend_window of their client). A release that found
    no lock of its own after that window answers Unknown (released_by_resend).
    """

    name = "leased"

    def __init__(self):
        self.mu = threading.Lock()
        self.lock = None
        self.lease = None  # the timer that reports the lease's end, while held
        self.last_loss = ""  # why the last hold ended without a release
        self.events = None
        self.ttl_s = 0.0
        self.drift_s = 0.0
        self.path = ""
        self.resend_window = None

    def start(self, init, events):
        """Keeps what every Leased recipe takes from init."""
        self.events = events
        self.ttl_s = init.session_timeout_ms / 1000
        self.drift_s = self.ttl_s / 100 + 0.002
        self.path = init.path

    def acquire(self, timeout_ms, mode):
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        lock = self.new_lock()
        while True:
            begun = time.monotonic()
            if self.try_acquire(lock):
                until = begun + self.ttl_s - self.drift_s
                if time.monotonic() < until:
                    break
                # The reply came after the validity ran out: the lock is not the
                # caller's to trust. Give it back (if it is still ours) and poll on.
                log.info("acquired, but the reply came after the lock's validity ran out: given back")
                self.give_back(lock)
                lock = self.new_lock()
            if deadline is not None and time.monotonic() >= deadline:
                return None
            pause = self.pause(lock)
            if deadline is not None:
                pause = min(pause, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
        timer = threading.Timer(max(0.0, until - time.monotonic()), self.expired, args=(lock,))
        timer.daemon = True
        with self.mu:
            self.lock, self.lease, self.last_loss = lock, timer, ""
        timer.start()
        return zlcworker.Acquired(lock=self.place(lock))

    def expired(self, lock):
        with self.mu:
            if self.lock is not lock:
                return
            self.lock, self.lease = None, None
            self.last_loss = "its TTL ran out"
        self.events.lost("the lock's TTL ran out since before the acquire (%s does not renew it)" % self.name)

    def release(self):
        with self.mu:
            lock, timer = self.lock, self.lease
            self.lock, self.lease = None, None
        if timer is not None:
            timer.cancel()
        if lock is None:
            raise zlcworker.NotHeld(self.last_loss or "nothing held")
        began = time.monotonic()
        try:
            self.unlock(lock)
        except zlcworker.NotHeld as e:
            if released_by_resend(began, self.resend_window):
                raise unknown_release(began, e)
            raise
