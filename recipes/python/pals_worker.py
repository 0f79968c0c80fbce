"""pals's PostgreSQL advisory locks as a zlockcheck worker, on the protocol of zlcworker.py.

Usage: VENV/bin/python pals_worker.py pals-lock

pals (pinned in requirements.txt, over SQLAlchemy's engine with psycopg2, the driver
SQLAlchemy picks for a postgresql:// URL) is used as its documentation tells users
to: one ``pals.Locker(app_name, db_url)`` per process (an app-level lock factory that
owns the engine and so its connection pool, SQLAlchemy's defaults: 5 connections
kept, no pre-ping), and a lock as ``locker.lock(name)``, a new Lock object for every
hold:

- acquire: ``lock.acquire(blocking=True, acquire_timeout=T)``: the Lock checks a
  connection out of the pool (its session holds the lock), sets the session's
  ``lock_timeout`` to T ms and runs ``pg_advisory_lock(key)``, the key the first 8
  bytes of SHA-1 of ``zlc.NAME``. False (the lock timeout) is fail "timeout". T = 0
  (no limit) asks for PostgreSQL's longest lock_timeout: pals takes 0 as its own
  default of 30 s. In the rwlock workload a read is ``locker.lock(name,
  shared=True)``: ``pg_advisory_lock_shared``.
- release: ``lock.release()``: ``pg_advisory_unlock(key)`` on the Lock's connection,
  which goes back to the pool (whose check-in runs ``pg_advisory_unlock_all()``).
  False (the session held no such lock) answers fail "not held"; an error (the
  connection broke) answers info: whether the server has ended the session, and
  freed the lock with it, is unknown.

What pals tells a holder: nothing. The lock lives as long as the Lock's session; when
the server ends it (a restart, ``pg_terminate_backend``, a network cut that outlasts
TCP's patience), the lock is free for others and the holder learns only at its next
statement, its release. pals has no heartbeat and no callback, so the worker reports
no "lost". The key is no fencing token, so an acquire carries none; it says where the
lock lives: the session (the backend's pid) and the advisory key.
"""

import pals

import zlcworker

RECIPES = ("pals-lock",)

# PostgreSQL's largest lock_timeout (an int of milliseconds): "no limit".
NO_LIMIT_MS = 2**31 - 1


def sqlalchemy_url(connect):
    """init's libpq URL (its hosts split at commas) as SQLAlchemy's URL for psycopg2.

    One host stays in the URL; several become ``host=`` parameters, SQLAlchemy's
    spelling of libpq's host list. A bare host:port list is refused.
    """
    url = ",".join(connect)
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("postgres", "postgresql"):
        raise zlcworker.Refused("init: connect %r is not a postgres:// URL" % url)
    rest, _, query = rest.partition("?")
    netloc, slash, db = rest.partition("/")
    user, at, hosts = netloc.rpartition("@")
    if "," in hosts:
        query = "&".join(["host=" + h for h in hosts.split(",")] + ([query] if query else []))
        hosts = ""
    return "postgresql+psycopg2://" + user + at + hosts + slash + db + ("?" + query if query else "")


class PalsLock:
    def __init__(self):
        self.locker = None
        self.locks = []  # the holds, innermost last
        self.path = ""
        self.rw = False

    def init(self, init, events):
        if init.kind not in ("mutex", "rwlock"):
            raise zlcworker.Refused("pals-lock speaks the mutex and rwlock workloads, not %s" % init.kind)
        if init.fenced:
            raise zlcworker.Refused("pals-lock cannot fence: an advisory lock has no token")
        self.locker = pals.Locker("zlc", sqlalchemy_url(init.connect))
        # A server that is not there yet raises here (info: the harness tries again).
        with self.locker.engine.connect():
            pass
        self.path = init.path
        self.rw = init.kind == "rwlock"

    def acquire(self, timeout_ms, mode):
        lock = self.locker.lock(self.path, shared=mode == "read")
        try:
            ok = lock.acquire(blocking=True, acquire_timeout=timeout_ms or NO_LIMIT_MS)
        except BaseException:
            self.discard(lock)
            raise
        if not ok:
            self.discard(lock)
            return None
        self.locks.append(lock)
        pid = lock.conn.connection.dbapi_connection.info.backend_pid
        return zlcworker.Acquired(lock={"session": hex(pid), "advisory": [lock.lock_num]})

    @staticmethod
    def discard(lock):
        """Gives a Lock that holds nothing its connection back (pals leaves it checked out)."""
        try:
            if lock.conn is not None:
                lock.conn.close()
                lock.conn = None
        except Exception:
            pass

    def release(self):
        if not self.locks:
            raise zlcworker.NotHeld("nothing held")
        lock = self.locks.pop()
        try:
            released = lock.release()
        except Exception as e:
            raise zlcworker.Unknown("release: %s" % str(e).splitlines()[0])
        if not released:
            raise zlcworker.NotHeld("pg_advisory_unlock: this session held no such lock")

    def close(self):
        if self.locker is not None:
            self.locker.engine.dispose()


if __name__ == "__main__":
    zlcworker.main(RECIPES, PalsLock)
