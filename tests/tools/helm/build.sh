#!/bin/sh
# Builds helm (this directory's go.mod: helm.sh/helm/v3) for the chart test.
#
#   build.sh        build it into the cache dir unless it is there
#   build.sh --bin  print the binary's path and exit (the tests use this)
#
# Cached under ${XDG_CACHE_HOME:-~/.cache}/socklb-tools/<key>, the key made
# of go.mod, go.sum, the build flags and the Go version: a version bump
# rebuilds, a rerun is instant. Its own module, so that the control plane's
# cache key (tests/e2e/tools) does not change with helm.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
cd "$here"
export GOWORK=off

recipe="recipe=1 CGO_ENABLED=0 -trimpath -buildvcs=false -ldflags=-s -w"
base=${XDG_CACHE_HOME:-$HOME/.cache}/socklb-tools
key=$( { cat go.mod go.sum; echo "$recipe"; go env GOVERSION; } | sha256sum | cut -c1-16)
bin=$base/$key/helm

if [ "${1:-}" = "--bin" ]; then
	echo "$bin"
	exit 0
fi
if [ -x "$bin" ]; then
	echo "helm-tool: cached ($bin)"
	exit 0
fi
mkdir -p "$base/$key"
echo "helm-tool: building helm.sh/helm/v3/cmd/helm"
start=$(date +%s)
CGO_ENABLED=0 go build -trimpath -buildvcs=false -ldflags="-s -w" -o "$bin.tmp" helm.sh/helm/v3/cmd/helm
mv "$bin.tmp" "$bin"
echo "helm-tool: built $bin in $(( $(date +%s) - start ))s"
