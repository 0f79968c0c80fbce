"""Python etcd3's Lock (python-etcd3) as a zlockcheck worker, on the protocol of zlcworker.py.

Usage: VENV/bin/python etcd3_worker.py etcd-python-lock

etcd3 (pinned in requirements.txt, built from its sdist: PyPI has no wheel of 0.12.0;
tenacity 6.3.1 and protobuf 3.20.3 pinned for it, see there) is used as its
documentation tells users to: one ``etcd3.client(host, port)`` per process, and for
each hold ``client.lock(name, ttl=TTL)``, ``lock.acquire(timeout=T)`` and
``lock.release()``, with ``lock.refresh()`` while holding (the Lock's docstring: "the
lock will be released after this time elapses, unless refreshed"). The TTL is init's
session_timeout_ms in whole seconds (at least 1). One option is set: the client's
``timeout`` (a deadline on every call), the TTL: without one a call to a paused
member waits for ever, and so would the acquire.

The client talks to one member (etcd3 0.12's client takes one host): the worker's
number modulo the members init names, so that the workers spread over the cluster as
a fleet configured with "its" member does. A member that is down or cut off from the
quorum leaves its workers without a lock service until it is back.

What the library does (etcd3/locks.py):

- The key is ``/locks/`` and the lock's name (``Lock.lock_prefix``): the worker
  names the lock init's path without its leading slash and ``/lock``, so that its key
  is ``/locks`` + PATH + ``/lock``; the acquire names it as the lock's place, and the
  harness reads it there (keys a place names outside the lock's prefix).
- acquire: each try grants a new lease of the TTL (never kept alive by the library),
  then one transaction: if the key's create revision is 0, put it (a uuid of the
  Lock) on that lease, else read it. A refused try drops its lease without revoking
  it (it lives a TTL, with no key), watches the key until its next event (any put or
  delete, or the time left) and tries again: tenacity's stop_after_delay(T) ends the
  tries once T has passed since the first (checked after a try, so an acquire can
  outlast T by a try). False: fail "timeout". An error of a call (a lease grant, the
  transaction, the watch) propagates out of ``acquire``: when it was the transaction,
  its put may have been applied with the reply lost, and the key would hold the lock
  for a TTL. The worker then calls ``release()`` (a compare on the uuid and a delete:
  it removes the key only if it is this Lock's) and goes on trying, with a new Lock,
  until T; when that release fails too, it answers info (the key is left to its TTL).
  A watch stream that breaks during the wait raises AttributeError (the library
  takes the stream's error for a response); once the client has watched, its watch
  thread reopens the stream with no backoff while its member is down (a core's worth
  of CPU for as long).
- release: one transaction, delete the key if its value is the Lock's uuid. False (the
  key is gone: the lease expired or was revoked, or holds another's uuid) answers fail
  "not held"; an error, info. The lease is not revoked: it outlives the key by up to a
  TTL.
- refresh: one keep-alive of the Lock's lease (a LeaseKeepAlive stream that sends
  one request). The worker refreshes every third of the TTL while it holds.

What the library tells a holder: nothing by itself (no keep-alive, no callback). A
refresh answers the lease's remaining TTL, 0 when the members expired or revoked it:
the worker reports "lost" then. A refresh that fails (a member down, paused, or cut
off from the quorum) tells nothing, and the worker goes on holding: a holder whose
member cannot renew its lease is not told when the lease expires and the lock goes to
another, until a refresh reaches a member again or its release finds the key gone.
The acquire says where the lock lives: the key and the lease (the session, ``0x`` and
hex: also reported as a session event), and reads the key back once for its create
revision, the token (omitted when that read fails or finds the key not its own).
"""

import logging
import threading
import time

import etcd3

import zlcworker

RECIPES = ("etcd-python-lock",)

log = logging.getLogger("zlc.etcd-python-lock")


