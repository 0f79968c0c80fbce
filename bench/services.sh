#!/usr/bin/env bash
# ZooKeeper, Redis, database and etcd locks side by side (make bench-services, or
# bench/services.sh; issues 25, 26, 39 and 42; about 55 minutes for its 37 rows at 5 and 20 workers, estimated from 28 for 18): one run of TIME (default 20s) per service, recipe and
# worker count, 1 ms holds (--hold-max 1ms), no faults, no final phase, each with
# --baseline (after a 10 s warm-up of the plain loop, the plain client loop of that
# service on the same servers: go-zookeeper's zk.Lock loop on ZooKeeper, whatever the
# recipe; lockservice.Redis.PlainLoops on Redis, plain RedLock on the redlock
# topology; pg_advisory_lock / pg_advisory_unlock on PostgreSQL and GET_LOCK /
# RELEASE_LOCK on MariaDB, each goroutine its own connection, whatever the recipe).
# Rows: ZooKeeper (3 servers: Debian's 3.8.0) gozk, zlc-mutex, curator-mutex, kazoo-lock,
# curator-5.9-mutex, kazoo-2.11-lock; ZooKeeper 3.9.5 from Maven Central (--zk-version) gozk,
# curator-mutex, curator-5.9-mutex; Redis, one
# instance: redis-lock, redislock, redis-py-lock, python-redis-lock, redis-semaphore-mutex, redisson-lock, redisson-fenced, spring-redis-lock,
# spring-redis-lock-renewed; Redis behind Sentinel (a primary, 2 replicas, 3 sentinels) and
# Redis Cluster (3 primaries, a replica each): redis-lock, redislock; Redis, redlock
# topology (3 independent primaries): redsync,
# redisson-redlock, pottery-redlock, node-redlock; PostgreSQL, one primary: pg-table, pg-table-expiry,
# pg-advisory, pals-lock, spring-jdbc-postgres; MariaDB, one server: mariadb-getlock, spring-jdbc-mariadb (the mutex workload: the session locks' default is the
# reentrant one, whose nested acquires are no lock cycles); etcd, 3 members: etcd-mutex and
# etcd-mutex-validity and etcd-node-lock on Debian's 3.4.23, etcd-mutex on 3.6.16 (the plain loop:
# concurrency.Mutex's Lock / Unlock, each goroutine its own client and session); at 5 and 20 workers (WORKERS="5 20"; ONLY="gozk redsync" runs
# only those recipes).
# Prints one markdown table: harness steady cycles/s (results.json
# steady_cycles_per_second), the harness's acquire latency p50 and p99 (each acquire
# invoke paired with its ok completion by process, from history.jsonl; waiting for
# other holders included), the plain loop's cycles/s and acquire p50/p99
# (results.json baseline), their ratio, and the verdict. A run that fails prints its
# exit code and the last line it wrote to stderr in the verdict column.
# The whole benchmark runs under flock ZLC_LOCK (default /tmp/zlc-ensemble.lock: real
# servers, and other suites may share the machine); ZLC_LOCK= (empty) when the caller
# already holds it. Needs root, ZooKeeper, Curator, Kazoo, Redis, PostgreSQL and
# MariaDB (make setup).
set -euo pipefail
cd "$(dirname "$0")/.."
lock=${ZLC_LOCK-/tmp/zlc-ensemble.lock}
if [ -n "$lock" ] && [ -z "${ZLC_SERVICES_LOCKED:-}" ]; then
  exec env ZLC_SERVICES_LOCKED=1 flock "$lock" bash "$0" "$@"
