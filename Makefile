GO      ?= go
MOCKERY ?= github.com/vektra/mockery/v2@v2.53.5

.PHONY: test test-integration test-mysql vet fmt-check mocks mocks-check build demo pitfalls pitfalls-docs

## test: unit and embedded-store tests, no servers needed
test:
	$(GO) test -race ./...

## The suites against real servers wait on them more than they compute (2026-11-27, 2 vCPU: 1 min 45 s
## of CPU in 4 min 15 s of test-integration), so their packages and their parallel tests run four at
## a time instead of one per core.
REAL_PARALLEL ?= -p 4 -parallel 4

## test-integration: the same suites plus the real MariaDB/MySQL, Redis, ZooKeeper, etcd and nginx (never
## skipped); starts ZooKeeper on 127.0.0.1:2181, etcd on :2379 and RedLock's five Redis nodes on
## 127.0.0.1:7001-7005 with scripts/services.sh (installing them when absent) unless they answer
test-integration:
	scripts/services.sh up
	$(GO) test $(REAL_PARALLEL) -race -count=1 -tags integration ./...

## test-mysql: the suites that use the database, against Oracle's MySQL instead of MariaDB: MySQL on
## 127.0.0.1:3307, started by scripts/services.sh (Debian unstable's mysql-server-core, cached in
## /var/cache/seckill/mysql and unpacked into run/services; needs root). The other servers as for
## test-integration. SECKILL_TEST_REAL_ONLY=1: the per-store tests run on the real stores alone
## (testenv.RealOnly); the embedded half would repeat make test's run
MYSQL_TEST_DSN ?= root:@tcp(127.0.0.1:3307)/
MYSQL_TEST_PKGS = ./internal/api ./internal/app ./internal/async ./internal/database ./internal/order \
	./internal/verdict ./internal/voucher ./migrations ./loadtest/harness
## Its three go test runs go side by side (make -j3), as test-integration's packages do: they wait
## on the servers more than they compute (one after the other they kept the two cores about
## half busy).
test-mysql:
	scripts/services.sh up mysql
	scripts/services.sh up
	$(MAKE) -j3 --output-sync=target test-mysql-pkgs test-mysql-lock test-mysql-cmd

MYSQL_TEST = SECKILL_TEST_MYSQL_DSN='$(MYSQL_TEST_DSN)' SECKILL_TEST_REAL_ONLY=1 $(GO) test $(REAL_PARALLEL) -race -count=1 -tags integration
.PHONY: test-mysql-pkgs test-mysql-lock test-mysql-cmd
test-mysql-pkgs:
	$(MYSQL_TEST) $(MYSQL_TEST_PKGS)
test-mysql-lock:
	$(MYSQL_TEST) ./internal/lock -run 'MySQL|GetLock'
test-mysql-cmd:
	$(MYSQL_TEST) ./cmd/seckill -run 'TestFencingStopsStaleWriters|TestTwoInstancesOneOrderPerUser|TestGracefulShutdown'

## build: the binary at bin/seckill
build:
	$(GO) build -o bin/seckill ./cmd/seckill

vet:
	$(GO) vet ./...
	$(GO) vet -tags integration ./...

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## mocks: regenerate the committed mockery mocks
mocks:
	$(GO) run $(MOCKERY)

mocks-check: mocks
	@if [ -n "$$(git status --porcelain -- '*/mocks/*')" ]; then git status --short -- '*/mocks/*'; echo "mocks are stale: run make mocks and commit"; exit 1; fi

## demo: two instances, one storm per guard, the verdict table (embedded stores unless SECKILL_* are set)
demo:
	$(GO) run ./cmd/seckill demo

## fuzz: run each HTTP API fuzzer for FUZZTIME (their seeds also run in make test)
FUZZTIME ?= 20s
.PHONY: fuzz
fuzz:
	@for f in FuzzVoucherIDPath FuzzUserIDHeader FuzzCreateVoucherBody; do \
		$(GO) test ./internal/api/ -run "^$$f$$" -fuzz "^$$f$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

