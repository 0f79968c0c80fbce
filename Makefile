# zlockcheck: `make run` runs a default chaos run on a local ensemble, `make test` runs
# the tests. Both install what is missing first (Debian packages, Go modules).

GO        ?= go
BIN       := bin/zlockcheck
APT_PKGS  := zookeeper libslf4j-java default-jdk-headless maven libcurator-recipes-java python3 python3-kazoo python3-venv chromium \
             iproute2 nftables iptables procps time openssh-server redis-server redis-tools redis-sentinel postgresql mariadb-server etcd-server
RUN_FLAGS ?= --nemesis kill,pause,partition --nemesis-interval 5s

# `zlockcheck fetch` (in setup) fetches from Maven Central, into the cache
# ($ZLC_CACHE_DIR or ~/.cache/zlockcheck), the ZooKeeper releases --zk-version takes
# (lockservice/zookeeper/releases/pom.xml) and the Java workers' libraries
# (recipes/jvm/pom.xml), each once: a second setup downloads nothing.

.PHONY: all setup examples-setup build build-tool run test test-long test-short vet bench chaos mutants mutants-redis mutants-db mutants-etcd explore matrix fencing bench-detect bench-tuning bench-herd bench-cpu bench-services property property-redis clean cleanup

all: build

# Idempotent: apt-get runs only when a package is missing. openssh-server is there for
# the SSH-node test fixture only (its sshd runs inside namespaces the tests make), and
# redis-server and redis-sentinel for the instances a run starts in its own namespaces:
# while installing, a policy-rc.d that denies every service start keeps Debian from
# starting an sshd or a Redis on the host (one the machine already has is left as it is).
setup:
	@missing=""; for p in $(APT_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  policy=""; if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\nexit 101\n' | $$SUDO tee /usr/sbin/policy-rc.d >/dev/null && $$SUDO chmod 755 /usr/sbin/policy-rc.d && policy=made; \
	  fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; rc=$$?; \
	  [ -z "$$policy" ] || $$SUDO rm -f /usr/sbin/policy-rc.d; \
	  exit $$rc; \
	fi
	@$(GO) mod download
	@$(GO) run ./cmd/zlockcheck fetch
	@$(MAKE) --no-print-directory examples-setup

# The example workers' libraries (examples/workers): Python's from PyPI into a venv of
# Debian's python3 (pip --require-hashes: every package pinned with its hash), and
# JavaScript's from the npm registry (npm ci from package-lock.json, the machine's Node.js
# 20). Each is installed again only when its pin file changed (a copy of it marks the
# install), so a second run downloads nothing.
EXAMPLES_VENV := build/examples-venv
EXAMPLES_NODE := examples/workers/node_modules
examples-setup:
	@if ! cmp -s examples/workers/requirements.txt $(EXAMPLES_VENV)/zlc-installed-requirements.txt; then \
	  echo "installing the Python example workers' libraries into $(EXAMPLES_VENV)"; \
	  rm -rf $(EXAMPLES_VENV) && /usr/bin/python3 -m venv $(EXAMPLES_VENV) && \
	  $(EXAMPLES_VENV)/bin/pip install --quiet --disable-pip-version-check --require-hashes -r examples/workers/requirements.txt && \
	  cp examples/workers/requirements.txt $(EXAMPLES_VENV)/zlc-installed-requirements.txt; \
	fi
	@if ! cmp -s examples/workers/package-lock.json $(EXAMPLES_NODE)/zlc-installed-package-lock.json; then \
	  command -v npm >/dev/null || { echo "npm (Node.js 20) is needed for the JavaScript example workers"; exit 1; }; \
	  echo "installing the JavaScript example workers' libraries into $(EXAMPLES_NODE)"; \
	  (cd examples/workers && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error) && \
	  cp examples/workers/package-lock.json $(EXAMPLES_NODE)/zlc-installed-package-lock.json; \
	fi

# Beside bin/zlockcheck, one build of it per pinned etcd client other than its own
# (lockservice/etcd/clients/vX: go build -modfile), which serves the Go etcd recipes of
# a run whose members run that client's release (--etcd-client, docs/etcd.md).
# make test needs only the tool (build-tool): the one test that runs a variant builds
# its own.
build: build-tool
	@for m in lockservice/etcd/clients/v*/client.mod; do \
	  v=$$(basename $$(dirname $$m)); \
	  $(GO) build -modfile=$$m -o $(BIN)-etcd-client-$$v ./cmd/zlockcheck || \
	    { echo "$$m no longer follows go.mod: run scripts/etcd-client-pins.sh"; exit 1; }; \
	done

build-tool: setup
	$(GO) build -o $(BIN) ./cmd/zlockcheck
	sh recipes/curator/build.sh build/curator

run: build
	./$(BIN) run $(RUN_FLAGS)

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

# Integration tests need root, namespaces and ZooKeeper; ZLC_REQUIRE_INTEGRATION makes
# their absence a failure instead of a skip.
# The Kazoo and Curator workers' own protocol tests (each against a standalone
# ZooKeeper on 127.0.0.1), then every Go test (scripts/with-zk.sh gives the recipe tests
# that talk to one ZooKeeper directly a private standalone server). About 20 minutes
# (CI's budget is 30): near-duplicates and long variants skip here and are make
# test-long's (below; docs/tests.md#long-tests-make-test-long).
test: build-tool vet
	/usr/bin/python3 recipes/python/test_kazoo_worker.py
	/usr/bin/python3 recipes/python/test_zlcworker.py
	node recipes/node/test_zlcworker.js
	ZLC_CHECK_BIN=$(CURDIR)/$(BIN) ZLC_STRESS_SECONDS=10 bash recipes/curator/test.sh
	ZLC_REQUIRE_INTEGRATION=1 bash scripts/with-zk.sh $(GO) test -count=1 -p 1 -timeout 25m ./...

# The tests make test leaves out to stay within CI's budget (about 20 minutes of its
# 30): near-duplicates of a detection make test makes (a second recipe's control, the
# same detection over --connect) and long variants, each skipping under make test with a
# message that names this target (internal/testenv.Long; the list and why each moved:
# docs/tests.md#long-tests). ZLC_LONG=1 runs them; LONG_TESTS names their top-level
# tests (their other subtests, which make test runs too, run again).
LONG_TESTS := TestZlcMutexSurvivesTheExposures|TestConformanceOfRealWorkers|TestConformanceOnTheSimulator|TestAnExecSessionLockKilledIsNotARecipeBug|TestSSHRunServerFaultsValid|TestHerdFlagsOnlyTheMutant|TestConnectToAnExistingEnsemble|TestServerFaultsRaiseNoFalseAlarm|TestCuratorAndKazooSmoke|TestGoZKOrphanSchedules|TestVanishedHolderKeepsADatabaseLock|TestExampleWorkersUnderFaults|TestSSHRunsEveryKind|TestEveryKindRunsValid|TestConformanceOnEveryService
test-long: build
	@log=$$(mktemp); ZLC_LONG=1 ZLC_REQUIRE_INTEGRATION=1 bash scripts/with-zk.sh $(GO) test -count=1 -p 1 -timeout 60m -v \
	  -run '^($(LONG_TESTS))$$' ./... > $$log 2>&1; rc=$$?; \
	  grep -E '^(\s*---|ok|FAIL|panic)' $$log; rm -f $$log; exit $$rc

test-short: setup
	$(GO) test -short ./...

# The long chaos suite (not part of make test): server-side faults only must stay
# valid on 5 seeds, 60 s each; client faults must expose go-zookeeper's lock.
chaos: build
	@set -e; for seed in 1 2 3 4 5; do \
	  ./$(BIN) run --quiet --recipe gozk --nemesis kill,pause,partition --time 60s --seed $$seed --store store/chaos \
	    | grep -E '^(gozk|verdict)'; \
	done

# Every mutant caught by one explore command in 3 seeds (and zlc-mutex valid under the
# hand-picked exposures).
mutants: build
	@log=$$(mktemp); ZLC_LONG=1 ZLC_REQUIRE_INTEGRATION=1 ZLC_MUTANT_SEEDS=3 ZLC_MUTANT_TIME=60s $(GO) test -count=1 -timeout 90m -v \
	  -run 'TestEveryMutantIsCaught|TestZlcMutexSurvivesTheExposures' ./cmd/zlockcheck/ > $$log 2>&1; rc=$$?; \
	  grep -E '^(\s*---|ok|FAIL)|seed [0-9]' $$log; rm -f $$log; exit $$rc

# Every Redis mutant caught by one explore command, ZooKeeper's mutants' command
# (explore --allow-mutants --budget 4m: only --recipe differs; RedLock on
# --redis-topology redlock --nodes 3), and redis-lock, redislock and redsync with no
# recipe bug under it in 4 minutes each (about 30 minutes; docs/redis.md).
mutants-redis: build
	@log=$$(mktemp); ZLC_REQUIRE_INTEGRATION=1 ZLC_REDIS_MUTANTS=all $(GO) test -count=1 -timeout 60m -v \
	  -run 'TestExploreCatchesEveryServiceMutant/redis' ./cmd/zlockcheck/ > $$log 2>&1; rc=$$?; \
	  grep -E '^(\s*---|ok|FAIL)|caught in|round [0-9]+ \(' $$log; rm -f $$log; exit $$rc

# Every database mutant caught by the same explore command (only --recipe differs),
# and pg-table, pg-table-expiry, pg-advisory and mariadb-getlock with no recipe bug
# under it in 4 minutes each (about 25 minutes; docs/databases.md).
mutants-db: build
	@log=$$(mktemp); ZLC_REQUIRE_INTEGRATION=1 ZLC_DB_MUTANTS=all $(GO) test -count=1 -timeout 60m -v \
	  -run 'TestExploreCatchesEveryServiceMutant/databases' ./cmd/zlockcheck/ > $$log 2>&1; rc=$$?; \
	  grep -E '^(\s*---|ok|FAIL)|caught in|round [0-9]+ \(' $$log; rm -f $$log; exit $$rc

# Every etcd mutant caught by the same explore command (only --recipe differs), and
# etcd-mutex-validity with no recipe bug under it, 3 minutes each (about 15 minutes;
# docs/etcd.md).
mutants-etcd: build
	@log=$$(mktemp); ZLC_REQUIRE_INTEGRATION=1 ZLC_ETCD_MUTANTS=all $(GO) test -count=1 -timeout 60m -v \
	  -run 'TestExploreCatchesEveryServiceMutant/etcd' ./cmd/zlockcheck/ > $$log 2>&1; rc=$$?; \
	  grep -E '^(\s*---|ok|FAIL)|caught in|round [0-9]+ \(' $$log; rm -f $$log; exit $$rc

# explore's control: the default explore command on zlc-mutex, curator-mutex and
# kazoo-lock (a 5-minute budget each, about 16 minutes) reports no recipe bug.
explore: build
	ZLC_EXPLORE=1 ZLC_REQUIRE_INTEGRATION=1 $(GO) test -count=1 -timeout 60m -v -run 'TestExploreFindsNoRecipeBugInRealRecipes' ./cmd/zlockcheck/

# The safety matrix of every real recipe under every fault class (about 40 minutes).
matrix: build
	./$(BIN) matrix --time 30s --seed 1

# Harness overhead, set-up cost, scale, checker (about 12 minutes); time to detect
# every mutant (5 seeds x 7 cases of 30 s, about 25 minutes).
bench: build
	bash bench/run.sh

bench-detect: build
	bash bench/detect.sh

# What limits lock cycles per second: forceSync, JIT, heap, tick, nodes (bench/tuning.sh,
# about 6 minutes).
bench-tuning: build
	bash bench/tuning.sh

# What the herd effect costs: zlc-mutex against mutant-herd with 5, 20 and 50 workers
# (bench/herd.sh, six runs of 20 s, about 4 minutes).
bench-herd: build
	bash bench/herd.sh

# CPU per lock cycle by role, harness against a plain loop of processes, 5 and 20
# workers at --hold-max 1ms (bench/cpucycle.sh, about 3 minutes; issue 15).
bench-cpu: build
	bash bench/cpucycle.sh

# ZooKeeper's, Redis's and the databases' recipes side by side, each against its
# service's plain client loop, 5 and 20 workers at --hold-max 1ms (bench/services.sh,
# about 35 minutes; issues 25, 26 and 39).
bench-services: build
	bash bench/services.sh

# The lock property on a real ensemble (rapid over worker processes; about 8 minutes):
# the open searches (every recipe, go-zookeeper's orphan) plus the short tests that
# make test runs too.
property: build
	ZLC_PROPERTY=1 ZLC_LONG=1 ZLC_REQUIRE_INTEGRATION=1 $(GO) test -count=1 -timeout 60m -v -run 'TestLockProperty|TestGoZKOrphan|TestPropEnv' ./harness/

# The Redis simulator's mutants (redsim's lock property, rapid; about 5 minutes): each
# Redis mutant caught in the simulator and shrunk (docs/property-testing.md).
property-redis:
	ZLC_LONG=1 $(GO) test -count=1 -timeout 30m -v -run 'TestMutantsAreCaught' ./redsim/

cleanup: build
	./$(BIN) cleanup

clean:
	rm -rf bin

# Fencing against the harm: the counter workload of gozk under client-pause and
# client-partition (holder): the test (unfenced must lose updates within 3 seeds,
# fenced must stay valid; make test runs client-pause only), then seeds 1-3 of each
# printed. About 12 minutes.
fencing: build
	ZLC_FENCING_FAULTS=all ZLC_REQUIRE_INTEGRATION=1 $(GO) test -count=1 -timeout 30m -run 'TestFencingKeepsTheCounterRight' ./cmd/zlockcheck/
	@for fault in client-pause client-partition; do for seed in 1 2 3; do for fenced in false true; do \
	  printf '%-17s seed %s fenced=%-5s ' "$$fault" $$seed $$fenced; \
	  ./$(BIN) run --quiet --recipe gozk --workload counter --fenced=$$fenced --nemesis $$fault --nemesis-targets holder \
	    --nemesis-interval 2s --hold-max 1s --time 40s --seed $$seed --store store/fencing | grep -E '^verdict' | tr -s ' '; \
	done; done; done
