# The two set-up commands of the README are `make example` and `make test`.
# Both install what they need (Debian packages, a private containerd) first.

GO      ?= go
# Tools installed by scripts/*.sh (cosign, crane) land in GOPATH/bin.
export PATH := $(shell $(GO) env GOPATH)/bin:$(PATH)
BIN     := bin/foundry
# A private containerd for tests and examples; see scripts/containerd.sh.
export FOUNDRY_CONTAINERD_ADDRESS ?= /run/foundry-containerd/containerd.sock

.PHONY: all build deps test-tools test test-unit fuzz bench example example-self-pin vet clean

all: build

build:
	$(GO) build -o $(BIN) ./cmd/foundry

# deps installs the Debian packages Foundry's sandboxes and tests use and starts containerd.
deps:
	bash scripts/deps.sh

# test-tools installs the pinned interop tools the tests drive (cosign, crane, and the MCP
# Inspector, conformance suite and TypeScript SDK from npm into .test-tools/).
test-tools:
	bash scripts/cosign.sh
	bash scripts/crane.sh
	bash scripts/mcp-inspector.sh
	bash scripts/mcp-conformance.sh
	bash scripts/mcp-sdk.sh

# vet also fails on a tracked Go file gofmt would change, and on a staticcheck finding (the
# version scripts/staticcheck.sh pins; a deliberate exception is a //lint:ignore with its reason).
vet:
	$(GO) vet ./...
	cd devtemporal && $(GO) vet ./...
	sc=$$(bash scripts/staticcheck.sh) && $$sc ./... && cd devtemporal && $$sc ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

# test runs the whole suite: vet, unit and end-to-end tests, and each fuzz target briefly.
test: deps test-tools vet build
	# -p 1: packages share one containerd and one runc root; one at a time keeps them apart.
	$(GO) test -p 1 -count=1 -timeout 45m ./...
	# The Temporal engine against a real Temporal server, in its own module (devtemporal/:
	# the server stays out of the foundry binary); its first build takes several minutes.
	cd devtemporal && $(GO) test -count=1 -timeout 20m ./...
	bash scripts/fuzz.sh 10s

fuzz:
	bash scripts/fuzz.sh 60s

bench: deps build test-tools
	$(GO) run ./bench/plan
	# The no-op apply needs a populated cache, not a sandboxed one: filling 10,000 steps
	# with the local executor takes ~1.5 min instead of ~15 (the steps are the bench's own),
	# and the no-op applies then run with it too (a sandboxed apply reruns local results).
	# The 41-step chain is also built in BuildKit v0.34.2 (scripts/buildkit.sh builds it once,
	# ~2.5 min), interleaved with Foundry's, for issue 18's ratios; no BuildKit, no bench.
	bk=$$(bash scripts/buildkit.sh) && $(GO) run ./bench/apply -foundry $(BIN) -fill-executor local -buildkit "$$bk"
	# Issue 19: a reconstruction round's overhead, its wall time less its builder's and its
	# cases' own, with each sandboxed executor (examples/reconstruct, fresh state per apply).
	$(GO) run ./bench/reconstruct -foundry $(BIN) -executor containerd
	$(GO) run ./bench/reconstruct -foundry $(BIN) -executor runc
	# Issue 33: the blueprint's comparison on examples/laboratory, from clean, identical seeds:
	# the tool preinstalled, missing and reconstructed, missing with reconstruction disabled
	# (wall time, probes, candidates, outcome; 2 applies of each, interleaved, ~15 min).
	$(GO) run ./bench/laboratory -foundry $(BIN) -executor runc
	# Issue 20: a call of int-sort as an MCP tools/call and as an HTTP POST, each against a
	# direct sandboxed run of its entrypoint by the same executor, interleaved in one run
	# (examples/int-sort applied once in a fresh copy; goal: each <= 1.2x the direct run);
	# issue 35 adds the same tools/call over HTTP with a bearer token (foundry mcp -http).
	$(GO) run ./bench/invoke -foundry $(BIN) -executor runc
	$(GO) run ./bench/invoke -foundry $(BIN) -executor containerd
	# Issue 32: crane (go-containerregistry, vendored) built cold, no-op and after a one-line
	# change, GOCACHE on a cache volume, in Foundry (containerd, runc) and in BuildKit with a
	# cache mount, interleaved (3 rounds: ~30 min on 2 cores; GOBUILD_ROUNDS to change).
	bk=$$(bash scripts/buildkit.sh) && $(GO) run ./bench/gobuild -foundry $(BIN) -buildkit "$$bk" -rounds $${GOBUILD_ROUNDS:-3}
	bash scripts/bench.sh
	$(GO) run ./bench/registry
	# Issue 22: 200 sleep-bound steps on 1, 2 and 4 Temporal workers against the embedded
	# engine, and the Temporal path's per-step overhead (a Temporal server in process).
	cd devtemporal && $(GO) run ./cmd/bench-temporal -foundry ../$(BIN)

