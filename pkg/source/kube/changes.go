package kube

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/socklb/socklb/pkg/source"
)

// changes records what the informer events touched until the agent
// checks them out. Handlers only take a lock and write a few map entries:
// they must never stall the informers.
type changes struct {
	nodeName string // this node

	mu          sync.Mutex
	services    map[types.NamespacedName]bool
	triggers    map[types.NamespacedName][]time.Time
	received    map[types.NamespacedName]time.Time
	node        bool
	remoteNodes bool
	// svcObjs and sliceObjs are the distinct objects changed.
	svcObjs   map[types.NamespacedName]bool
	sliceObjs map[types.NamespacedName]bool
}

func newChanges(nodeName string) *changes {
	c := &changes{nodeName: nodeName}
	c.reset()
	return c
}

func (c *changes) reset() {
	c.services = map[types.NamespacedName]bool{}
	c.triggers = map[types.NamespacedName][]time.Time{}
	c.received = map[types.NamespacedName]time.Time{}
	c.svcObjs = map[types.NamespacedName]bool{}
	c.sliceObjs = map[types.NamespacedName]bool{}
	c.node, c.remoteNodes = false, false
}

func (c *changes) checkout() source.Changes {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := source.Changes{Services: c.services, Triggers: c.triggers, Received: c.received, Node: c.node, RemoteNodes: c.remoteNodes,
		ServiceObjects: len(c.svcObjs), SliceObjects: len(c.sliceObjs)}
	c.reset()
	return out
}

func (c *changes) pending() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.svcObjs), len(c.sliceObjs)
}

func (c *changes) service(obj any) {
	s, ok := unwrap(obj).(*corev1.Service)
	if !ok {
		return
	}
	nn := types.NamespacedName{Namespace: s.Namespace, Name: s.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touch(nn)
	c.svcObjs[nn] = true
}

// touch marks svc changed, noting when its first pending change arrived.
// The caller holds mu.
func (c *changes) touch(svc types.NamespacedName) {
	c.services[svc] = true
	if _, ok := c.received[svc]; !ok {
		c.received[svc] = time.Now()
	}
}

// slice records a slice's add, update (old and new) or delete; trigger
// is false for deletions, whose annotation dates from their last update.
func (c *changes) slice(obj any, trigger bool) {
	s, ok := unwrap(obj).(*discoveryv1.EndpointSlice)
	if !ok {
		return
	}
	svc := sliceService(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.touch(svc)
	c.sliceObjs[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = true
	if !trigger {
		return
	}
	if t, err := time.Parse(time.RFC3339Nano, s.Annotations[corev1.EndpointsLastChangeTriggerTime]); err == nil {
		c.triggers[svc] = append(c.triggers[svc], t)
	}
}

// nodeChanged records a Node's add (old nil), update or delete (cur the
// deleted object) and reports whether it changed anything socklb reads:
// an update that only renews what trimNode dropped (a heartbeat's
// conditions, an image list) records nothing and wakes nobody.
func (c *changes) nodeChanged(old, cur any) bool {
	n, ok := unwrap(cur).(*corev1.Node)
	if !ok {
		return false
	}
	if o, ok := old.(*corev1.Node); ok && sameNodeFacts(o, n) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if n.Name == c.nodeName {
		c.node = true
	} else {
		c.remoteNodes = true
	}
	return true
}

func (c *changes) handlers(kind string, poke func()) cache.ResourceEventHandlerFuncs {
	if kind == "nodes" {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { c.nodeChanged(nil, obj); poke() },
			UpdateFunc: func(old, cur any) {
				if c.nodeChanged(old, cur) {
					poke()
				}
			},
			DeleteFunc: func(obj any) { c.nodeChanged(nil, obj); poke() },
		}
	}
	record := c.slice
	if kind == "services" {
		record = func(obj any, _ bool) { c.service(obj) }
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { record(obj, true); poke() },
		UpdateFunc: func(old, cur any) {
			// The old object's Service too: a relabelled slice leaves it.
			record(old, false)
			record(cur, true)
			poke()
		},
		DeleteFunc: func(obj any) { record(obj, false); poke() },
	}
}

func unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

// sliceService is the Service a slice belongs to; a slice without the
// label gets an empty Name (servicemap reports it).
func sliceService(s *discoveryv1.EndpointSlice) types.NamespacedName {
	return types.NamespacedName{Namespace: s.Namespace, Name: s.Labels[discoveryv1.LabelServiceName]}
}
