package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core/v1"
	discoveryinformers "k8s.io/client-go/informers/discovery/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/source"
)

// The informers select what kube-proxy's do (cmd/kube-proxy/app/server.go,
// v1.37): Services without the service-proxy-name label and with a
// clusterIP other than None; EndpointSlices without the headless label.
// Each label is read on its own kind only: a slice copies its Service's
// labels, so a slice carrying service-proxy-name still belongs to a Service
// kube-proxy proxies whenever that Service itself lacks the label, and a
// Service labelled headless but with a cluster IP is proxied.

// Config configures a kube Source.
type Config struct {
	NodeName string           // this node: its Node object holds the node facts
	Report   model.ReportFunc // receives problems; nil drops them
}

// Source follows Services, EndpointSlices and the Nodes.
type Source struct {
	nodeName    string
	client      kubernetes.Interface
	svcSelector labels.Selector // Services kube-proxy proxies
	epsSelector labels.Selector // EndpointSlices kube-proxy reads
	factory     informers.SharedInformerFactory
	services    corelisters.ServiceLister
	slices      discoverylisters.EndpointSliceLister
	nodes       corelisters.NodeLister
	changes     signal
	tracked     *changes
	sliceIndex  cache.Indexer
	// handlersSynced: the handlers have seen the initial lists, so the
	// first Checkout holds them.
	handlersSynced []cache.InformerSynced

	reportMu sync.Mutex // Report is never called concurrently
	reportFn model.ReportFunc
}

var _ source.Tracked = (*Source)(nil)

// New sets up the informers; they start with Run.
func New(client kubernetes.Interface, cfg Config) (*Source, error) {
	if cfg.NodeName == "" {
		return nil, errors.New("kube source: node name is empty; the agent needs its own node's name")
	}
	notProxied, err := labels.NewRequirement(model.LabelServiceProxyName, selection.DoesNotExist, nil)
	if err != nil {
		return nil, fmt.Errorf("building the service-proxy-name selector: %w", err)
	}
	notHeadless, err := labels.NewRequirement(model.LabelHeadless, selection.DoesNotExist, nil)
	if err != nil {
		return nil, fmt.Errorf("building the headless selector: %w", err)
	}
	s := &Source{
		nodeName:    cfg.NodeName,
		client:      client,
		svcSelector: labels.NewSelector().Add(*notProxied),
		epsSelector: labels.NewSelector().Add(*notHeadless),
		changes:     newSignal(),
		tracked:     newChanges(cfg.NodeName),
		reportFn:    cfg.Report,
	}
	// Resync 0: periodic resyncs would only replay the cache and wake the
	// agent for nothing.
	s.factory = informers.NewSharedInformerFactoryWithOptions(client, 0)

	svcs := s.factory.InformerFor(&corev1.Service{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewFilteredServiceInformer(c, metav1.NamespaceAll, resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			func(o *metav1.ListOptions) {
				o.LabelSelector = s.svcSelector.String()
				o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", corev1.ClusterIPNone).String()
			})
	})
	slices := s.factory.InformerFor(&discoveryv1.EndpointSlice{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return discoveryinformers.NewFilteredEndpointSliceInformer(c, metav1.NamespaceAll, resync,
			cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc, byServiceIndex: byService},
			func(o *metav1.ListOptions) { o.LabelSelector = s.epsSelector.String() })
	})
	// Every Node: where the other nodes serve NodePorts is in theirs
	// (servicemap.RemoteNodeAddresses). The transform keeps a few fields of
	// each (trimNode) and the handler wakes the agent only when one of them
	// changed, so node heartbeats cost a decode, not a sync.
	nodes := s.factory.InformerFor(&corev1.Node{}, func(c kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
		return coreinformers.NewNodeInformer(c, resync, cache.Indexers{})
	})
	s.services = corelisters.NewServiceLister(svcs.GetIndexer())
	s.slices = discoverylisters.NewEndpointSliceLister(slices.GetIndexer())
	s.nodes = corelisters.NewNodeLister(nodes.GetIndexer())
	s.sliceIndex = slices.GetIndexer()

	for resource, inf := range map[string]cache.SharedIndexInformer{
		"services": svcs, "endpointslices": slices, "nodes": nodes,
	} {
		if err := inf.SetTransform(newTrim(cfg.NodeName)); err != nil {
			return nil, fmt.Errorf("setting the %s transform: %w", resource, err)
		}
		if err := inf.SetWatchErrorHandlerWithContext(s.watchErrors(resource)); err != nil {
			return nil, fmt.Errorf("setting the %s watch error handler: %w", resource, err)
		}
		reg, err := inf.AddEventHandler(s.tracked.handlers(resource, s.changes.poke))
		if err != nil {
			return nil, fmt.Errorf("adding the %s event handler: %w", resource, err)
		}
		s.handlersSynced = append(s.handlersSynced, reg.HasSynced)
	}
	return s, nil
}

// Run starts the informers, calls changed() once their caches are synced,
// then once per burst of events. It returns nil when ctx is done.
func (s *Source) Run(ctx context.Context, changed func()) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		s.factory.Shutdown()
	}()
	s.factory.StartWithContext(runCtx)
	if res := s.factory.WaitForCacheSyncWithContext(runCtx); res.Err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("waiting for the informer caches to sync: %w", res.Err)
	}
	if !cache.WaitForCacheSync(runCtx.Done(), s.handlersSynced...) {
		return nil
	}
	// The first snapshot already holds everything the initial lists added.
	s.changes.drain()
	changed()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.changes.C:
			changed()
		}
	}
}

// Snapshot reads the informer caches, in no particular order. The objects
// are the caches' own, which informers replace but never modify. Before the
// caches sync it may be incomplete.
func (s *Source) Snapshot() model.Input {
	in := model.Input{NodeName: s.nodeName}
	// Listers never fail. Selecting again here keeps the result right even
	// if a server (or a fake clientset) ignored the selector; servicemap
	// skips clusterIP None itself.
	in.Services, _ = s.services.List(s.svcSelector)
	in.Slices, _ = s.slices.List(s.epsSelector)
	in.Nodes = s.Nodes()
	// Not sorted: servicemap orders what it reads, and sorting 20 000
	// objects here on every change cost more than building the state.
	return in
}

// Nodes lists every Node, this node's first, so that model.Input.ThisNode
// finds it at once among thousands.
func (s *Source) Nodes() []*corev1.Node {
	all, _ := s.nodes.List(labels.Everything())
	if i := slices.IndexFunc(all, func(n *corev1.Node) bool { return n.Name == s.nodeName }); i > 0 {
		all[0], all[i] = all[i], all[0]
	}
	return all
}

func (s *Source) report(p model.Problem) {
	if s.reportFn == nil {
		return
	}
	s.reportMu.Lock()
	defer s.reportMu.Unlock()
	s.reportFn(p)
}
