#!/bin/sh
# Example nightly CI job (any CI that runs a shell as root on Debian bookworm):
# set up, explore every recipe, keep the failing runs as artifacts, fail the job on any
# invalid or broken run. The failing run directories are enough to reproduce:
#   zlockcheck replay store/nightly/<test>/<timestamp>
set -u
cd "$(dirname "$0")/.."
make build                                  # installs ZooKeeper, Curator, Kazoo, a JDK
./bin/zlockcheck cleanup                    # leftovers of a killed earlier job
./bin/zlockcheck explore -f examples/nightly.yaml --json > nightly-results.json
code=$?
./bin/zlockcheck cleanup
# Artifacts: store/nightly (only failing runs are kept: --keep failed in the file),
# nightly-results.json (every run's verdict and directory).
tar czf nightly-store.tar.gz store/nightly nightly-results.json 2>/dev/null || true
exit $code
