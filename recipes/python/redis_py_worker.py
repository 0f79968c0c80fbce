"""redis-py's Lock as a zlockcheck worker, on the protocol of zlcworker.py.

Usage: VENV/bin/python redis_py_worker.py redis-py-lock

redis-py (pinned in requirements.txt) is used as its documentation tells users to: one
``redis.Redis`` client per process with the client's defaults, which redis-py 8
changed (a connection pool; 5 s socket and connect timeouts; a ``Retry`` of 10 more
attempts, 10 ms to 1 s apart with jitter, on a connection error or a timeout,
which sends a command again, a ``SET NX`` included: a ``SET NX`` that took the lock
and whose reply was lost is sent again, finds the key, its own, and answers nil, so
the acquire polls on and times out while its key holds the lock until its TTL), and
the lock as ``client.lock(name, timeout=TTL)``:

- acquire: ``lock.acquire(blocking=False)`` (one ``SET name token NX PX ttl``) every
  ``sleep`` (redis-py's default, 0.1 s) until it is taken or the timeout T has passed
  (T = 0: as long as it takes): redis-py's own polling, ``acquire(blocking=True,
  blocking_timeout=T)``, made by the worker, so that the validity starts at the try
  that won, not at the call (redis-py's loop would also give up as much as one sleep
  before T). A grant whose reply came after its validity ran out is released and
  polled on, as the Go Redis recipes do.
- release: ``lock.release()``, a Lua compare-and-delete. ``LockNotOwnedError`` (the
  key is gone or holds another's token) answers fail "not held".
- The TTL is init's ``session_timeout_ms``, as for every lease recipe of a run.
  redis-py does not renew it (no watchdog: ``extend`` and ``reacquire`` are there for
  a caller that calls them).

What redis-py tells a holder: nothing. It has no callback and no renewal; what the
caller can know is the lease it asked for. The worker reports "lost" when the lock's
validity has run out (the TTL less 1% and 2 ms for clock drift, from the moment before
the SET that took it), unless it released first. Its token is a random value, not a fencing token,
so an acquire carries none; it says where the lock lives: the key (the lock's name,
init's path) and the token written.

The client talks to init's first address: the only instance, or the primary of the
replicas topology (a failover does not move it, as a client configured with the
primary's address is not moved). redis-py's Lock is no RedLock.
"""

import logging
import threading
import time

from redis.exceptions import LockError, LockNotOwnedError

import redisclient
import zlcworker

log = logging.getLogger("zlc.redis-py")

RECIPES = ("redis-py-lock",)


class RedisPyLock:
    def __init__(self):
        self.client = None
        self.lock = None
        self.ttl_s = 0
        self.path = ""
        self.events = None
        self.mu = threading.Lock()
        self.lease = None  # the timer that reports the lease's end, while held
        self.last_loss = ""  # why the last hold ended without a release

    def init(self, init, events):
        self.client = redisclient.mutex_client("redis-py-lock", init, "token")
        self.events = events
        self.ttl_s = init.session_timeout_ms / 1000
        # The validity's margin for clock drift, as the Go Redis recipes' (1% + 2 ms).
        self.drift_s = self.ttl_s / 100 + 0.002
        self.path = init.path

    def acquire(self, timeout_ms, mode):
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        lock = self.client.lock(self.path, timeout=self.ttl_s)
        while True:
            begun = time.monotonic()
            if lock.acquire(blocking=False):
                until = begun + self.ttl_s - self.drift_s
                if time.monotonic() < until:
                    break
                # The reply came after the validity ran out: the lock is not the
                # caller's to trust. Give it back (if it is still ours) and poll on.
                log.info("acquired, but the reply came after the lock's validity ran out: released")
                try:
                    lock.release()
                except LockError:
                    pass
                lock = self.client.lock(self.path, timeout=self.ttl_s)
            if deadline is not None and time.monotonic() >= deadline:
                return None
            pause = lock.sleep if deadline is None else min(lock.sleep, max(0.0, deadline - time.monotonic()))
            time.sleep(pause)
        timer = threading.Timer(max(0.0, until - time.monotonic()), self.expired, args=(lock,))
        timer.daemon = True
        with self.mu:
            self.lock, self.lease, self.last_loss = lock, timer, ""
        timer.start()
        return zlcworker.Acquired(lock={"keys": [self.path], "value": lock.local.token.decode()})

    def expired(self, lock):
        with self.mu:
            if self.lock is not lock:
                return
            self.lock, self.lease = None, None
            self.last_loss = "its TTL ran out"
        self.events.lost("the lock's TTL ran out since before the acquire (redis-py does not renew it)")

    def release(self):
        with self.mu:
            lock, timer = self.lock, self.lease
            self.lock, self.lease = None, None
        if timer is not None:
            timer.cancel()
        if lock is None:
            raise zlcworker.NotHeld(self.last_loss or "nothing held")
        try:
            lock.release()
        except LockNotOwnedError as e:
            raise zlcworker.NotHeld(str(e))
        except LockError as e:
            raise zlcworker.NotHeld(str(e))

    def close(self):
        if self.client is not None:
            self.client.close()


if __name__ == "__main__":
    zlcworker.main(RECIPES, RedisPyLock)