# example runs examples/hello, greeter, int-sort, matrix, reconstruct, laboratory, scores, fetch and self end to end.
example: deps build
	cd examples/hello && ../../$(BIN) validate && ../../$(BIN) plan && \
	  ../../$(BIN) apply -auto-approve -progress plain && \
	  ../../$(BIN) output step.report /out/report.txt
	cd examples/greeter && ../../$(BIN) apply -auto-approve -progress plain && \
	  ../../$(BIN) plan && ../../$(BIN) capabilities
	cd examples/int-sort && ../../$(BIN) apply -auto-approve -progress plain && \
	  ../../$(BIN) plan && ../../$(BIN) capabilities
	cd examples/matrix && ../../$(BIN) apply -auto-approve -progress plain && ../../$(BIN) plan
	# reconstruct/reuse pins what reconstruct admitted, from its registry, under its key;
	# plan -detailed-exitcode then fails if anything would run, be built or reconstructed.
	cd examples/reconstruct && ../../$(BIN) apply -auto-approve -progress plain && \
	  ../../$(BIN) output step.sort /out/sorted.json && ../../$(BIN) jobs
	cd examples/reconstruct/reuse && \
	  ../../../$(BIN) plan -trust-key ../.foundry/keys/signing.pub && \
	  ../../../$(BIN) apply -auto-approve -progress plain -trust-key ../.foundry/keys/signing.pub && \
	  ../../../$(BIN) output step.sort /out/sorted.json && \
	  ../../../$(BIN) plan -detailed-exitcode -trust-key ../.foundry/keys/signing.pub
	# laboratory: capability.counts reconstructed from a reference (busybox uniq -c, run in
	# sandboxes of its own): round 1 rejected on a generated sealed batch with a shrunk
	# counterexample, round 2 admitted on a fresh one; then step.tally runs.
	cd examples/laboratory && ../../$(BIN) apply -auto-approve -progress plain && \
	  ../../$(BIN) output step.tally /out/tally.json && ../../$(BIN) jobs show counts
	# scores: int-sort admitted, the service accepted across a restart, then delivered to
	# the directory the operator's grants file (operator/grants.hcl) allows; the release
	# apply names is verified (receipt, manifest, files, acceptance evidence).
	cd examples/scores && mkdir -p .foundry && \
	  ../../$(BIN) apply -auto-approve -progress plain -grants operator/grants.hcl | \
	    sed -n -e p -e 's/^Delivered product.scores to dir:\(.*\)\.$$/\1/w .foundry/release' && \
	  rel=$$(cat .foundry/release) && test -n "$$rel" && \
	  ls -l $$(dirname $$rel) $$rel/files/srv && ../../$(BIN) verify -key .foundry/keys/signing.pub $$rel
	# fetch: gojq from the module proxy, fetched by a fixed-output step through the egress
	# broker and built offline. The proxy is the operator's (go env GOPROXY): its grant and
	# variables are made into .foundry/operator, never into the project's files.
	cd examples/fetch && sh operator/from-environment.sh .foundry/operator && \
	  ../../$(BIN) apply -auto-approve -progress plain -grants .foundry/operator/grants.hcl \
	    -var-file .foundry/operator/proxy.vars && \
	  ../../$(BIN) output step.smoke /out/result.json
	# self: Foundry builds Foundry from this checkout (-var repo), its modules fetched by a
	# fixed-output step through the broker, unit-tested and smoke-run as checks; then
	# -rebuild checks the binary is bit for bit reproducible ("reproduced bit for bit: 1
	# file, /out/foundry sha256:…"), the binary is copied out and run, and verify must show
	# the signed rebuild evidence (PASS reproduced). It takes many minutes (cold: module
	# fetch, two builds without cache, the tests; ~20-30 on a loaded 2-core machine); a
	# second apply finds all cached.
	cd examples/self && sh ../fetch/operator/from-environment.sh .foundry/operator && \
	  ../../$(BIN) apply -auto-approve -progress plain -var repo=$(CURDIR) \
	    -grants .foundry/operator/grants.hcl -var-file .foundry/operator/proxy.vars && \
	  ../../$(BIN) apply -auto-approve -progress plain -var repo=$(CURDIR) \
	    -grants .foundry/operator/grants.hcl -var-file .foundry/operator/proxy.vars \
	    -rebuild product.foundry.step.build && \
	  ../../$(BIN) output product.foundry.step.build && rm -rf .foundry/foundry && \
	  ../../$(BIN) output -o .foundry/foundry product.foundry.step.build /out/foundry && \
	  chmod +x .foundry/foundry && .foundry/foundry version && \
	  ../../$(BIN) verify -attestations .foundry/attestations .foundry/foundry >.foundry/verify.txt && \
	  grep '^  PASS reproduced: reproduced independently, without caches' .foundry/verify.txt

# example-self-pin re-pins examples/self's module fetch after go.mod or go.sum changed
# (TestExampleSelf fails until it is run): it needs the module proxy go env GOPROXY names.
example-self-pin: deps build
	FOUNDRY=$(CURDIR)/$(BIN) sh examples/self/pin.sh

clean:
	rm -rf bin
