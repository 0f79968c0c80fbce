#!/bin/sh
# Runs one Curator worker (the worker protocol, v2 and v1, on stdin/stdout: ZlcWorker.java):
#
#   recipes/curator/run.sh OUTDIR RECIPE
#
# RECIPE is curator-mutex, curator-semaphore, curator-rwlock or curator-reentrant;
# OUTDIR is where build.sh put the worker. For the harness:
#
#   zlockcheck run --recipe exec --worker-cmd "$PWD/recipes/curator/run.sh $PWD/build/curator curator-mutex"
#
# It runs the java command line documented in classpath.sh; when build.sh made
# OUTDIR/zlc-curator.jar and its class-data-sharing archive zlc-curator.jsa, it runs
# the jar with the archive instead of the class directory (a faster start). Extra JVM
# options can be passed in ZLC_JAVA_OPTS.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: $0 OUTDIR RECIPE" >&2
	exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$1
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
cds=
if [ -f "$out/zlc-curator.jar" ] && [ -f "$out/zlc-curator.jsa" ] && [ "${ZLC_NO_CDS:-}" != 1 ]; then
	cp=$("$here/classpath.sh" "$out/zlc-curator.jar")
	cds=-XX:SharedArchiveFile=$out/zlc-curator.jsa
else
	cp=$("$here/classpath.sh" "$out")
fi
# shellcheck disable=SC2086
exec java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k -Xmx128m \
	-XX:+DisplayVMOutputToStderr -Xlog:disable -Xlog:all=warning:stderr $cds ${ZLC_JAVA_OPTS:-} \
	-cp "$cp" ZlcCuratorWorker "$2"
