GO      ?= go
MOCKERY ?= github.com/vektra/mockery/v2@v2.53.5

.PHONY: test test-integration vet fmt-check mocks mocks-check build demo pitfalls pitfalls-docs

## test: unit and embedded-store tests, no servers needed
test:
	$(GO) test -race ./...

## test-integration: the same suites plus the real MariaDB/MySQL and Redis (never skipped)
test-integration:
	$(GO) test -race -tags integration ./...

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

## pitfalls-docs: regenerate docs/pitfalls.md from the recorded timelines
pitfalls-docs:
	$(GO) test ./internal/lock/pitfall -run TestPitfallDocs -count=1 -update
