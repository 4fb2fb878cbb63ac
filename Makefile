# herald: make test runs everything CI runs; nothing needs installing by hand.
GO        ?= go
PKGS      := ./...
FUZZTIME  ?= 30s
# Minimizing each new interesting input for up to the default 60s stalls a
# short run (execs at 0/sec while a worker minimizes); 100 runs will do.
FUZZMINTIME ?= 100x
BENCHTIME ?= 1s
BENCHCOUNT ?= 6
STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

.PHONY: all test vet race tidy-check bench bench-compare bench-smoke fuzz soak cover lint demo api-check help release-check k8s natsbridge metrics tracing live-test live demo-cluster demo-sse bench-slowsink bench-nats storm integration

all: test

## test: vet, race-enabled tests (fuzz seed corpora included), tidy check
test: vet race tidy-check

vet:
	$(GO) vet $(PKGS)

race:
	$(GO) test -race -count=1 -timeout 10m $(PKGS)

tidy-check:
	@bak=$$(mktemp -d); trap 'rm -rf "$$bak"' EXIT; \
	cp go.mod go.sum "$$bak"/; \
	$(GO) mod tidy; \
	if ! cmp -s go.mod "$$bak"/go.mod || ! cmp -s go.sum "$$bak"/go.sum; then \
		echo "go mod tidy changed go.mod/go.sum:"; diff -u "$$bak"/go.mod go.mod; diff -u "$$bak"/go.sum go.sum; \
		cp "$$bak"/go.mod "$$bak"/go.sum .; exit 1; fi; \
	echo "tidy: ok"

## bench: in-package benchmarks with allocations
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) -benchtime $(BENCHTIME) ./broadcast/ ./events/

## fuzz: each fuzz target for FUZZTIME (go test runs one -fuzz target at a time); CI runs their seed corpora in make test
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzOps$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./broadcast/
	$(GO) test -run '^$$' -fuzz '^FuzzCorrelator$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./events/
	$(GO) test -run '^$$' -fuzz '^FuzzSinkConcurrency$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINTIME) ./events/

## soak: the long load tests (minutes; make test runs their short forms)
soak:
	HERALD_SOAK=1 $(GO) test -run Soak -v -count=1 -timeout 30m ./broadcast/ ./events/

## cover: coverage report in cover.html
cover:
	$(GO) test -count=1 -coverprofile=cover.out $(PKGS)
	$(GO) tool cover -func=cover.out | tail -1
	$(GO) tool cover -html=cover.out -o cover.html

## lint: staticcheck at a pinned version, run through go run (no install)
lint: vet
	$(GO) run $(STATICCHECK) $(PKGS)

## demo: the quick start program
demo:
	$(GO) run ./examples/quickstart

## bench-compare: herald against Kubernetes side by side (bench/ module), table + chart into docs/
bench-compare:
	cd bench && GOWORK=off $(GO) run ./cmd/compare

## bench-smoke: the same harness once with -benchtime 1x, so it cannot rot,
## and the bench module's tests (the benchmark stream matches the anchor) (CI)
bench-smoke:
	cd bench && GOWORK=off $(GO) test -count=1 ./...
	cd bench && GOWORK=off $(GO) run ./cmd/compare -smoke

## api-check: each library module's API against its last release tag (apidiff; docs/releasing.md)
api-check:
	.ci/api-check

## release-check: a release rehearsed in a temporary clone: tags, a file module proxy, go get from outside, gorelease, go install (docs/releasing.md)
release-check:
	.ci/release-check

## help: the targets and what each does
help:
	@grep -h '^## ' $(MAKEFILE_LIST) | sed 's/^## /  /'

## integration: the modules of their own, against real servers (k8s, natsbridge, metrics, the tracing example, the live demo)
integration: k8s natsbridge metrics tracing live-test

## k8s: the Kubernetes module against a real kube-apiserver (built once per machine into ~/.cache/herald)
k8s:
	$(MAKE) -C k8s test

## storm: 20,000 events over 500 objects into a real API server, client-go against herald (minutes)
storm:
	$(MAKE) -C k8s storm

## natsbridge: the NATS module (embedded nats-server, child processes): vet, race, lint, tidy, bench smoke
natsbridge:
	$(MAKE) -C natsbridge test lint bench-smoke

## bench-nats: across processes, natsbridge against bare nats.go and JetStream (minutes)
bench-nats:
	$(MAKE) -C natsbridge bench

## demo-cluster: an embedded nats-server and three processes sharing values
demo-cluster:
	$(MAKE) -C natsbridge demo-cluster

## metrics: the metrics module (Prometheus and OpenTelemetry exporters)
metrics:
	$(MAKE) -C metrics test lint

## tracing: the tracing example (W3C trace context through natsbridge with OpenTelemetry's propagator)
tracing:
	$(MAKE) -C examples/tracing test lint

## live-test: the live demo's tests, in headless Chromium (skipped without it unless HERALD_REQUIRE_BROWSER=1)
live-test:
	$(MAKE) -C examples/live test lint

## live: the live demo: a page of watchers fed through Server-Sent Events, with /metrics (prints its URL)
live:
	$(MAKE) -C examples/live run

## demo-sse: a stream served to Server-Sent-Events clients with Last-Event-ID resume
demo-sse:
	$(GO) run ./examples/sse -addr localhost:8080

## bench-slowsink: herald against client-go writing to a sink that takes 2 ms per call
bench-slowsink:
	cd bench && GOWORK=off $(GO) test -run '^$$' -bench SlowSink -benchtime 3x -count 3 ./eventsbench/
