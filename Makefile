# shardkeeper — see README.md.
GO          ?= go
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
FUZZTIME    ?= 10s

# Packages whose tests run under the race detector (the concurrent core).
RACE_PKGS := ./actors/... ./services/... ./pki/... ./persistence/... ./cluster/... ./config/... ./client/... ./near/... ./test/fakenear/... ./test/fakearweave/...

.PHONY: all build run test test-unit test-ts test-crash test-script fuzz lint bench bench-cluster bench-scale clean cluster cluster-stop cluster-restart proto

all: build

# The version and commit `shardkeeper --version` prints and /metrics exports as
# shardkeeper_build_info; without git (a source tarball) the binary says "dev".
# Recursive (=) so that git runs only for the targets that build.
VERSION = $(shell git describe --tags --always --dirty 2>/dev/null)
COMMIT  = $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS = -X github.com/shardkeeper/shardkeeper/buildinfo.version=$(VERSION) \
           -X github.com/shardkeeper/shardkeeper/buildinfo.commit=$(COMMIT)

build:
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/shardkeeper ./cmd/shardkeeper

# A one-node server with embedded storage in ./data.
run: build
	./bin/shardkeeper serve --data-dir ./data

# The whole suite: lint, unit tests (race detector on the core), multi-process crash tests,
# the short chaos run, the cluster script against a real cluster, and a short fuzz run so the
# fuzz targets never rot.
test: lint test-unit test-crash test-script test-ts fuzz

test-unit:
	$(GO) test -race -count=1 $(RACE_PKGS)
	$(GO) test -count=1 ./api/... ./ops/... ./buildinfo/... ./ident/... ./node/... ./cmd/... ./bench/... ./arweave/... ./cid/... ./tlog/...
	$(GO) test -count=1 ./test/deploy/ ./test/guestbook/

# The TypeScript client (clients/typescript) against a real node with the fake NEAR and Arweave
# nodes, then the relay examples (examples/: Express in Node, a Worker in workerd through
# miniflare) relaying delegate actions signed by near-api-js. Needs Node >= 20 and npm.
test-ts: build
	@node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 20 ? 0 : 1)' 2>/dev/null && command -v npm >/dev/null || \
	  { echo "make test-ts needs Node.js >= 20 and npm (the TypeScript client and its examples)"; exit 1; }
	cd clients/typescript && npm ci --no-audit --no-fund && npm test
	cd examples && npm ci --no-audit --no-fund && npm test

test-crash:
	$(GO) test -count=1 -v ./test/crash/...
	$(GO) test -count=1 -short -v -timeout 15m ./test/chaos/

# scripts/cluster.sh against a real three-node cluster behind HAProxy (skipped, saying so,
# when haproxy is not installed).
test-script:
	$(GO) test -count=1 -v ./test/script/

fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzDecodeCommand -fuzztime=$(FUZZTIME) ./persistence
	$(GO) test -run='^$$' -fuzz=FuzzRequestDecoding -fuzztime=$(FUZZTIME) ./api
	$(GO) test -run='^$$' -fuzz=FuzzDecodeSignedTransaction -fuzztime=$(FUZZTIME) ./near
	$(GO) test -run='^$$' -fuzz=FuzzParseDataItem -fuzztime=$(FUZZTIME) ./arweave/ans104

lint:
	@out=$$(gofmt -l .); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	$(GO) test -count=1 ./test/layers/

# Go benchmarks of the runtime on real Raft + Pebble (one node), then the load benchmark
# (bench/cmd/skbench): a fresh one-node shardkeeper under the domain workloads at 1, 16, 64
# and 256 clients, and the nonce workload against Redis with appendfsync always; writes
# bench/results/latest.json. Flags via BENCH_FLAGS, e.g. make bench BENCH_FLAGS='--duration 2s'.
bench:
	$(GO) test -run='^$$' -bench=. -benchtime=3s ./actors/
	$(GO) build -o bin/skbench ./bench/cmd/skbench
	./bin/skbench $(BENCH_FLAGS)

# The load benchmark on three nodes: a fresh 3-node shardkeeper cluster (round robin over the
# nodes) and, on the nonce workload, a 3-member etcd cluster (Debian's etcd-server, installed
# with apt-get when root; default fsync) through its v3 JSON gateway; prints the
# shardkeeper/etcd ratios and adds the rows to bench/results/latest.json.
bench-cluster:
	$(GO) build -o bin/skbench ./bench/cmd/skbench
	./bin/skbench --nodes 3 $(BENCH_FLAGS)

