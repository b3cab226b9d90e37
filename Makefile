# zkstock: every target that needs ZooKeeper or MariaDB starts throwaway servers on free loopback
# ports with scripts/servers.sh (installing the Debian packages if missing) and stops them after.
SHELL := /bin/bash
GO ?= go
SERVERS := scripts/servers.sh
BENCHTIME ?= 3000x
BENCH_ROUNDS ?= 6
# make demo DEMO_FLAGS='-requests 300 -stock 30' for a shorter run; any loadtest flag goes
DEMO_FLAGS ?=
# Fuzzing is bounded by executions (Nx), not by time: with a duration, Go 1.26's coordinator can
# fail a target that found nothing with a bare "context deadline exceeded" as the time runs out
# (go.dev/issue/75804, fixed in Go 1.27). 10000x is about 30 s of the parsers' targets
FUZZTIME ?= 10000x
# dlock is a module of its own (dlock/go.mod), which go.mod requires and replaces with ./dlock:
# ./... from the root stops at its go.mod, so test names its packages by their import path (one
# go test run, the packages in parallel), and lint vets it from its own module, under its own go line
DLOCK_PKGS := github.com/zkstock/zkstock/dlock/...
# The request parsers' fuzz targets (order/fuzz_test.go) and dlock's node-name parser's
# (dlock/internal/nodename); make test fuzzes each for FUZZTIME_TEST executions: the parsers' about
# 10 s each (their corpus's baseline counts), the node names' (pure functions) about 8 s each
FUZZ_TARGETS := FuzzAPI FuzzAdmin
NODENAME_FUZZ_TARGETS := FuzzParse FuzzNaming
FUZZTIME_TEST ?= 1000x
NODENAME_FUZZTIME_TEST ?= 500000x

.PHONY: check-go test test-galera test-faults fuzz nemesis test-nemesis test-nemesis-galera lint compose-check compose-test admission-goals compose-up compose-loadtest compose-down screenshots footprint scale scale-ab syscalls-ab bench demo demo-up demo-down flash-sale galera-bench servers-start servers-stop help

## check-go: the Go toolchain is at least go.mod's version (1.26.8); every target below that
## builds or tests depends on it and says what is missing
check-go:
	@GO=$(GO) scripts/check-go.sh

## test: gofmt, go vet, docker-compose.yml check, then go test -race ./... and dlock's module
## against real servers, the docs' walkthroughs (./docs) last and alone, as a reader runs them on a
## machine doing nothing else, then each fuzz target for FUZZTIME_TEST executions (the node
## names' NODENAME_FUZZTIME_TEST; about 40 s in all); needs root for apt-get (about ten Debian
## packages, about 640 MB, when missing), up to 20 minutes
test: check-go lint compose-check
	$(SERVERS) run -- bash -c '$(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v "/docs$$") $(DLOCK_PKGS) && \
		$(GO) test -race -count=1 -timeout 10m ./docs && \
		for t in $(FUZZ_TARGETS); do $(GO) test -run "^$$" -fuzz "^$$t$$" -fuzztime $(FUZZTIME_TEST) ./order || exit 1; done && \
		for t in $(NODENAME_FUZZ_TARGETS); do $(GO) -C dlock test -run "^$$" -fuzz "^$$t$$" -fuzztime $(NODENAME_FUZZTIME_TEST) ./internal/nodename || exit 1; done'

## test-galera: the inventory's tests against a three-node MariaDB Galera cluster (scripts/galera.sh:
## order ids under auto-increment control, the settings refused, causal reads through another
## node, a 1213 at COMMIT as a rollback, the writer killed, cut off and paused under writes, every
## node killed at once), then order's (replicas on the cluster in mode zk, the writer's node killed
## and frozen under purchases, order ids looked up), the stale reads counted, and tutorial 12 on a
## demo on the cluster, one package at a time as they break nodes; besides the usual servers;
## about 4 minutes; CI runs it after make test
test-galera: check-go
	ZKSTOCK_GALERA=1 $(SERVERS) run --no-ensemble --galera -- $(GO) test -race -count=1 -p 1 -timeout 15m -run 'Galera|OrderIDs|WithoutGalera' -v ./inventory ./order ./internal/galeraprobe ./docs

