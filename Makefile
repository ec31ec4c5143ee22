# socklb. Targets that load BPF or build network namespaces need root; they
# never attach to the machine's root cgroup and clean up after themselves.
GO      ?= go
BIN     := bin/socklb
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# The commit, for `socklb version` and socklb_build_info: the image builds
# record no VCS stamp, so they are given it (-X main.revision).
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# Fuzzing budgets are counts of inputs, not durations: Go 1.26's fuzz
# coordinator can fail a -fuzztime=<duration> run with "context deadline
# exceeded" and no failing input when its workers are starved at the
# deadline (golang/go#75804, fixed in Go 1.27); a count has no deadline.
# 60000 inputs take 5-15 s each here.
FUZZTIME ?= 60000x

.PHONY: all build image generate check-generated test osdeps-test osdeps-demo mutants unit fuzz demo vet clean e2e e2e-tools helm-tool kubectl-socklb bench bench-smoke bench-external bench-capacity bench-informer bench-report bench-ci conformance conformance-tools node-tests

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/socklb

# The kubectl plugin: put bin/kubectl-socklb on $PATH, then `kubectl socklb status`.
kubectl-socklb:
	CGO_ENABLED=0 $(GO) build -o bin/kubectl-socklb ./cmd/kubectl-socklb

# Rebuild the BPF objects and their Go bindings (needs clang, llvm-strip,
# libbpf-dev). The output is committed so `go build` needs no clang.
# socklb's image without a container engine: an OCI layout tarball with
# amd64 and arm64 images under one index, reproducible from the same commit.
# Load it with `ctr -n k8s.io images import`, or push it with
# `skopeo copy oci-archive:bin/socklb-image.tar docker://REGISTRY/socklb:TAG`.
IMAGE ?= localhost/socklb:$(VERSION)
image:
	$(GO) run ./deploy/image --out bin/socklb-image.tar --name $(IMAGE) --version $(VERSION) --revision "$(REVISION)"

generate:
	$(GO) generate ./bpf/...

# CI: the committed objects must be what the committed C compiles to.
check-generated: generate
	@git diff --exit-code --stat -- bpf/ || { echo "bpf/ is stale: run 'make generate' and commit the result"; exit 1; }

vet:
	$(GO) vet ./...
	$(GO) vet -tags node ./tests/node/...

# Every layer: unit tests, BPF_PROG_TEST_RUN tests, netns integration tests,
# and e2e against a real control plane (run once, by the e2e target).
# As non-root the kernel-facing tests skip and say why; CI runs as root.
# tests/integration runs alone, after the other packages: its connect
# loops and agents get the machine to themselves (its tests under load
# compare a loop with itself, a window against an equal one before the
# event, not with figures of this machine's speed).
test: osdeps-test vet mutants fuzz e2e bench-ci
	$(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v -e /tests/e2e -e /tests/integration)
	$(GO) test -count=1 -timeout 20m ./tests/integration/

# etcd, kube-apiserver, kube-controller-manager, kubectl and kube-proxy (for
# the benchmarks) built from their Go modules (tests/e2e/tools), one at a time, cached under
# ${XDG_CACHE_HOME:-~/.cache}/socklb-e2e: ~15 min cold, instant after.
e2e-tools:
	sh tests/e2e/tools/build.sh

# helm, for the chart test (charts/socklb against the e2e API server), from
# its own module (tests/tools/helm) so the control plane's cache key stays;
# cached under ${XDG_CACHE_HOME:-~/.cache}/socklb-tools: about 6 CPU-minutes
# cold (measured: 4m39s user + 1m34s sys), instant after.
helm-tool:
	sh tests/tools/helm/build.sh

# The agent against that control plane on 127.0.0.1, pods in a netns lab.
E2E_TIMEOUT ?= 30m
e2e: e2e-tools helm-tool
	$(GO) test -count=1 -v -timeout $(E2E_TIMEOUT) ./tests/e2e/...

