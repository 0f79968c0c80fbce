#!/bin/sh
# Prints the runtime classpath of the Curator worker: Debian's Curator, ZooKeeper,
# Guava and slf4j jars (slf4j-simple logs to stderr), then OUTDIR, where build.sh put
# ZlcCuratorWorker.class. When the scripts' directory has a lib/ (another Curator
# release from Maven Central, with its own ZooKeeper client, Guava and slf4j: package
# recipes links it there, see recipes/jvm/pom.xml), its jars take the place of
# Debian's.
#
#   recipes/curator/classpath.sh [OUTDIR]     OUTDIR defaults to build/curator under
#                                             the repository root
#
# Run a worker:
#
#   java -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k -Xmx128m \
#        -XX:+DisplayVMOutputToStderr -Xlog:disable -Xlog:all=warning:stderr \
#        -cp "$(recipes/curator/classpath.sh build/curator)" ZlcCuratorWorker curator-mutex
#
# (recipes/curator/run.sh OUTDIR RECIPE runs exactly that, plus a class-data-sharing
# archive when build.sh made one.) The flags, all for start-up time and footprint since
# many workers start at once:
#   -XX:+UseSerialGC             the cheapest collector to start; one small client
#   -XX:TieredStopAtLevel=1      C1 only: less JIT work at start, fine for an I/O-bound client
#   -Xss512k -Xmx128m            small thread stacks and heap; plenty for one session
# and two that keep stdout clean for the protocol:
#   -XX:+DisplayVMOutputToStderr what the JVM prints itself (e.g. thread dumps) goes to stderr
#   -Xlog:disable -Xlog:all=warning:stderr
#                                unified-logging warnings (CDS, GC) go to stderr, not stdout
# The worker itself points System.out at stderr, logs through slf4j-simple to stderr,
# and writes protocol lines through its own handle on fd 1.
#
# The Curator worker needs: libcurator-recipes-java libcurator-framework-java
# libcurator-client-java libzookeeper-java libguava-java libslf4j-java.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/curator}
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
if [ -d "$here/lib" ]; then
	cp=
	for jar in "$here"/lib/*.jar; do
		cp=$cp$jar:
	done
	printf '%s\n' "$cp$out"
	exit 0
fi
j=${ZLC_JAVA_DIR:-/usr/share/java}
cp=
for jar in curator-recipes curator-framework curator-client zookeeper zookeeper-jute guava slf4j-api slf4j-simple; do
	if [ ! -f "$j/$jar.jar" ]; then
		echo "classpath.sh: $j/$jar.jar is missing (apt-get install libcurator-recipes-java libslf4j-java)" >&2
		exit 1
	fi
	cp=$cp$j/$jar.jar:
done
printf '%s\n' "$cp$out"
