// Package kube is the source that follows a live API server with client-go
// shared informers: Services and EndpointSlices, minus those kube-proxy
// would leave to another proxy (label service.kubernetes.io/service-proxy-name),
// and the one Node the agent runs on. Everything else kube-proxy skips
// (headless Services, ...) is skipped by servicemap, so both sources agree.
//
// Problems: failed lists and watches (forbidden, unreachable API server)
// are reported as servicemap.Problem{Kind: "Watch", Object.Name: resource},
// in addition to client-go's own logging; the informers keep retrying.
package kube