# The OS commands each target runs, before any long step: installed with
# apt-get as root on Debian, else named at once. make test also refuses a
# tracked file over 1 MB that is not listed test data.
osdeps-test:
	sh tests/tools/osdeps.sh test
	sh tests/tools/bigfiles.sh
osdeps-demo:
	sh tests/tools/osdeps.sh demo

# Named mutations of pkg/servicemap, each in a temporary copy: every one
# must turn the package's tests red (tests/tools/mutants; under a minute).
mutants:
	$(GO) run ./tests/tools/mutants

unit:
	$(GO) test -count=1 ./pkg/servicemap/... ./pkg/source/... ./pkg/agent/...

# Each fuzzer for a short, bounded time, so the harnesses cannot rot.
fuzz:
	$(GO) test -run='^$$' -fuzz='^FuzzBuild$$' -fuzztime=$(FUZZTIME) ./pkg/servicemap/
	$(GO) test -run='^$$' -fuzz='^FuzzDecode$$' -fuzztime=$(FUZZTIME) ./pkg/source/manifests/

# socklb's main job on its embedded default, no cluster needed: a lab of pod
# namespaces, the agent on examples/, a client, `socklb inspect`, cleanup.
demo: osdeps-demo build
	$(GO) run ./tests/demo --socklb $(BIN) --manifests examples

clean:
	rm -rf bin

# Benchmarks: socklb side by side with the real kube-proxy (iptables and
# nftables modes, built into the tools directory with the control plane)
# and with direct pod IPs, every dataplane in its own netns lab, all fed by
# one real API server. Needs root, iptables, nftables and socat. Writes
# $(BENCH_OUT)/$(BENCH_NAME)/, then every page with bench-report. Sizes,
# rounds and changes are flags: the smoke run and the full run share the
# code. Figures are reported, never asserted.
BENCH_SIZES   ?= 1000,10000,30000,100000
BENCH_ROUNDS  ?= 5
BENCH_CHANGES ?= 50
# A dataplane that has not programmed all Services by then gets null
# figures, and is not attempted at the larger sizes of the run: long
# enough for kube-proxy's nftables mode at 30 000 Services on 2 CPUs (it
# took 296 s at 10 000), so the run records its figure or when it gave up.
BENCH_SYNC_TIMEOUT ?= 20m
# The capacity case of #22 after the sizes (socklb-bench --capacity; 0:
# none): 100 000 Services of 10 endpoints and 2 ports, every tenth a
# NodePort, the Node with 4 addresses, socklb on its default maps.
BENCH_CAPACITY ?= 100000
# One endpoint change per second for this long after the programming-latency
# changes, then the agent's RSS and CPU again (10 minutes: 600 changes, enough
# for a cost that grows with each change to show).
BENCH_CHURN   ?= 10m
BENCH_FLAGS   ?=
# The run's name: it writes $(BENCH_OUT)/<name>/ (results.json with the git
# commit, profiles/, its own BENCHMARKS.md and plots); empty: n<sizes>.
BENCH_NAME    ?=
# The named runs, one directory each; BENCHMARKS.md is made from all of them.
BENCH_OUT     ?= bench/results
BENCH_MD      ?= BENCHMARKS.md

bench: e2e-tools
	$(GO) run ./bench/cmd/socklb-bench --sizes $(BENCH_SIZES) --rounds $(BENCH_ROUNDS) --changes $(BENCH_CHANGES) --connects 5000 --udp 10000 --sync-timeout $(BENCH_SYNC_TIMEOUT) --churn $(BENCH_CHURN) --capacity $(BENCH_CAPACITY) --out $(BENCH_OUT) --name "$(BENCH_NAME)" $(BENCH_FLAGS)
	$(MAKE) bench-report

# The capacity case alone (a few minutes at 100 000): its own named run,
# capacity-n<N> unless BENCH_NAME says otherwise.
bench-capacity: e2e-tools
	$(GO) run ./bench/cmd/socklb-bench --sizes "" --capacity $(BENCH_CAPACITY) --sync-timeout $(BENCH_SYNC_TIMEOUT) --out $(BENCH_OUT) --name "$(BENCH_NAME)" $(BENCH_FLAGS)
	$(MAKE) bench-report

