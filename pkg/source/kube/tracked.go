package kube

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
	"github.com/socklb/socklb/pkg/source"
)

// byServiceIndex finds a Service's slices without listing every slice.
const byServiceIndex = "service"

func byService(obj any) ([]string, error) {
	s, ok := obj.(*discoveryv1.EndpointSlice)
	if !ok {
		return nil, nil
	}
	return []string{s.Namespace + "/" + s.Labels[discoveryv1.LabelServiceName]}, nil
}

// Checkout hands over what the events touched since the last call.
func (s *Source) Checkout() source.Changes { return s.tracked.checkout() }

// Pending counts the objects changed since the last Checkout.
func (s *Source) Pending() (services, slices int) { return s.tracked.pending() }

// ServiceObjects reads one Service and its slices from the caches,
// selecting again as Snapshot does.
func (s *Source) ServiceObjects(nn types.NamespacedName) servicemap.ServiceObjects {
	var out servicemap.ServiceObjects
	if nn.Name != "" {
		if svc, err := s.services.Services(nn.Namespace).Get(nn.Name); err == nil && s.svcSelector.Matches(labels.Set(svc.Labels)) {
			out.Service = svc
		}
	}
	objs, _ := s.sliceIndex.ByIndex(byServiceIndex, nn.Namespace+"/"+nn.Name)
	for _, o := range objs {
		if sl, ok := o.(*discoveryv1.EndpointSlice); ok && s.epsSelector.Matches(labels.Set(sl.Labels)) {
			out.Slices = append(out.Slices, sl)
		}
	}
	slices.SortFunc(out.Slices, func(a, b *discoveryv1.EndpointSlice) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// NodeInput is the node facts alone: this node's Node object, read
// without listing the others.
func (s *Source) NodeInput() model.Input {
	in := model.Input{NodeName: s.nodeName}
	if n, err := s.nodes.Get(s.nodeName); err == nil {
		in.Nodes = []*corev1.Node{n}
	}
	return in
}