## pitfalls: run every wrong lock from the articles beside its fix (embedded Redis)
pitfalls:
	$(GO) run ./cmd/seckill pitfalls

## pitfalls-docs: regenerate docs/pitfalls.md and docs/async-pitfalls.md from the recorded timelines
pitfalls-docs:
	$(GO) test ./lessons/pitfall -run TestPitfallDocs -count=1 -update
	$(GO) test ./lessons/asyncpitfall -run TestDocs -count=1 -update

## ---- load test (docs/loadtest.md) ----
K6_VERSION ?= v1.8.1
K6         ?= $(CURDIR)/.tools/bin/k6
LOCK       ?= redis
MODE       ?= sync
KILL       ?= 0
DURATION   ?= 30
BASELINE   ?= 1

.PHONY: loadtest loadtest-ci loadtest-docker cluster-up cluster-down cluster-status compose-config k6

## k6: install the pinned k6 into .tools/bin when absent (a tool, never imported: it is AGPL)
k6: $(K6)
$(K6):
	GOBIN=$(dir $(K6)) $(GO) install go.k6.io/k6@$(K6_VERSION)

## loadtest: cluster up -> k6 -> verify -> cluster down -> DB baseline; LOCK=local|none must detect the failure.
## MODE=async: the asynchronous mode with a flash peak, the writers drained before the verdict;
## KILL=1 (async) kills -9 instance 2 mid-sell-out (docs/loadtest.md#the-asynchronous-mode)
loadtest: $(K6)
	MODE=$(MODE) KILL=$(KILL) LOCK=$(LOCK) DURATION=$(DURATION) BASELINE=$(BASELINE) K6=$(K6) scripts/loadtest.sh

## loadtest-ci: ~30 s of load each for LOCK=redis (clean) and LOCK=local (failure detected), ~25 s in the
## asynchronous mode with instance 2 killed mid-sell-out and the 5,000-user flash peak, and the compose file.
## The sell-out runs at 200 users/s, below capacity: CI gates correctness, not the speed of an unknown machine.
loadtest-ci: $(K6) compose-config
	SELLOUT_RATE=200 $(MAKE) loadtest LOCK=redis DURATION=15 BASELINE=0
	SELLOUT_RATE=200 $(MAKE) loadtest LOCK=local DURATION=15 BASELINE=0
	SELLOUT_RATE=200 $(MAKE) loadtest MODE=async KILL=1 DURATION=10 BASELINE=0

## loadtest-docker: k6 and verify against `docker compose up` (docker-compose.yml); start it with
## the same SECKILL_LOCK as LOCK here. Not run on our machines: they have no Docker engine.
loadtest-docker: $(K6)
	CLUSTER=external LOCK=$(LOCK) DURATION=$(DURATION) BASELINE=0 K6=$(K6) \
	LOADTEST_DSN='seckill:seckill@tcp(127.0.0.1:13306)/seckill?parseTime=true&loc=UTC' \
	INSTANCES=http://127.0.0.1:18081,http://127.0.0.1:18082 scripts/loadtest.sh

cluster-up:
	scripts/cluster.sh up
cluster-down:
	scripts/cluster.sh down
cluster-status:
	scripts/cluster.sh status

## compose-config: validate docker-compose.yml (no Docker engine needed)
compose-config:
	docker-compose config -q

## capacity: the sync path's closed-loop ceiling through nginx (wrk, 64 connections, every order a new
## user) and the DB baseline right after it, printed as a ratio (~1 min; docs/loadtest.md#capacity)
.PHONY: capacity
capacity:
	scripts/capacity.sh

## scaling: both order modes against instances (1-4) and connections (16-512) with GET /healthz as the
## machine's limit, the DB baseline, async p99 at 80% of its ceiling, a 5-minute sale's memory, and the
## chart docs/loadtest-scaling.svg (9–13 min; SALE=0 skips the sale; docs/loadtest.md#scaling)
.PHONY: scaling
scaling:
	scripts/scaling.sh

