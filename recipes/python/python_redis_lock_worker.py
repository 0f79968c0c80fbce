"""python-redis-lock's Lock with its auto-renewal thread, as a zlockcheck worker.

Usage: VENV/bin/python python_redis_lock_worker.py python-redis-lock

python-redis-lock (pinned in requirements.txt, over redis-py with the client's
defaults, as redis_py_worker.py says) is used as its documentation tells users to:
``redis_lock.Lock(client, name, expire=TTL, auto_renewal=True)``, a new Lock object
for every hold, ``acquire(blocking=True, timeout=T)`` and ``release()``.

- acquire: ``SET lock:NAME id NX EX ttl``; while it is taken, ``BLPOP
  lock-signal:NAME`` (a release pushes to it), then again. The library takes its
  timeout and its expiry in whole seconds (``int(timeout)``; a timeout that truncates
  to 0 would wait for ever), so the worker asks for the harness's timeout rounded up
  to whole seconds: an acquire may wait up to a second longer than asked. False is
  fail "timeout".
- auto_renewal: a thread renews the key (``EXPIRE`` if it is still this id's) every
  two thirds of the expiry.
- release: stops the renewal thread, then a Lua compare-and-delete that also signals
  the waiters. ``NotAcquired`` (the key is gone or another's) answers fail "not held".
- The TTL is init's ``session_timeout_ms`` rounded up to whole seconds.

What the library tells a holder: nothing. When a renewal finds the key gone or
another's, ``extend`` raises ``NotAcquired`` inside the renewal thread, which ends the
thread (Python prints the exception to stderr); nothing calls the holder, and the
lock object still believes it holds. The holder learns at ``release``, which raises
``NotAcquired``. So the worker reports no "lost" event: like Redisson's watchdog, the
lock keeps its holder in the dark. No token: the id is a random value.
"""

import math
import time

import redis_lock

import redisclient
import zlcworker

RECIPES = ("python-redis-lock",)


class PythonRedisLock:
    def __init__(self):
        self.client = None
        self.lock = None
        self.expire = 0
        self.path = ""

    def init(self, init, events):
        self.client = redisclient.mutex_client("python-redis-lock", init, "id")
        self.expire = max(1, math.ceil(init.session_timeout_ms / 1000))
        self.path = init.path

    def acquire(self, timeout_ms, mode):
        lock = redis_lock.Lock(self.client, self.path, expire=self.expire, auto_renewal=True)
        timeout = math.ceil(timeout_ms / 1000) if timeout_ms > 0 else None
        if not lock.acquire(blocking=True, timeout=timeout):
            return None
        self.lock = lock
        return zlcworker.Acquired(lock={"keys": [lock._name], "value": lock.id})

    def release(self):
        lock, self.lock = self.lock, None
        if lock is None:
            raise zlcworker.NotHeld("nothing held")
        began = time.monotonic()
        try:
            lock.release()
        except redis_lock.NotAcquired as e:
            if redisclient.released_by_resend(began, redisclient.resend_window(self.client)):
                raise redisclient.unknown_release(began, e)
            raise zlcworker.NotHeld(str(e))

    def close(self):
        if self.client is not None:
            self.client.close()


if __name__ == "__main__":
    zlcworker.main(RECIPES, PythonRedisLock)