# The scale-out benchmark: clusters of 3, 6 and 9 nodes grown online from 3 (default flags,
# --join only), each node capped at 15 % of a core by a cgroup when run as root (uncapped,
# saying so, otherwise); oracle pairs/s spread over every node and through the routing client,
# with clients in proportion to the nodes; medians of 3 rounds as ratios to 3 nodes.
bench-scale:
	$(GO) build -o bin/skbench ./bench/cmd/skbench
	./bin/skbench --scale 3,6,9 $(BENCH_FLAGS)

# Three local nodes behind HAProxy on 127.0.0.1:8080 (health-checked with /readyz).
cluster:
	scripts/cluster.sh start

cluster-stop:
	scripts/cluster.sh stop

# Restart one node of that cluster on its data, e.g. make cluster-restart NODE=n2.
NODE ?=
cluster-restart:
	@test -n "$(NODE)" || { echo "usage: make cluster-restart NODE=n2"; exit 2; }
	scripts/cluster.sh restart $(NODE)

# Regenerate protobuf code (needs protoc and protoc-gen-go; the output is committed).
proto:
	protoc --go_out=. --go_opt=paths=source_relative cluster/routepb/route.proto

clean:
	rm -rf bin

# The chaos suite (test/chaos): every fault against a three-node cluster under load, checked
# with porcupine, for CHAOS_SEEDS seeds. Network partitions need root and nft (Debian package
# nftables); without them those faults are skipped. The -short subset runs in make test.
CHAOS_SEEDS ?= 3
.PHONY: chaos
chaos:
	$(GO) test -count=1 -v -timeout 90m ./test/chaos/ -chaos.seeds=$(CHAOS_SEEDS)

# Regenerate near/testdata/vectors.json with near-api-js (needs Node and npm; the Go tests use
# the committed file and need neither). See near/testdata/gen/README.md.
# Regenerate arweave/testdata/vectors.json with arweave-js (needs Node and npm).
.PHONY: arweave-vectors
arweave-vectors:
	cd arweave/testdata/gen && npm ci && node gen.mjs

# Regenerate cid/testdata/vectors.json with canonicalize and multiformats (needs Node and npm).
.PHONY: cid-vectors
cid-vectors:
	cd cid/testdata/gen && npm ci && node gen.mjs

# arlocal and arweave-js, unmodified, against the Arweave client and the fake node: our
# transactions taken by arlocal and read back by arweave-js, arweave-js's taken by the fake.
# Needs Node and npm.
# ANS-104 data items and bundles (arweave/ans104) against arbundles, unmodified: its vectors
# regenerated (ans104-vectors), and what Go signs and bundles verified by it (ans104-crosscheck).
# Needs Node and npm; make test checks the committed vectors without them.
.PHONY: ans104-vectors ans104-crosscheck
ans104-vectors:
	cd arweave/ans104/testdata/gen && npm ci && node gen.mjs
ans104-crosscheck:
	cd arweave/ans104/testdata/gen && npm ci
	SHARDKEEPER_ARWEAVE_CROSSCHECK=1 $(GO) test -count=1 -run CrossCheck -v ./arweave/ans104

.PHONY: arweave-crosscheck
arweave-crosscheck:
	cd test/fakearweave/crosscheck && npm ci
	SHARDKEEPER_ARWEAVE_CROSSCHECK=1 $(GO) test -count=1 -run CrossCheck -v ./test/fakearweave ./services/chain

.PHONY: near-vectors
near-vectors:
	cd near/testdata/gen && npm ci && node gen.mjs

# near-api-js, unmodified, against the fake NEAR RPC (test/fakenear): its JsonRpcProvider
# queries, signs, sends and parses the fake's errors into its own typed errors. Needs Node and
# npm (installs the pinned near-api-js into test/fakenear/crosscheck/node_modules).
.PHONY: near-crosscheck
near-crosscheck:
	cd test/fakenear/crosscheck && npm ci
	SHARDKEEPER_NEAR_CROSSCHECK=1 $(GO) test -count=1 -run CrossCheck -v ./test/fakenear