# N=100, one round, a few changes, and the capacity case at N=100: a few
# minutes once the tools are built.
# By hand it writes bench/results/smoke and BENCHMARKS.md; `make test` runs
# it through bench-ci, into a scratch directory, so that the committed
# results stay those of the named runs.
bench-smoke: e2e-tools
	$(GO) run ./bench/cmd/socklb-bench --sizes 100 --rounds 1 --changes 5 --churn 5s --connects 1000 --udp 2000 --capacity 100 --out $(BENCH_OUT) --name "$(or $(BENCH_NAME),smoke)" $(BENCH_FLAGS)
	$(MAKE) bench-report

# Clients on another machine through a NodePort (socklb-bench --scenario
# external): per dataplane a multi-node lab (two nodes on an underlay
# bridge, a pod each, an outside machine), the dataplane on both nodes
# (socklb --packet-lb, or kube-proxy in the node's namespace), the outside
# connecting to node 1's NodePort with the backend on node 1 (DNAT) or
# node 2 (DNAT+SNAT), and straight to the pods for the baseline. N counts
# the Services, fillers included (kube-proxy iptables matches a NodePort
# after every ClusterIP rule). A few minutes at these sizes.
BENCH_EXTERNAL_SIZES  ?= 100,1000
BENCH_EXTERNAL_ROUNDS ?= 5
BENCH_EXTERNAL_NAME   ?= external-n100-1k
bench-external: e2e-tools
	$(GO) run ./bench/cmd/socklb-bench --scenario external --sizes $(BENCH_EXTERNAL_SIZES) --rounds $(BENCH_EXTERNAL_ROUNDS) --connects 5000 --udp 10000 --sync-timeout $(BENCH_SYNC_TIMEOUT) --out $(BENCH_OUT) --name "$(BENCH_EXTERNAL_NAME)" $(BENCH_FLAGS)
	$(MAKE) bench-report

# The heap the informer caches keep per Service and slice, decoded as they
# arrive and as the transform leaves them, in one process
# (BenchmarkInformerCacheBytes): no cluster, seconds. The output goes to
# bench/results/informer/<UTC time>-<commit>.txt, as go test printed it.
bench-informer:
	mkdir -p bench/results/informer
	out=bench/results/informer/$$(date -u +%Y%m%dT%H%M%SZ)-$$(git rev-parse --short=12 HEAD)$$(git diff --quiet HEAD || echo -dirty).txt; \
	{ git log -1 --format='commit %H %s'; $(GO) test -count=1 -run '^$$' -bench BenchmarkInformerCacheBytes -benchtime 3x ./pkg/source/kube/; } > $$out && cat $$out

# Every run directory under $(BENCH_OUT) (<name>/results.json) gets its own
# BENCHMARKS.md and plots; $(BENCH_MD) is all of them, newest first, and
# bench/NOTES.md. Nothing is merged across runs. The plotting library lives
# in bench/report's own module, not in the product's go.mod.
bench-report:
	cd bench/report && GOWORK=off $(GO) run . -results $(abspath $(BENCH_OUT)) -md $(abspath $(BENCH_MD)) -notes $(abspath bench/NOTES.md)

BENCH_CI_DIR ?= $(or $(TMPDIR),/tmp)/socklb-bench-ci
bench-ci:
	cd bench/report && GOWORK=off $(GO) test -count=1 .
	rm -rf $(BENCH_CI_DIR)
	$(MAKE) bench-smoke BENCH_OUT=$(BENCH_CI_DIR) BENCH_MD=$(BENCH_CI_DIR)/BENCHMARKS.md
	rm -rf $(BENCH_CI_DIR)

