# socklb. Targets that load BPF or build network namespaces need root; they
# never attach to the machine's root cgroup and clean up after themselves.
GO      ?= go
BIN     := bin/socklb
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
FUZZTIME ?= 10s

.PHONY: all build generate check-generated test unit fuzz demo vet clean

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

# Every layer: unit tests, BPF_PROG_TEST_RUN tests, netns integration tests.
# As non-root the kernel-facing tests skip and say why; CI runs as root.
test: vet fuzz
	$(GO) test -count=1 -timeout 20m ./...

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
