#!/bin/sh
# Builds the real control plane for tests/e2e from its Go modules (this
# directory's go.mod): etcd, kube-apiserver, kube-controller-manager, kubectl,
# and kube-proxy (the baseline of the benchmarks, bench/).
#
#   build.sh          build what is missing into the cache dir, one at a time
#   build.sh --node   also what a real node needs (tests/node, make conformance):
#                     kubelet, kube-scheduler, agnhost, coredns, ginkgo and
#                     the upstream e2e.test
#   build.sh --dir    print the cache dir and exit (the tests use this)
#
# The cache dir is keyed by go.mod, go.sum, the etcd main, the build flags
# and the Go version, so a dependency bump rebuilds and a rerun is instant.
# One binary at a time: kube-apiserver alone peaks at ~2.4 GB RSS on 2 cores.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export GOWORK=off

KUBE_VERSION=v1.37.2
KUBE_MAJOR=1
KUBE_MINOR=37
KUBE_COMMIT=0000000000000000000000000000000000000000
COREDNS_VERSION=v1.15.0
# The ginkgo CLI runs e2e.test on several processes (tests/node); the
# version of the library e2e.test is built with (go.sum).
GINKGO_VERSION=v2.32.0

# kube-apiserver and kube-controller-manager refuse to start without a
# version; set it the way hack/lib/version.sh does.
kldflags="-s -w"
for pkg in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
	kldflags="$kldflags -X $pkg.gitVersion=$KUBE_VERSION -X $pkg.gitMajor=$KUBE_MAJOR -X $pkg.gitMinor=$KUBE_MINOR"
	kldflags="$kldflags -X $pkg.gitCommit=$KUBE_COMMIT -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
# Everything that goes into a build; change "recipe" when the way of
# building changes in a way the rest does not show.
recipe="recipe=1 CGO_ENABLED=0 -trimpath -buildvcs=false $kldflags"

base=${SOCKLB_E2E_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/socklb-e2e}
key=$( { cat go.mod go.sum etcd/main.go; echo "$recipe"; go env GOVERSION; } | sha256sum | cut -c1-16)
dir=$base/$key

if [ "${1:-}" = "--dir" ]; then
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
# Two builds at once would double the peak memory: take turns.
if command -v flock >/dev/null; then
	exec 9>"$base/.lock"
	flock 9
fi

build() { # name package ldflags
	name=$1 pkg=$2 ldflags=$3
	if [ -x "$dir/$name" ]; then
		echo "e2e-tools: $name cached ($dir/$name)"
		return
	fi
	echo "e2e-tools: building $name ($pkg)"
	start=$(date +%s)
	CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$dir/$name.tmp" "$pkg"
	mv "$dir/$name.tmp" "$dir/$name"
	echo "e2e-tools: built $name in $(( $(date +%s) - start ))s"
}

build etcd ./etcd "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kldflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kldflags"
build kubectl k8s.io/kubernetes/cmd/kubectl "$kldflags"
build kube-proxy k8s.io/kubernetes/cmd/kube-proxy "$kldflags"
if [ "${1:-}" = "--node" ]; then
	build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kldflags"
	build kubelet k8s.io/kubernetes/cmd/kubelet "$kldflags"
	build agnhost k8s.io/kubernetes/test/images/agnhost "-s -w"
	# The Conntrack test's server image (tests/node/imageset.go).
	build regression-issue-74839 k8s.io/kubernetes/test/images/regression-issue-74839 "-s -w"
	# Cluster DNS: its own module, outside this go.mod (and the cache
	# key), so its version is kept beside it.
	if [ ! -x "$dir/coredns" ] || [ "$(cat "$dir/coredns.version" 2>/dev/null)" != "$COREDNS_VERSION" ]; then
		echo "e2e-tools: building coredns (github.com/coredns/coredns@$COREDNS_VERSION)"
		start=$(date +%s)
		CGO_ENABLED=0 GOBIN="$dir/coredns.bin" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$COREDNS_VERSION"
		mv "$dir/coredns.bin/coredns" "$dir/coredns" && rmdir "$dir/coredns.bin"
		echo "$COREDNS_VERSION" > "$dir/coredns.version"
		echo "e2e-tools: built coredns in $(( $(date +%s) - start ))s"
	fi
	# ginkgo's CLI: its own module too, at the library's version.
	if [ ! -x "$dir/ginkgo" ] || [ "$(cat "$dir/ginkgo.version" 2>/dev/null)" != "$GINKGO_VERSION" ]; then
		echo "e2e-tools: building ginkgo (github.com/onsi/ginkgo/v2/ginkgo@$GINKGO_VERSION)"
		start=$(date +%s)
		CGO_ENABLED=0 GOBIN="$dir/ginkgo.bin" go install -trimpath -ldflags "-s -w" "github.com/onsi/ginkgo/v2/ginkgo@$GINKGO_VERSION"
		mv "$dir/ginkgo.bin/ginkgo" "$dir/ginkgo" && rmdir "$dir/ginkgo.bin"
		echo "$GINKGO_VERSION" > "$dir/ginkgo.version"
		echo "e2e-tools: built ginkgo in $(( $(date +%s) - start ))s"
	fi
	# The upstream conformance suite is a test binary.
	if [ ! -x "$dir/e2e.test" ]; then
		echo "e2e-tools: building e2e.test (k8s.io/kubernetes/test/e2e)"
		start=$(date +%s)
		CGO_ENABLED=0 go test -c -trimpath -buildvcs=false -ldflags "$kldflags" -o "$dir/e2e.test.tmp" k8s.io/kubernetes/test/e2e
		mv "$dir/e2e.test.tmp" "$dir/e2e.test"
		echo "e2e-tools: built e2e.test in $(( $(date +%s) - start ))s"
	fi
fi
echo "e2e-tools: $dir"
