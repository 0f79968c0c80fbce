"""An example zlockcheck worker: redis-py's Lock, on one Redis instance.

    zlockcheck conformance --service redis \
        --worker-cmd "build/examples-venv/bin/python examples/workers/redis_lock.py"
    zlockcheck run --service redis --recipe exec \
        --worker-cmd "build/examples-venv/bin/python examples/workers/redis_lock.py"

The lock is ``redis.Redis.lock(name, timeout=TTL)`` as redis-py's documentation has
it: ``SET name token NX PX ttl`` to take it, a Lua compare-and-delete to release it.
Its TTL is init's ``session_timeout_ms``. redis-py gives a holder no callback when
its lease ends; what it gives is the TTL it set, so the worker reports ``lost`` when
that validity runs out while it still holds (timed from before the SET that took the
lock), and ``lock.owned()`` is what a caller could ask. Acquires poll with
``acquire(blocking=False)``, so that the validity starts at the attempt that won.

The key is the lock's name under an application's prefix (``KEY_PREFIX``), as
applications keep their keys; the acquire says where the lock lives: the key, the
token written, and the connection (``single_connection_client``), whose ``CLIENT
ID`` is the session the worker reports. zlockcheck reads that key, not its own
layout, for the orphan watch and the final phase's listing.
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
        # Bounded requests: a server that stopped answering gives an error (info), not a
        # worker that hangs for ever (redis-py's default has no socket timeout).
        # A password comes from REDISCLI_AUTH (redis-cli's variable; zlockcheck passes
        # its environment on), as an application would read it from its own.
        self.client = redis.Redis(host=host, port=int(port), single_connection_client=True,
                                  password=os.environ.get("REDISCLI_AUTH") or None,
                                  socket_timeout=self.ttl, socket_connect_timeout=self.ttl)
        self.lock = self.client.lock(KEY_PREFIX + init["path"], timeout=self.ttl, thread_local=False)
        self.session = None
        self.mu = threading.Lock()  # guards timer: the validity watch's, or None
        self.timer = None
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
        self.watch_validity(start + self.ttl)
        try:
            self.report_session()
        except redis.RedisError as e:
            raise zlcworker.Unknown(e)
        return {"session": hex(self.session), "keys": [self.lock.name], "value": self.lock.local.token.decode()}

    def watch_validity(self, until):
        """Report lost at until (monotonic) unless released first."""
        def expired():
            with self.mu:
                if self.timer is timer:
                    self.timer = None
                    self.events.lost("the lock's TTL ran out while held")
        timer = threading.Timer(max(0.0, until - time.monotonic()), expired)
        timer.daemon = True
        with self.mu:
            self.timer = timer
        timer.start()

    def release(self):
        with self.mu:
            timer, self.timer = self.timer, None
        if timer is None:
            raise zlcworker.NotHeld("not held: its TTL ran out")
        timer.cancel()
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
            timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
        self.client.close()


if __name__ == "__main__":
    sys.exit(zlcworker.serve(RedisLock()))
