package model

import corev1 "k8s.io/api/core/v1"

// LabelServiceProxyName hands a Service to another proxy: kube-proxy's
// informer skips such Services (cmd/kube-proxy/app/server.go), and so do the
// kube source's selector and servicemap (for sources that cannot select).
// It lives in k8s.io/kubernetes/pkg/proxy/apis, which we do not import.
const LabelServiceProxyName = "service.kubernetes.io/service-proxy-name"

// LabelHeadless marks the EndpointSlices of a headless Service; kube-proxy
// does not read them. On a Service it means nothing: clusterIP None does.
const LabelHeadless = corev1.IsHeadlessService
