#!/bin/sh
# Compiles the Curator worker with plain javac against Debian's jars (or those of
# lib/ beside this script: see classpath.sh). Its sources are ZlcCuratorWorker.java and
# ZlcWorker.java, the worker protocol every JVM worker shares: in the checkout they are
# in recipes/jvm; where zlockcheck unpacks the worker, beside this script.
#
#   recipes/curator/build.sh [OUTDIR]   OUTDIR defaults to build/curator under the
#                                       repository root
#
# OUTDIR receives the classes (what classpath.sh puts on the classpath) and, for a
# faster start, zlc-curator.jar plus zlc-curator.jsa, a class-data-sharing archive of
# the classes a worker loads, made by cds.sh (see there). run.sh uses the two when they
# are there; a JVM that cannot use the archive (another JDK build, changed jars) just
# starts without it. ZLC_NO_CDS=1 skips them.
#
# Then run a worker with recipes/curator/run.sh OUTDIR RECIPE (see classpath.sh for the
# java command line and its flags).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/curator}
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
src=$here
[ -f "$src/ZlcCuratorWorker.java" ] || src=$(cd "$here/../jvm" && pwd)
cp=$("$here/classpath.sh" "$out")
mkdir -p "$out"
rm -f "$out"/ZlcCuratorWorker*.class "$out"/ZlcWorker*.class "$out/zlc-curator.jar" "$out/zlc-curator.jsa"
# --release 17: the class files run on any JRE >= 17 (Debian bookworm's default).
# -sourcepath/-implicit:none: compile these files only, never a source that some jar
# on the classpath happens to carry. -classfile: ZooKeeper 3.9's jars name annotation
# classes (SpotBugs') they do not ship, a warning about their jars, not this code.
javac --release 17 -sourcepath "$src" -implicit:none -Xlint:all,-serial,-processing,-path,-classfile -Werror \
	-encoding UTF-8 -cp "$cp" -d "$out" "$src/ZlcWorker.java" "$src/ZlcCuratorWorker.java"
echo "built $out/ZlcCuratorWorker.class" >&2

if [ "${ZLC_NO_CDS:-}" != 1 ]; then
	"$here/cds.sh" "$out"
fi
