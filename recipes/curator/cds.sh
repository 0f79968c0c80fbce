#!/bin/sh
# Makes the Curator worker's class-data-sharing archive, for a faster start:
#
#   recipes/curator/cds.sh OUTDIR     OUTDIR holds the classes build.sh compiled
#
# It packs the classes into OUTDIR/zlc-curator.jar and records OUTDIR/zlc-curator.jsa,
# an archive of the classes a worker loads, by one training run that inits against
# 127.0.0.1:1, where nothing listens, and exits. run.sh uses the two when both are
# there. The archive names the jar by its absolute path, so OUTDIR must not move
# afterwards (zlockcheck runs this only once its worker cache directory is in place).
# Both files appear by rename, complete or not at all, so a run.sh that starts
# meanwhile sees either both or neither.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=$1
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
tmp=$out/.cds.$$
rm -rf "$tmp"
mkdir "$tmp"
trap 'rm -rf "$tmp"' EXIT
(cd "$out" && jar cf "$tmp/zlc-curator.jar" ZlcCuratorWorker*.class ZlcWorker*.class)
mv -f "$tmp/zlc-curator.jar" "$out/zlc-curator.jar"
jcp=$("$here/classpath.sh" "$out/zlc-curator.jar")
printf '%s\n' \
	'{"id":0,"op":"init","connect":"127.0.0.1:1","session_timeout_ms":200,"path":"/zlc/cds/l0","kind":"mutex","permits":1,"worker":0}' \
	'{"id":1,"op":"close"}' |
	java -XX:ArchiveClassesAtExit="$tmp/zlc-curator.jsa" -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
		-Xlog:disable -Xlog:all=warning:stderr -Dorg.slf4j.simpleLogger.defaultLogLevel=off \
		-cp "$jcp" ZlcCuratorWorker curator-mutex >/dev/null 2>"$tmp/cds-training.log" || true
if [ -s "$tmp/zlc-curator.jsa" ]; then
	mv -f "$tmp/zlc-curator.jsa" "$out/zlc-curator.jsa"
	rm -f "$out/cds-training.log"
	echo "built $out/zlc-curator.jar and its class-data-sharing archive zlc-curator.jsa" >&2
else
	mv -f "$tmp/cds-training.log" "$out/cds-training.log"
	rm -f "$out/zlc-curator.jar"
	echo "no class-data-sharing archive (see $out/cds-training.log); run.sh starts without one" >&2
fi