class EtcdPythonLock:
    def __init__(self):
        self.client = None
        self.lock = None  # the Lock held, or None
        self.stop = None  # set to end the held Lock's refreshes
        self.last_loss = ""  # why the last hold ended without a release
        self.mu = threading.Lock()

    def init(self, init, events):
        if init.kind != "mutex":
            raise zlcworker.Refused("etcd-python-lock speaks the mutex workload, not %s" % init.kind)
        if init.permits > 1:
            raise zlcworker.Refused("etcd-python-lock: a mutex has one permit, got permits %d" % init.permits)
        if init.fenced:
            raise zlcworker.Refused("etcd-python-lock does not fence its writes")
        addrs = []
        for a in init.connect:
            host, sep, port = a.rpartition(":")
            if not sep or not host or not port.isdigit():
                raise zlcworker.Refused("init: connect %r is not host:port" % a)
            addrs.append((host, int(port)))
        self.events = events
        self.ttl = max(1, init.session_timeout_ms // 1000)
        self.name = init.path.strip("/") + "/lock"
        self.key = etcd3.locks.Lock.lock_prefix + self.name
        host, port = addrs[init.worker % len(addrs)]
        self.client = etcd3.client(host=host, port=port, timeout=self.ttl)
        # The member answers (a read of the lock's key), or init fails and is sent again.
        self.client.get(self.key)

    def acquire(self, timeout_ms, mode):
        deadline = time.monotonic() + timeout_ms / 1000 if timeout_ms > 0 else None
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            lock = self.client.lock(self.name, ttl=self.ttl)
            try:
                if not lock.acquire(timeout=left):
                    return None
                break
            except Exception as e:
                # The transaction's put may have been applied: remove the key if it is
                # this Lock's (it is on a lease no one keeps alive: else it holds for a TTL).
                log.info("acquire: %r; releasing", e)
                try:
                    lock.release()
                except Exception as e2:
                    raise zlcworker.Unknown("acquire: %r; its release failed too (%r): its key may live for a TTL" % (e, e2))
                if deadline is not None and time.monotonic() >= deadline:
                    return None
                time.sleep(0.1)
        session = "0x%x" % lock.lease.id
        stop = threading.Event()
        with self.mu:
            self.lock, self.stop, self.last_loss = lock, stop, ""
        self.events.session(session)
        threading.Thread(target=self.refresh, args=(lock, stop), name="zlc-refresh", daemon=True).start()
        place = {"session": session, "keys": [self.key]}
        token = None
        try:
            value, meta = self.client.get(self.key)
            if value == lock.uuid and meta.lease_id == lock.lease.id:
                token = meta.create_revision
        except Exception as e:
            log.info("reading the key's create revision: %r", e)
        return zlcworker.Acquired(token=token, lock=place)

    def refresh(self, lock, stop):
        """Refreshes the held Lock's lease every third of its TTL until stop; reports
        lost when a refresh answers TTL 0."""
        while not stop.wait(self.ttl / 3):
            try:
                answers = lock.refresh()
            except Exception as e:
                log.info("refresh: %r", e)
                continue
            if answers and answers[0].TTL <= 0:
                with self.mu:
                    if self.lock is not lock:
                        return
                    self.lock, self.stop = None, None
                    self.last_loss = "a refresh of its lease 0x%x answered TTL 0" % lock.lease.id
                stop.set()
                self.events.lost("the lock's lease 0x%x: a refresh answered TTL 0 (expired or revoked)" % lock.lease.id)
                return

    def release(self):
        with self.mu:
            lock, stop = self.lock, self.stop
            self.lock, self.stop = None, None
            if lock is None:
                raise zlcworker.NotHeld(self.last_loss or "nothing held")
        stop.set()
        try:
            released = lock.release()
        except Exception as e:
            raise zlcworker.Unknown("release: %r" % e)
        if not released:
            raise zlcworker.NotHeld("release: the key %s is not this Lock's (its lease expired or was revoked)" % self.key)

    def close(self):
        with self.mu:
            if self.stop is not None:
                self.stop.set()
        if self.client is not None:
            self.client.close()


if __name__ == "__main__":
    zlcworker.main(RECIPES, EtcdPythonLock)