## test-faults: the fault scenarios (processes killed, paused, cut off; ZooKeeper and MariaDB
## stopped); the results table goes to out/reliability-table.md. The parsers' fuzz targets run in
## make test (FUZZTIME_TEST each) and at length in make fuzz
test-faults: check-go lint
	$(SERVERS) run -- env ZKSTOCK_FAULTS=1 $(GO) test -race -count=1 -timeout 30m -v ./faults
	@# the inventory tests that restart MariaDB, on servers of their own (make test shares its servers)
	$(SERVERS) run --no-ensemble -- env ZKSTOCK_FAULTS=1 $(GO) test -race -count=1 -run 'AfterARestart' -v ./inventory

## fuzz: the request parsers' fuzz targets, FUZZTIME (10000x, about 30 s) each, and what the fuzzer found kept as
## seed corpus in order/testdata/fuzz, so that make test replays it
fuzz: check-go
	$(SERVERS) run --no-ensemble -- bash -c 'for t in $(FUZZ_TARGETS); do $(GO) test -run "^$$" -fuzz "^$$t$$" -fuzztime $(FUZZTIME) ./order || exit 1; done'
	for t in $(FUZZ_TARGETS); do mkdir -p order/testdata/fuzz/$$t; \
		cp -n $$($(GO) env GOCACHE)/fuzz/github.com/zkstock/zkstock/order/$$t/* order/testdata/fuzz/$$t/ 2>/dev/null || true; done

## nemesis: faults composed at random (faults/nemesis_test.go) under buys, carts, cancels and reads
## on three replicas, every history checked by Porcupine, every SKU audited; MODE (a list runs
## each; MODE+LIE plants a lie, a control), SEED (one, or one per mode), DURATION (60s; 30m runs
## long), FAULTS (kinds, comma-separated; MODE=kinds;MODE=kinds per mode; all when empty), STOCK
## (200 per SKU; per mode too), DB (mariadb, one server; galera: the fleet on a three-node
## Galera cluster, started besides, which the galera-* kinds break). Writes
## out/nemesis/<mode>-<seed>/ (galera-<mode>-<seed>/ on Galera): summary.json,
## timeline.svg, the replicas' logs, and on an anomaly the histories and Porcupine's visualization
SEED ?= 1
DURATION ?= 60s
MODE ?= zk
FAULTS ?=
STOCK ?= 200
DB ?= mariadb
NEMESIS_TIMEOUT ?= 4h
nemesis: check-go
	$(SERVERS) run --no-ensemble $(if $(filter galera,$(DB)),--galera) -- env ZKSTOCK_FAULTS=1 NEMESIS=1 NEMESIS_DB='$(DB)' NEMESIS_MODE='$(MODE)' NEMESIS_SEED='$(SEED)' NEMESIS_DURATION=$(DURATION) \
		NEMESIS_FAULTS='$(FAULTS)' NEMESIS_STOCK='$(STOCK)' $(GO) test -count=1 -timeout $(NEMESIS_TIMEOUT) -run '^TestNemesis$$' -v ./faults

## test-nemesis: the nemesis as CI runs it: every fenced mode 25 s under every kind of fault, and
## the negative controls, each of which must be caught: the unsafe modes (none; zk-unfenced paused
## at a COMMIT; redis so, and Redis restarted) and the lies planted in replicas built with the
## zkstock_lies tag (zk+soldout-cache: a 409 from a cached sold-out flag, 15 s, stock 20, replicas
## killed; zk+unconfirmed-not-sold: "nothing was sold" for an unconfirmed COMMIT, 20 s, COMMIT
## replies lost; zk-unfenced+switch-no-drain: switches that skip the barrier, 25 s of switches
## among the unfenced modes, which mix unsafely; zk+no-key-hold: no key held before a change is
## admitted, so a retry is told "nothing was sold" while its first attempt commits, 20 s, pauses
## at a COMMIT). Every run's clients retry under a change's key (lincheck.Config.Retries). Fixed seeds (one per mode, in order: each fenced mode's draws a follower cut and
## a pause at a COMMIT, all 14 kinds between them), about 7 minutes on 2 shared cores, each run's
## ZooKeeper ensemble started during the run before (the whole CI's budget is 40 minutes;
## docs/reliability.md has a run's table); a control not caught runs again on the next seed
## (about a minute more), and fails it when three schedules in a row miss it; then
## test-nemesis-galera (below, about 3 minutes more)
NEMESIS_CI_MODES ?= zk,zk-batch,redis-fenced,db-cas,db-forupdate,none,zk-unfenced,redis,zk+soldout-cache,zk+unconfirmed-not-sold,zk-unfenced+switch-no-drain,zk+no-key-hold
NEMESIS_CI_SEEDS ?= 383,517,165,286,220,1,3,1,1,1,1,1
NEMESIS_CI_DURATION ?= none=15s;zk-unfenced=50s;redis=40s;zk+soldout-cache=15s;zk+unconfirmed-not-sold=20s;zk+no-key-hold=20s;*=25s
NEMESIS_CI_FAULTS ?= zk-unfenced=pause-at-commit;redis=pause-at-commit,redis-restart;zk+soldout-cache=kill;zk+unconfirmed-not-sold=lose-commit-reply;zk-unfenced+switch-no-drain=switch-mode;zk+no-key-hold=pause-at-commit;*=
NEMESIS_CI_STOCK ?= zk+soldout-cache=20;*=200
test-nemesis: check-go
	$(SERVERS) run --no-ensemble -- env ZKSTOCK_FAULTS=1 NEMESIS=1 NEMESIS_MODE='$(NEMESIS_CI_MODES)' NEMESIS_SEED='$(NEMESIS_CI_SEEDS)' \
		NEMESIS_DURATION='$(NEMESIS_CI_DURATION)' NEMESIS_FAULTS='$(NEMESIS_CI_FAULTS)' NEMESIS_STOCK='$(NEMESIS_CI_STOCK)' \
		$(GO) test -count=1 -timeout 30m -run '^TestNemesis$$' -v ./faults
	$(MAKE) --no-print-directory test-nemesis-galera

## test-nemesis-galera: test-nemesis's runs on Galera (make test-nemesis runs them last): the fleet
## in zk on a three-node Galera cluster of its own, 25 s, seed 248 (the writer node killed, a power
## failure and its bootstrap, pauses at a COMMIT, COMMIT replies lost, a replica killed), then the
## control zk+unsafe-flush (innodb_flush_log_at_trx_commit=0 on every node, a power failure: it
## must be caught losing acknowledged orders), 30 s, seed 1, and the control zk+stale-reads
## (wsrep_sync_wait=0, each replica writing to a node of its own, nodes lagging: it must be caught
## reading a stock from before acknowledged purchases), 30 s, seed 1; about 3 minutes with the
## servers' start
NEMESIS_CI_GALERA_MODE ?= zk,zk+unsafe-flush,zk+stale-reads
NEMESIS_CI_GALERA_SEED ?= 248,1,1
NEMESIS_CI_GALERA_DURATION ?= zk+unsafe-flush=30s;zk+stale-reads=30s;*=25s
NEMESIS_CI_GALERA_FAULTS ?= zk+unsafe-flush=galera-power-fail;zk+stale-reads=galera-lag;*=galera-kill,galera-isolate,galera-pause,galera-power-fail,pause-at-commit,lose-commit-reply,cut-db,kill
test-nemesis-galera: check-go
	$(SERVERS) run --no-ensemble --galera -- env ZKSTOCK_FAULTS=1 NEMESIS=1 NEMESIS_DB=galera NEMESIS_MODE='$(NEMESIS_CI_GALERA_MODE)' \
		NEMESIS_SEED='$(NEMESIS_CI_GALERA_SEED)' NEMESIS_DURATION='$(NEMESIS_CI_GALERA_DURATION)' NEMESIS_FAULTS='$(NEMESIS_CI_GALERA_FAULTS)' \
		$(GO) test -count=1 -timeout 10m -run '^TestNemesis$$' -v ./faults

## lint: gofmt and go vet, of the root module and of dlock's (whose go.mod must hold exactly what
## it imports)
lint: check-go
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) -C dlock vet ./...
	$(GO) -C dlock mod tidy -diff

## compose-check: docker-compose.yml and its overrides are valid (Debian's docker-compose; no Docker
## engine needed)
compose-check:
	scripts/ensure-tools.sh
	docker-compose -f docker-compose.yml config -q
	docker-compose -f docker-compose.yml -f docker-compose.ensemble.yml config -q
	docker-compose -f docker-compose.yml -f docker-compose.galera.yml config -q
	docker-compose -f docker-compose.yml -f docker-compose.galera.yml -f scripts/compose/local.yml -f scripts/compose/local.galera.yml config -q
	@# the files make compose-up runs, for each STACK (scripts/compose/stack.sh command prints them)
	for s in '' ensemble galera; do $$(STACK=$$s scripts/compose/stack.sh command) config -q || exit 1; done
	docker-compose -f docker-compose.yml --profile loadtest config --services | grep -qx loadtest

## compose-test: docker-compose.yml (and docker-compose.ensemble.yml, docker-compose.galera.yml) run
## and broken on the local Docker engine, with images built from Debian's packages (no registry
## needed): replicas killed, paused and cut off from ZooKeeper, the ZooKeeper leader and a Galera
## node killed; results in out/compose-results.md
compose-test: check-go compose-check
	scripts/compose/test.sh

## admission-goals: issue 47's admission goals measured on the compose stack (composetest
## TestAdmissionGoals): the README's loadtest GOAL_RUNS times in a row (10), quiet and with one core
## kept busy, then a flash sale of 1,000 buyers/s and three closed-loop runs after it with ample
## stock; the table in out/admission-goals.md. About 6 minutes
GOAL_RUNS ?= 10
admission-goals: check-go compose-check
	COMPOSE_TEST_RUN='^TestAdmissionGoals$$' ZKSTOCK_ADMISSION_GOALS=1 GOAL_RUNS=$(GOAL_RUNS) COMPOSE_TEST_TIMEOUT=30m scripts/compose/test.sh

## compose-up / compose-loadtest / compose-down: docker-compose.yml on the local Docker engine with no
## image registry (scripts/compose/stack.sh): the images built from Debian's packages when missing
## (a line per image; MariaDB 10.11 stands in for MySQL 8), up with scripts/compose/local.yml and
## --no-build, the URLs and the next command printed; docker compose (v2) or docker-compose (1.29),
## whichever is installed; STACK=ensemble or STACK=galera adds that override; down removes the
## stack and its volume
compose-up: check-go
	STACK=$(STACK) scripts/compose/stack.sh up
compose-loadtest:
	STACK=$(STACK) scripts/compose/stack.sh loadtest
compose-down:
	STACK=$(STACK) scripts/compose/stack.sh down

## screenshots: the live page (GET /) in headless Chromium during loads in modes none, zk and
## zk-herd, saved to docs/images/live-page-*.png for the tutorials, and Porcupine's visualization
## of a history in mode none, docs/images/porcupine-none.png (tutorial 9)
screenshots: check-go
	scripts/ensure-tools.sh
	$(SERVERS) run --no-ensemble -- env SCREENSHOT_DIR=$(CURDIR)/docs/images $(GO) test -count=1 -run 'TestLivePageInChromium|TestLivePageDuringALoad|TestLinearizabilityPicture' -v ./order

## scale: purchases/s against 1, 10, 100 and 1000 SKUs (uniform and Zipf) for zk, zk-batch,
## db-forupdate, db-cas and redis-fenced, with a standalone ZooKeeper and the 3-node ensemble, next
## to the raw limits of the same servers; tables in out/scale.md, charts in docs/images
scale: check-go
	$(SERVERS) run -- scripts/scale.sh

## scale-ab: git refs side by side on the same servers, alternated round after round
## (REFS="OLD NEW", AB_ROUNDS=3, AB_CONCURRENCY=48 purchases in flight): zk at 100 SKUs and at
## one, zk-batch at one, with the CPU per purchase of replicas, ZooKeeper and MariaDB; table in
## out/scale-ab/summary.md
AB_ROUNDS ?= 3
AB_CONCURRENCY ?= 48
scale-ab: check-go
	$(if $(REFS),,$(error name the builds to compare: make scale-ab REFS="OLD NEW"))
	$(SERVERS) run --no-ensemble -- env AB_ROUNDS=$(AB_ROUNDS) AB_CONCURRENCY=$(AB_CONCURRENCY) scripts/scale-ab.sh $(REFS)

## syscalls-ab: system calls, context switches and CPU per purchase of replicas, MariaDB and
## ZooKeeper (perf stat), git refs side by side (REFS="OLD NEW", AB_ROUNDS=2); out/syscalls-ab/summary.txt
syscalls-ab: check-go
	$(if $(REFS),,$(error name the builds to compare: make syscalls-ab REFS="OLD NEW"))
	$(SERVERS) run --no-ensemble -- env AB_ROUNDS=$(if $(filter-out file,$(origin AB_ROUNDS)),$(AB_ROUNDS),2) scripts/syscalls-ab.sh $(REFS)

## footprint: 100,000 purchases over 1,000 SKUs in zk and zk-batch, then what they left behind
## (lock paths, watches, goroutines, live heap, batchers), measured against the idle values
footprint: check-go
	$(SERVERS) run --no-ensemble -- env FOOTPRINT_PURCHASES=100000 FOOTPRINT_SKUS=1000 $(GO) test -count=1 -timeout 30m -run TestFootprintIsFlat -v ./order

## demo: three local replicas, loadtest none against zk, report in out/ (no Docker needed); installs
## only the servers it runs and curl when missing (scripts/demo.sh packages); DB=galera puts the
## stock on a three-node MariaDB Galera cluster (demo-up too)
demo: check-go
	DEMO_DB=$(DB) scripts/demo.sh run $(DEMO_FLAGS)

## demo-up / demo-down: keep the demo running for the tutorials (source .demo/env.sh)
demo-up: check-go
	DEMO_DB=$(DB) scripts/demo.sh up .demo
demo-down:
	scripts/demo.sh down .demo

## flash-sale: the flash sale on local processes: three replicas (WORK_DELAY 5ms), one SKU, every
## lock mode, 1,000 buyers/s for 10 s (open loop) with 100 units and then with ample stock; prints
## the table, reports in out/flash-sale/. RATE, DURATION, UNITS, MODES, WORK_DELAY, PORTS settable:
## make flash-sale MODES=zk,zk-batch DURATION=5s
flash-sale: check-go
	$(SERVERS) run --no-ensemble --no-test-packages -- scripts/flash-sale.sh

## galera-bench: every lock mode on a three-node Galera cluster next to one MariaDB, the same load
## on both in one run (closed loop, then the open loop with ample stock), tables in
## out/galera-bench/closed.md and open.md (scripts/galera-bench.sh; its settings there)
galera-bench: check-go
	$(SERVERS) run --no-ensemble --no-test-packages --galera -- scripts/galera-bench.sh

## bench: dlock against go-zookeeper's zk.Lock, Curator's InterProcessMutex and kazoo's Lock, 1, 3
## and 30 contenders, side by side: a warm-up, then BENCH_ROUNDS rounds that alternate the four,
## summed up by benchstat (raw lines in out/). BENCH_BEFORE=DIR (a git worktree of an earlier
## commit) adds that tree's dlock to every round, and a table of both against zk.Lock. ZK_JVM=server
## (here and for scale-ab) runs ZooKeeper's JVM as a server would, not as the tests start it
bench: check-go
	@mkdir -p out
	$(SERVERS) run --no-ensemble -- scripts/bench.sh $(BENCH_ROUNDS) $(BENCHTIME) out/bench-mutex.txt
	$(GO) tool benchstat -col '/impl@(dlock zklock curator kazoo)' out/bench-mutex.txt
	$(if $(BENCH_BEFORE),$(GO) tool benchstat -col '/impl@(zklock dlock-before dlock curator)' out/bench-mutex.txt)

## servers-start / servers-stop: keep servers running for go test by hand (source .servers/env.sh)
servers-start:
	$(SERVERS) start .servers
	@echo "now: source .servers/env.sh && go test ./..."
servers-stop:
	$(SERVERS) stop .servers

help:
	@grep -E '^## ' Makefile | sed 's/^## //'