# Real nodes on this machine (tests/node): NODES of them (3 by default; 1
# works), each in a network and mount namespace of its own with Debian's
# containerd, runc and CNI bridge, kubelet v1.37.2 on an ext4 disk image and
# a child cgroup of one fresh child of the cgroup v2 tree, routed to each
# other over an underlay bridge in a namespace the harness owns, beside the
# control plane (with kube-scheduler) and an "outside" namespace; nothing
# routes off the machine. The upstream suite runs twice, with kube-proxy
# v1.37.2 (iptables, the control) on every node and with socklb installed
# from deploy/ (kubectl apply -k); socklb's own real-node tests run in the
# second. Each run writes a new directory; the committed results under
# tests/node/results are replaced only when both runs of the pair
# completed, and CONFORMANCE.md is made from that pair. Needs root,
# containerd, runc, containernetworking-plugins, debootstrap,
# busybox-static, e2fsprogs, bpftool.
NODES ?= 3
CONFORMANCE_FOCUS ?=
CONFORMANCE_PROCS ?= 4
CONFORMANCE_TIMEOUT ?= 6h
CONFORMANCE_OUT ?= tests/node/results
CONFORMANCE_NEW ?= $(CONFORMANCE_OUT)/new-$(shell date -u +%Y%m%dT%H%M%S)
CONFORMANCE_ARGS = -nodes=$(NODES) -procs=$(CONFORMANCE_PROCS) $(if $(CONFORMANCE_FOCUS),-focus='$(CONFORMANCE_FOCUS)')
conformance-tools:
	sh tests/e2e/tools/build.sh --node

# socklb's own real-node tests alone, without the upstream suite (-run
# leaves TestConformance out; TestMain still starts the node and installs
# the proxy): a third of a conformance run. NODE_PROXY=socklb-helm installs
# the chart (helm install; TestHelmUpgradeUnderLoad; helm uninstall and the
# checks that nothing is left), NODE_PROXY=socklb deploy/ with kustomize.
NODE_PROXY ?= socklb-helm
NODE_TESTS ?= TestAgentRunsUnprivileged|TestHelmTest|TestPodToClusterIP|TestInspectInAgentPod|TestConnectedUDPMovedOffDeletedBackend|TestAgentPodRecreatedUnderLoad|TestKubectlPlugin|TestHelmUpgradeUnderLoad|TestRemoteOnlyEndpoint|TestInternalTrafficPolicyLocal|TestExternalTrafficPolicyLocal
node-tests: conformance-tools helm-tool
	$(GO) test -tags node -count=1 -v -timeout 1h ./tests/node/ -run '$(NODE_TESTS)' -args -proxy=$(NODE_PROXY) -nodes=$(NODES)

conformance: conformance-tools
	$(GO) test -tags node -count=1 -v -timeout $(CONFORMANCE_TIMEOUT) ./tests/node/ -run 'TestConformance' \
		-args -proxy=kube-proxy -report-dir=$(abspath $(CONFORMANCE_NEW))/kube-proxy $(CONFORMANCE_ARGS)
	# socklb's own tests run after the suite in the same cluster; their
	# verdict is kept until the pair is promoted and reported.
	$(GO) test -tags node -count=1 -v -timeout $(CONFORMANCE_TIMEOUT) ./tests/node/ \
		-args -proxy=socklb -report-dir=$(abspath $(CONFORMANCE_NEW))/socklb $(CONFORMANCE_ARGS); \
		echo $$? > $(CONFORMANCE_OUT)/.socklb-tests.status
	sh tests/node/promote.sh $(CONFORMANCE_NEW) $(CONFORMANCE_OUT)
	$(GO) run ./tests/node/report -control $(CONFORMANCE_OUT)/kube-proxy -socklb $(CONFORMANCE_OUT)/socklb -out CONFORMANCE.md
	@s=$$(cat $(CONFORMANCE_OUT)/.socklb-tests.status); rm -f $(CONFORMANCE_OUT)/.socklb-tests.status; \
		test "$$s" = 0 || { echo "socklb's own real-node tests failed (exit $$s)"; exit 1; }
