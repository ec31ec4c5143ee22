package servicemap

import "slices"

// Which sockets outlive a change. kube-proxy clears the conntrack entries of
// a Service's UDP flows whose endpoint is not among its serving endpoints
// (pkg/proxy/conntrack/cleanup.go, CleanStaleEntries), and nothing else: a
// flow stays on an endpoint that starts terminating while still serving, or
// that a traffic policy or topology no longer offers. A Service with no
// serving endpoint at all clears them all. The datapath destroys a socket
// only once its endpoint is neither a backend nor lingering anywhere.

// servingBackends is the candidates that serve (ready ones are serving).
func servingBackends(candidates []endpoint) []Backend {
	var out []endpoint
	for _, e := range candidates {
		if e.serving || e.ready {
			out = append(out, e)
		}
	}
	return toBackends(out)
}

// lingering is serving minus backends; both are sorted.
func lingering(serving, backends []Backend) []Backend {
	var out []Backend
	for _, b := range serving {
		if _, found := slices.BinarySearchFunc(backends, b, compareBackend); !found {
			out = append(out, b)
		}
	}
	return out
}
