// Package kube is the source that follows a live API server with client-go
// shared informers, selecting as kube-proxy's do: Services without the
// service.kubernetes.io/service-proxy-name label and with a clusterIP other
// than None, EndpointSlices without the service.kubernetes.io/headless
// label, and the one Node the agent runs on. servicemap applies the same
// rules again, so the manifests source, which has no selectors, agrees.
//
// Problems: failed lists and watches (forbidden, unreachable API server)
// are reported as model.Problem{Kind: model.KindWatch, Object.Name: resource},
// in addition to client-go's own logging; the informers keep retrying.
package kube
