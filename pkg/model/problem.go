package model

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
)

// Kind is the kind of object a Problem is about; it is the kind label of
// socklb_problems_total and socklb_unusable_objects.
type Kind string

// Every Kind a source or servicemap reports.
const (
	KindService       Kind = "Service"       // servicemap, and a manifest defined twice
	KindEndpointSlice Kind = "EndpointSlice" // servicemap, and a manifest defined twice
	KindNode          Kind = "Node"          // servicemap (its addresses), and a manifest defined twice
	KindFile          Kind = "File"          // the manifests source: a file or the directory
	KindWatch         Kind = "Watch"         // the kube source: a list or watch that failed; Object.Name is the resource
)

// Kinds lists every Kind, so a metric can show each at zero.
var Kinds = []Kind{KindService, KindEndpointSlice, KindNode, KindFile, KindWatch}

// Problem is an object, or part of one, that could not be used. The agent
// logs it and counts it; everything else is still used.
type Problem struct {
	Kind   Kind
	Object types.NamespacedName // Name alone for what has no namespace: a Node, a file, a resource
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s %s: %s", p.Kind, p.ObjectName(), p.Reason)
}

// ObjectName is namespace/name, or the bare name of an object that is not
// namespaced (a file, a Node).
func (p Problem) ObjectName() string {
	if p.Object.Namespace == "" {
		return p.Object.Name
	}
	return p.Object.String()
}

// ReportFunc receives the problems a source finds while reading. A source
// never calls it concurrently with itself.
type ReportFunc func(Problem)
