"""An example zlockcheck worker: redis-py's Lock, on one Redis instance.

    zlockcheck conformance --service redis \
        --worker-cmd "build/examples-venv/bin/python examples/workers/redis_lock.py"
    zlockcheck run --service redis --recipe exec \
        --worker-cmd "build/examples-venv/bin/python examples/workers/redis_lock.py"

The lock is ``redis.Redis.lock(name, timeout=TTL)`` as redis-py's documentation has
it: ``SET name token NX PX ttl`` to take it, a Lua compare-and-delete to release it.
Its TTL is init's ``session_timeout_ms``. A holder keeps it with ``lock.reacquire()``
(the TTL set again, only while the key holds its token) every third of the TTL, as a
watchdog does, so that a hold may outlast one TTL. redis-py tells a holder nothing
when its lease ends; the worker reports ``lost`` when a renewal finds the key gone or
another's (``LockNotOwnedError``), or when no renewal got through within the TTL
(timed from before the SET or the renewal that last set it). Acquires poll with
``acquire(blocking=False)``, so that the validity starts at the attempt that won.

The key is the lock's name under an application's prefix (``KEY_PREFIX``), as
applications keep their keys; the acquire says where the lock lives: the key, the
token written, and the connection (``single_connection_client``, which redis-py
guards with a lock, so the renewal thread shares it), whose ``CLIENT ID`` is the
session the worker reports. zlockcheck reads that key, not its own layout, for the
orphan watch and the final phase's listing.
"""

import os
import sys
import threading
import time

import redis
from redis.exceptions import LockError, LockNotOwnedError

import zlcworker

# Polling interval of a waiting acquire.
POLL_S = 0.01

# The application's key prefix: the lock's name follows it.
KEY_PREFIX = "example:lock:"


class RedisLock:
    def open(self, init, events):
        self.events = events
        # connect is host:port,...: the first instance is the one to lock on.
        host, port = init["connect"].split(",")[0].rsplit(":", 1)
        self.ttl = init["session_timeout_ms"] / 1000
        # Bounded requests (a third of the TTL): a server that stopped answering gives an
        # error, not a worker that hangs for ever (redis-py's default has no timeout).
        # A password comes from REDISCLI_AUTH (redis-cli's variable; zlockcheck passes
        # its environment on), as an application would read it from its own.
        self.client = redis.Redis(host=host, port=int(port), single_connection_client=True,
                                  password=os.environ.get("REDISCLI_AUTH") or None,
                                  socket_timeout=self.ttl / 3, socket_connect_timeout=self.ttl / 3)
        self.lock = self.client.lock(KEY_PREFIX + init["path"], timeout=self.ttl, thread_local=False)
        self.session = None
        self.mu = threading.Lock()  # guards hold
        self.hold = None  # the current hold's stop event (its renewal thread's), or None
        self.report_session()

    def report_session(self):
        """Report the connection's CLIENT ID when it is a new one (a reconnect)."""
        session = self.client.client_id()
        if session != self.session:
            self.session = session
            self.events.session(session)

    def acquire(self, timeout_s):
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            start = time.monotonic()
            try:
                taken = self.lock.acquire(blocking=False)
            except redis.RedisError as e:
                raise zlcworker.Unknown(e)
            if taken:
                break
            if deadline is not None and time.monotonic() >= deadline:
                raise zlcworker.TimedOut()
            time.sleep(POLL_S)
        self.start_hold(start + self.ttl)
        try:
            self.report_session()
        except redis.RedisError as e:
            raise zlcworker.Unknown(e)
        return {"session": hex(self.session), "keys": [self.lock.name], "value": self.lock.local.token.decode()}

    def start_hold(self, until):
        """Start the hold's renewal thread; the lock is valid until until (monotonic)."""
        stop = threading.Event()
        with self.mu:
            self.hold = stop
        threading.Thread(target=self.renew, args=(stop, until), daemon=True).start()

    def renew(self, stop, until):
        """Renew every third of the TTL until stop is set; report lost when it fails."""
        while not stop.wait(max(0.0, min(self.ttl / 3, until - time.monotonic()))):
            if time.monotonic() >= until:
                return self.lose(stop, "its TTL ran out while held: no renewal got through")
            begun = time.monotonic()
            try:
                self.lock.reacquire()
            except LockNotOwnedError:
                return self.lose(stop, "the lock's key is gone or holds another's token")
            except redis.RedisError:
                continue  # try again at the next third; the validity decides
            until = begun + self.ttl
            with self.mu:
                held = self.hold is stop
            if held:  # not released meanwhile; the event is written outside the lock
                self.events.renewed()

    def lose(self, stop, why):
        with self.mu:
            if self.hold is not stop:
                return  # released meanwhile
            self.hold = None
        self.events.lost(why)

    def release(self):
        with self.mu:
            stop, self.hold = self.hold, None
        if stop is None:
            raise zlcworker.NotHeld("not held: it was lost")
        stop.set()
        try:
            self.lock.release()
        except LockNotOwnedError as e:
            raise zlcworker.NotHeld("not held: %s" % e)
        except LockError as e:
            raise zlcworker.NotHeld(str(e))
        except redis.RedisError as e:
            raise zlcworker.Unknown(e)

    def close(self):
        with self.mu:
            stop, self.hold = self.hold, None
        if stop is not None:
            stop.set()
        self.client.close()


if __name__ == "__main__":
    sys.exit(zlcworker.serve(RedisLock()))
