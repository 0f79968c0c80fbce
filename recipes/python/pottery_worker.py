"""pottery's Redlock as a zlockcheck worker, on the protocol of zlcworker.py.

Usage: VENV/bin/python pottery_worker.py pottery-redlock

pottery (pinned in requirements.txt) is used as its documentation tells users to: one
``redis.Redis`` client per independent primary of the redlock topology (init's
connect lists them), each with redis-py's defaults (redisclient.py and
redis_py_worker.py say what those cost: a ``SET NX`` re-sent after a lost reply), and
the lock as ``Redlock(key=NAME, masters={...}, auto_release_time=TTL)`` with pottery's
other defaults (``raise_on_redis_errors=False``: a try that failed on too many
primaries is just a try that did not win):

- acquire: ``lock.acquire(blocking=False)``, one try: ``SET redlock:NAME uuid NX PX
  ttl`` on every primary at once, won on a majority within the lease less pottery's
  drift (1% + 2 ms) and the try's time; a try that lost releases what it set. The
  worker repeats it at pottery's own pace (a random pause of 0 to 0.2 s) until it
  wins or the timeout T has passed: pottery's ``acquire(timeout=T)`` loop, made by
  the worker so that the validity starts at the try that won (redisclient.Leased).
- release: ``lock.release()``, a Lua compare-and-delete on every primary.
  ``ReleaseUnlockedLock`` answers fail "not held" when every primary answered (none
  held this lock's uuid), info when some failed (what they held is unknown).
- The TTL is init's ``session_timeout_ms``. pottery renews nothing (``extend()`` is
  there for a caller that calls it, at most ``num_extensions`` = 3 times).

What pottery tells a holder: the lease it asked for, and ``locked()``, a query of
every primary for the key's remaining TTL, which the caller must think to call. The
worker reports "lost" when the lease's validity has run out (the TTL less pottery's
drift, from the moment before the try that won), unless it released first. The uuid
is no fencing token, so an acquire carries none; it says where the lock lives: the key
(``redlock:`` and the lock's name, the same on every primary) and the uuid written.
"""

import random

from pottery import Redlock, ReleaseUnlockedLock

import redisclient
import zlcworker

RECIPES = ("pottery-redlock",)


class PotteryRedlock(redisclient.Leased):
    name = "pottery"

    def __init__(self):
        super().__init__()
        self.clients = []

    def init(self, init, events):
        clients = redisclient.mutex_clients("pottery-redlock", init, "uuid")
        if len(clients) < 3:
            for c in clients:
                c.close()
            raise zlcworker.Refused(
                "pottery-redlock locks over 3 or more independent primaries; the run has %d "
                "(run it with --redis-topology redlock)" % len(clients))
        self.clients = clients
        self.start(init, events)
        self.resend_window = redisclient.resend_window(clients[0])

    def new_lock(self):
        return Redlock(key=self.path, masters=set(self.clients), auto_release_time=self.ttl_s)

    def try_acquire(self, lock):
        return lock.acquire(blocking=False)

    def pause(self, lock):
        return random.uniform(0, lock._RETRY_DELAY)

    def give_back(self, lock):
        try:
            lock.release()
        except ReleaseUnlockedLock:
            pass

    def unlock(self, lock):
        try:
            lock.release()
        except ReleaseUnlockedLock as e:
            if e.redis_errors:
                raise zlcworker.Unknown("release: %d primaries failed: %s" % (
                    len(list(e.redis_errors)), "; ".join(str(x) for x in e.redis_errors)))
            raise zlcworker.NotHeld("no majority held this lock's uuid")

    def place(self, lock):
        # The uuid pottery wrote is an attribute of its own (no accessor): read for the
        # record only.
        return {"keys": [lock.key], "value": lock._uuid}

    def close(self):
        for c in self.clients:
            c.close()


if __name__ == "__main__":
    zlcworker.main(RECIPES, PotteryRedlock)
