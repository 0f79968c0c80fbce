"""The Redis client of the Python workers' Redis locks, made as their users make it.

One place for what every Redis lock worker of recipes/python does at init: refuse
what a mutex without a token cannot run, and connect with redis-py's defaults to
init's first address (the only instance, or the primary of the replicas topology).
"""

import os

import redis

import zlcworker


def mutex_client(recipe, init, token):
    """The client of a mutex recipe whose lock value is token (what it says it is).

    Refuses another workload kind, fencing (a random value is no fencing token) and a
    connect that is not host:port. The password of a server the user runs comes from
    $REDISCLI_AUTH (zlockcheck run --connect), as for every Redis worker. A server
    that is not there yet raises (info: the harness tries again).
    """
    if init.kind != "mutex":
        raise zlcworker.Refused("%s speaks the mutex workload, not %s" % (recipe, init.kind))
    if init.fenced:
        raise zlcworker.Refused("%s cannot fence: its %s is a random value" % (recipe, token))
    host, _, port = init.connect[0].rpartition(":")
    if not host or not port.isdigit():
        raise zlcworker.Refused("init: connect %r is not host:port" % init.connect[0])
    client = redis.Redis(host=host, port=int(port), password=os.environ.get("REDISCLI_AUTH") or None)
    client.ping()
    return client
