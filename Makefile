# socklb. Targets that load BPF or build network namespaces need root; they
# never attach to the machine's root cgroup and clean up after themselves.
GO      ?= go
BIN     := bin/socklb
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FUZZTIME ?= 10s

.PHONY: all build generate check-generated test unit fuzz demo vet clean e2e e2e-tools

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/socklb

# Rebuild the BPF objects and their Go bindings (needs clang, llvm-strip,
# libbpf-dev). The output is committed so `go build` needs no clang.
generate:
	$(GO) generate ./bpf/...

# CI: the committed objects must be what the committed C compiles to.
check-generated: generate
	@git diff --exit-code --stat -- bpf/ || { echo "bpf/ is stale: run 'make generate' and commit the result"; exit 1; }

vet:
	$(GO) vet ./...

# Every layer: unit tests, BPF_PROG_TEST_RUN tests, netns integration tests,
# and e2e against a real control plane (run once, by the e2e target).
# As non-root the kernel-facing tests skip and say why; CI runs as root.
test: vet fuzz e2e
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v /tests/e2e)

# etcd, kube-apiserver, kube-controller-manager and kubectl built from their
# Go modules (tests/e2e/tools), one at a time, cached under
# ${XDG_CACHE_HOME:-~/.cache}/socklb-e2e: ~15 min cold, instant after.
e2e-tools:
	sh tests/e2e/tools/build.sh

# The agent against that control plane on 127.0.0.1, pods in a netns lab.
E2E_TIMEOUT ?= 30m
e2e: e2e-tools
	$(GO) test -count=1 -v -timeout $(E2E_TIMEOUT) ./tests/e2e/...

unit:
	$(GO) test -count=1 ./pkg/servicemap/... ./pkg/source/... ./pkg/agent/...

# Each fuzzer for a short, bounded time, so the harnesses cannot rot.
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzBuild$$' -fuzztime=$(FUZZTIME) ./pkg/servicemap/
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZTIME) ./pkg/source/manifests/

# socklb's main job on its embedded default, no cluster needed: a lab of pod
# namespaces, the agent on examples/, a client, `socklb inspect`, cleanup.
demo: build
	$(GO) run ./tests/demo --socklb $(BIN) --manifests examples

clean:
	rm -rf bin
