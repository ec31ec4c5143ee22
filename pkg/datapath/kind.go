package datapath

import (
	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// kinds pairs servicemap's frontend kinds with svc_kind of bpf/c/maps.h.
// servicemap is pure Go and knows nothing of bpf/, so this is the one
// place they meet; TestKinds checks that it pairs every value of both.
var kinds = []struct {
	sm servicemap.Kind
	m  socklbbpf.SocklbSvcKind
}{
	{servicemap.KindClusterIP, socklbbpf.SocklbSvcKindSVC_KIND_CLUSTER_IP},
	{servicemap.KindNodePort, socklbbpf.SocklbSvcKindSVC_KIND_NODE_PORT},
	{servicemap.KindExternalIP, socklbbpf.SocklbSvcKindSVC_KIND_EXTERNAL_IP},
	{servicemap.KindLoadBalancer, socklbbpf.SocklbSvcKindSVC_KIND_LOAD_BALANCER},
}

func kindToMap(k servicemap.Kind) socklbbpf.SocklbSvcKind {
	for _, p := range kinds {
		if p.sm == k {
			return p.m
		}
	}
	// Unreachable while TestKinds passes; the value still round-trips.
	return socklbbpf.SocklbSvcKind(k)
}

func kindFromMap(k socklbbpf.SocklbSvcKind) servicemap.Kind {
	for _, p := range kinds {
		if p.m == k {
			return p.sm
		}
	}
	// A kind a newer agent wrote: shown by number, as before this table.
	return servicemap.Kind(k)
}
