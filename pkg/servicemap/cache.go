package servicemap

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// Cache makes Build incremental: a Service whose object, EndpointSlices and
// node facts are the same as in the previous Build reuses what it produced
// then, so a sync after one change costs that change plus a merge, not a
// rebuild of every Service (kube-proxy's change trackers serve the same
// purpose).
//
// "The same" is pointer identity: informer caches and the manifests source
// hand out a new object for every change and never modify one in place, as
// client-go requires of anyone reading a shared cache. The zero Cache is
// ready to use; a Cache is not safe for concurrent use.
type Cache struct {
	entries    map[types.NamespacedName]*cacheEntry
	lastOffers int
}

type cacheEntry struct {
	svc      *corev1.Service
	slices   []*discoveryv1.EndpointSlice
	node     string
	offers   []offer
	problems []model.Problem
	used     bool
}

// Build is the package-level Build, reusing unchanged Services' results.
func (c *Cache) Build(in model.Input) (State, []model.Problem) {
	if c.entries == nil {
		c.entries = map[types.NamespacedName]*cacheEntry{}
	}
	return build(in, c)
}

// addService runs b.addService for svc unless the cache holds its result
// for the same inputs.
func (c *Cache) addService(b *builder, svc *corev1.Service, svcSlices []*discoveryv1.EndpointSlice, node string) {
	nn := nnOf(svc.Namespace, svc.Name)
	if e := c.entries[nn]; e != nil && e.svc == svc && e.node == node && slices.Equal(e.slices, svcSlices) {
		b.offers = append(b.offers, e.offers...)
		b.problems = append(b.problems, e.problems...)
		e.used = true
		return
	}
	o, p := len(b.offers), len(b.problems)
	b.addService(svc, svcSlices)
	c.entries[nn] = &cacheEntry{
		svc:      svc,
		slices:   slices.Clone(svcSlices),
		node:     node,
		offers:   slices.Clone(b.offers[o:]),
		problems: slices.Clone(b.problems[p:]),
		used:     true,
	}
}

// sweep forgets Services that were not in the last Build.
func (c *Cache) sweep() {
	for nn, e := range c.entries {
		if !e.used {
			delete(c.entries, nn)
		}
		e.used = false
	}
}

// nodeFingerprint is every node fact addService reads; when it changes,
// every Service is rebuilt.
func (b *builder) nodeFingerprint() string {
	return fmt.Sprint(b.node, b.nodeAddrs, b.ownAddrs, b.extCIDRs)
}
