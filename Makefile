# zkstock: every target that needs ZooKeeper or MariaDB starts throwaway servers on free loopback
# ports with scripts/servers.sh (installing the Debian packages if missing) and stops them after.
SHELL := /bin/bash
GO ?= go
SERVERS := scripts/servers.sh
BENCHTIME ?= 3000x

.PHONY: test lint vet unit bench servers-start servers-stop

## test: gofmt, go vet, then go test -race ./... against real ZooKeeper and MariaDB
test: lint
	$(SERVERS) run -- $(GO) test -race -count=1 -timeout 20m ./...

## lint: gofmt and go vet
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...

## bench: dlock against go-zookeeper's zk.Lock, 1, 3 and 30 contenders, one run side by side
bench:
	$(SERVERS) run --no-ensemble -- $(GO) test -run '^$$' -bench Mutex -benchtime $(BENCHTIME) -count 3 ./dlock

## servers-start / servers-stop: keep servers running for go test by hand (source .servers/env.sh)
servers-start:
	$(SERVERS) start .servers
	@echo "now: source .servers/env.sh && go test ./..."

servers-stop:
	$(SERVERS) stop .servers

help:
	@grep -E '^## ' Makefile | sed 's/^## //'