fi
ZLC_LOCK= # every run below is already under the lock: common.sh's locked must not take it again
. bench/common.sh
time=${TIME:-20s}
cells=(
  "zookeeper (3 servers)|gozk|"
  "zookeeper (3 servers)|zlc-mutex|"
  "zookeeper (3 servers)|curator-mutex|"
  "zookeeper (3 servers)|kazoo-lock|"
  "zookeeper (3 servers)|curator-5.9-mutex|"
  "zookeeper (3 servers)|kazoo-2.11-lock|"
  "zookeeper 3.9.5 (3 servers)|gozk|--zk-version 3.9.5"
  "zookeeper 3.9.5 (3 servers)|curator-mutex|--zk-version 3.9.5"
  "zookeeper 3.9.5 (3 servers)|curator-5.9-mutex|--zk-version 3.9.5"
  "redis single|redis-lock|--service redis --redis-topology single"
  "redis single|redislock|--service redis --redis-topology single"
  "redis single|redis-py-lock|--service redis --redis-topology single"
  "redis single|redis-semaphore-mutex|--service redis --redis-topology single"
  "redis single|python-redis-lock|--service redis --redis-topology single"
  "redis single|redisson-lock|--service redis --redis-topology single"
  "redis single|redisson-fenced|--service redis --redis-topology single"
  "redis single|spring-redis-lock|--service redis --redis-topology single"
  "redis single|spring-redis-lock-renewed|--service redis --redis-topology single"
  "redis sentinel (primary, 2 replicas, 3 sentinels)|redis-lock|--service redis --redis-topology sentinel"
  "redis sentinel (primary, 2 replicas, 3 sentinels)|redislock|--service redis --redis-topology sentinel"
  "redis cluster (3 primaries, a replica each)|redis-lock|--service redis --redis-topology cluster"
  "redis cluster (3 primaries, a replica each)|redislock|--service redis --redis-topology cluster"
  "redis redlock (3 primaries)|redsync|--service redis --redis-topology redlock --nodes 3"
  "redis redlock (3 primaries)|redisson-redlock|--service redis --redis-topology redlock --nodes 3"
  "redis redlock (3 primaries)|pottery-redlock|--service redis --redis-topology redlock --nodes 3"
  "redis redlock (3 primaries)|node-redlock|--service redis --redis-topology redlock --nodes 3"
  "postgresql (primary)|pg-table|--service postgres"
  "postgresql (primary)|pg-table-expiry|--service postgres"
  "postgresql (primary)|pg-advisory|--service postgres --workload mutex"
  "postgresql (primary)|pals-lock|--service postgres --workload mutex"
  "postgresql (primary)|spring-jdbc-postgres|--service postgres"
  "mariadb (1 server)|mariadb-getlock|--service mariadb --workload mutex"
  "mariadb (1 server)|spring-jdbc-mariadb|--service mariadb"
  "etcd 3.4.23 (3 members)|etcd-mutex|"
  "etcd 3.4.23 (3 members)|etcd-mutex-validity|"
  "etcd 3.6.16 (3 members)|etcd-mutex|--etcd-version 3.6.16"
  "etcd 3.4.23 (3 members)|etcd-node-lock|"
)
echo "## ZooKeeper, Redis, database and etcd locks side by side ($(date -u '+%F %H:%M') UTC, $(nproc) cores, one run of $time each, --hold-max 1ms, --baseline)"
echo
printf '| service / topology | recipe | workers | harness cycles/s (steady) | harness acquire p50 (ms) | harness acquire p99 (ms) | plain loop cycles/s | plain acquire p50 (ms) | plain acquire p99 (ms) | harness / plain | verdict |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|\n'
n=0
for workers in ${WORKERS:-5 20}; do
  for cell in "${cells[@]}"; do
    IFS='|' read -r service recipe flags <<<"$cell"
    if [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $recipe "* ]]; then continue; fi
    n=$((n + 1))
    dir="$store/$n"
    rc=0
    # shellcheck disable=SC2086 # flags are words
    "$bin" run --quiet --json --recipe "$recipe" $flags --workers "$workers" --hold-max 1ms --time "$time" \
      --seed 1 --final-phase=false --baseline --store "$dir" >"$store/$n.out" 2>"$store/$n.err" || rc=$?
    python3 bench/services_row.py "$dir" "$rc" "$store/$n.err" "$service" "$recipe" "$workers"
  done
done
