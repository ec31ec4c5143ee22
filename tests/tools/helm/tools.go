//go:build tools

// Package helm pins the helm version that build.sh builds.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
