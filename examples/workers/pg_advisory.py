"""An example zlockcheck worker: a PostgreSQL advisory lock with psycopg 3.

    zlockcheck conformance --service postgres \
        --worker-cmd "build/examples-venv/bin/python examples/workers/pg_advisory.py"
    zlockcheck run --service postgres --recipe exec \
        --worker-cmd "build/examples-venv/bin/python examples/workers/pg_advisory.py"

``pg_advisory_lock(key)`` on one dedicated connection (autocommit), the acquire's
timeout as ``lock_timeout``, ``pg_advisory_unlock(key)`` to release. The key is the
lock's name (init's ``path``) hashed to a bigint (FNV-1a, 64 bits). The lock goes with
the connection, so the worker watches it: a ``SELECT 1`` every third of
``session_timeout_ms`` while it holds, and ``lost`` when that fails (the server ended
the session, or the connection broke). The session is the connection's backend pid;
the acquire says where the lock lives: that session and the advisory key.

init's ``connect`` is one libpq URL, whose hosts (a primary, a standby) are separated
by commas: it goes to psycopg whole, with ``target_session_attrs=read-write`` so that a
new connection after a failover finds the primary, and ``tcp_user_timeout`` so that no
request waits on a silent connection for longer than the timeout.
"""

import sys
import threading

import psycopg
from psycopg import errors

import zlcworker


def advisory_key(name):
    """FNV-1a (64 bits) of name, as a signed bigint."""
    h = 0xCBF29CE484222325
    for b in name.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h - (1 << 64) if h >= 1 << 63 else h


class PgAdvisoryLock:
    def open(self, init, events):
        self.events = events
        self.timeout_s = init["session_timeout_ms"] / 1000
        # A request on a connection whose packets go unanswered (a partition, a
        # paused server) fails after the timeout instead of hanging (tcp_user_timeout).
        self.url = init["connect"]
        for param in ("target_session_attrs=read-write", "tcp_user_timeout=%d" % init["session_timeout_ms"]):
            if param.split("=")[0] + "=" not in self.url:
                self.url += ("&" if "?" in self.url else "?") + param
        self.key = advisory_key(init["path"])
        self.mu = threading.Lock()  # guards holding
        self.holding = False
        self.stop = threading.Event()
        self.conn = None
        self.connect()
        threading.Thread(target=self.heartbeat, daemon=True).start()

    def connect(self):
        """A new dedicated connection, reported as a new session."""
        if self.conn is not None:
            self.conn.close()
        self.conn = psycopg.connect(self.url, autocommit=True, connect_timeout=max(1, int(self.timeout_s)))
        self.pid = self.conn.execute("SELECT pg_backend_pid()").fetchone()[0]
        self.events.session(self.pid)

    def acquire(self, timeout_s):
        try:
            if self.conn.closed or self.conn.broken:
                self.connect()
            ms = 0 if timeout_s is None else max(1, int(timeout_s * 1000))
            self.conn.execute("SELECT set_config('lock_timeout', %s, false)", (str(ms),))
            self.conn.execute("SELECT pg_advisory_lock(%s)", (self.key,))
        except errors.LockNotAvailable:
            raise zlcworker.TimedOut()
        except psycopg.Error as e:
            raise zlcworker.Unknown(e)
        with self.mu:
            self.holding = True
        return {"session": hex(self.pid), "advisory": [self.key]}

    def release(self):
        with self.mu:
            held, self.holding = self.holding, False
        if not held:
            raise zlcworker.NotHeld("not held: its session was lost")
        try:
            freed = self.conn.execute("SELECT pg_advisory_unlock(%s)", (self.key,)).fetchone()[0]
        except psycopg.Error as e:
            raise zlcworker.Unknown(e)
        if not freed:
            raise zlcworker.NotHeld("pg_advisory_unlock: not held by this session")

    def heartbeat(self):
        """While holding, ping every third of the timeout; a failed ping is lost."""
        while not self.stop.wait(self.timeout_s / 3):
            with self.mu:
                if not self.holding:
                    continue
                try:
                    self.conn.execute("SELECT 1")
                except psycopg.Error as e:
                    self.holding = False
                    self.events.lost("the connection that holds the lock failed: %s" % e)

    def close(self):
        self.stop.set()
        if self.conn is not None:
            self.conn.close()


if __name__ == "__main__":
    sys.exit(zlcworker.serve(PgAdvisoryLock()))
