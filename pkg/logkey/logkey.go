// Package logkey names the objects socklb's log lines are about, under the
// keys kube-proxy uses ("service", "endpointSlice", "node") and socklb's
// own ("frontend", "map"), so one query finds every line about a Service,
// a frontend or a map whichever package wrote it. It only builds slog
// attributes.
package logkey

import (
	"bytes"
	"fmt"
	"log/slog"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Service is "service" as kube-proxy's klog.KObj(svc) writes it:
// "ns/name" in text, {"name","namespace"} in JSON.
func Service(nn types.NamespacedName) slog.Attr { return slog.Any("service", ref(nn)) }

// EndpointSlice is "endpointSlice", as kube-proxy's change tracker writes it.
func EndpointSlice(nn types.NamespacedName) slog.Attr { return slog.Any("endpointSlice", ref(nn)) }

// Node is "node".
func Node(name string) slog.Attr { return slog.Any("node", ref(types.NamespacedName{Name: name})) }

// Frontend is "frontend": address:port/protocol, as socklb inspect prints it.
func Frontend(k fmt.Stringer) slog.Attr { return slog.String("frontend", k.String()) }

// Map is "map": a BPF map's name, as bpftool and the pin directory show it.
func Map(name string) slog.Attr { return slog.String("map", name) }

// objectRef is klog.ObjectRef without its slog.LogValuer: through slog,
// klog's text format would print that as a group, {"name":"web",...},
// where kube-proxy's lines print default/web.
type objectRef klog.ObjectRef

func ref(nn types.NamespacedName) objectRef { return objectRef{Name: nn.Name, Namespace: nn.Namespace} }

func (r objectRef) WriteText(out *bytes.Buffer) { klog.ObjectRef(r).WriteText(out) }
func (r objectRef) MarshalLog() any             { return klog.ObjectRef(r) }