## abtest: settings against each other in alternating rounds, orders and GET /healthz each, RATES= open loops too,
## FRACTIONS= open loops at shares of each one's own ceiling (the p99 goal's control)
## (~40 s per round and setting); AB="SECKILL_ADMIT_BATCH=1 SECKILL_ADMIT_BATCH=32" by default
AB ?= SECKILL_ADMIT_BATCH=1 SECKILL_ADMIT_BATCH=32
.PHONY: abtest
abtest:
	scripts/abtest.sh $(AB)

## lockbench: every lock (Redis, RedLock, MySQL, GET_LOCK, ZooKeeper, etcd) against its Go peers (~4 min)
## Needs MariaDB on :3306 and the servers of services-up; starts its own etcd (Debian's
## etcd-server, when installed) and five redis-server processes for the node-loss test.
LOCKBENCH_MYSQL ?= root:@tcp(127.0.0.1:3306)/
LOCKBENCH_FLAGS ?= -duration 700ms -rounds 5
.PHONY: lockbench lockbench-redis
lockbench: services-up
	cd loadtest/lockbench && $(GO) run . -mysql '$(LOCKBENCH_MYSQL)' $(LOCKBENCH_FLAGS)
## lockbench-redis: the single-Redis locks only, as before (~1.5 min)
lockbench-redis:
	cd loadtest/lockbench && $(GO) run . -backends redis -kill=false -nodeloss-port 0 -duration 1s -rounds 5

## ---- chaos (docs/chaos.md) ----
TOXIPROXY_VERSION ?= v2.5.0
TOXIPROXY         ?= $(CURDIR)/.tools/bin/toxiproxy-server

.PHONY: chaos chaos-ci toxiproxy

## toxiproxy: install the pinned toxiproxy server into .tools/bin when absent (its command is cmd/server)
toxiproxy: $(TOXIPROXY)
$(TOXIPROXY):
	GOBIN=$(CURDIR)/.tools/toxiproxy-$(TOXIPROXY_VERSION) $(GO) install github.com/Shopify/toxiproxy/v2/cmd/server@$(TOXIPROXY_VERSION)
	mkdir -p $(dir $(TOXIPROXY)) && mv $(CURDIR)/.tools/toxiproxy-$(TOXIPROXY_VERSION)/server $(TOXIPROXY)

## chaos: faults under load (own MariaDB and Redis, toxiproxy, two instances behind nginx), each with
## its thresholds and the SQL verdict; exits 1 on any FAIL (about 4 min on 2 vCPUs, see docs/chaos.md).
## MODE=async: the asynchronous mode's experiments, the writers drained before each verdict
chaos: $(TOXIPROXY)
	MODE=$(MODE) TOXIPROXY=$(TOXIPROXY) scripts/chaos.sh

## chaos-ci: the short version (shorter load and outages, no MariaDB kill, no Sentinel), about 3 min
chaos-ci: $(TOXIPROXY)
	MODE=$(MODE) CHAOS_SHORT=1 TOXIPROXY=$(TOXIPROXY) scripts/chaos.sh

## ---- extra lock servers (scripts/services.sh): RedLock's five Redis nodes, ZooKeeper, etcd ----
.PHONY: services-up services-down services-status

## services-up: five redis-server processes on 127.0.0.1:7001-7005, ZooKeeper on :2181 and etcd on :2379
services-up:
	scripts/services.sh up
services-down:
	scripts/services.sh down
services-status:
	scripts/services.sh status

## ---- Redis with Sentinel (scripts/services.sh sentinel; docs/ha.md) ----
.PHONY: sentinel-up sentinel-down sentinel-failover

## sentinel-up: a primary on 127.0.0.1:7101, its replica on :7102, three sentinels on :27101-27103
sentinel-up:
	scripts/services.sh up sentinel
sentinel-down:
	scripts/services.sh down sentinel
## sentinel-failover: SIGKILL the primary, wait for the switch, restart it as the replica; prints the times
sentinel-failover:
	scripts/services.sh failover
