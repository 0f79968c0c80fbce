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

from redis.exceptions import LockError

import redisclient
import zlcworker

RECIPES = ("redis-py-lock",)


class RedisPyLock(redisclient.Leased):
    name = "redis-py"

    def __init__(self):
        super().__init__()
        self.client = None

    def init(self, init, events):
        self.client = redisclient.mutex_client("redis-py-lock", init, "token")
        self.start(init, events)
        self.resend_window = redisclient.resend_window(self.client)

    def new_lock(self):
        return self.client.lock(self.path, timeout=self.ttl_s)

    def try_acquire(self, lock):
        return lock.acquire(blocking=False)

    def pause(self, lock):
        return lock.sleep

    def give_back(self, lock):
        try:
            lock.release()
        except LockError:
            pass

    def unlock(self, lock):
        try:
            lock.release()
        except LockError as e:  # LockNotOwnedError among them
            raise zlcworker.NotHeld(str(e))

    def place(self, lock):
        return {"keys": [self.path], "value": lock.local.token.decode()}

    def close(self):
        if self.client is not None:
            self.client.close()


if __name__ == "__main__":
    zlcworker.main(RECIPES, RedisPyLock)
