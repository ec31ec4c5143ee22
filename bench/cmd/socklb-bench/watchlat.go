package main

import (
	"context"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// probeWatch is the harness's own watch on the probe's EndpointSlice. The
// time from an API write to its event reaching a client on this machine is
// the part of the programming latency that is the API server's (and the
// watch's), which no dataplane can remove: set beside the programming
// latency, it splits that into the API server's part and the dataplane's.
type probeWatch struct {
	w    watch.Interface
	seen chan seenAt
	err  error // the API server's error event, set before seen closes
}

type seenAt struct {
	rv string
	at time.Time
}

// watchProbe starts watching the probe slice from its resourceVersion now.
// Not from the version the harness last wrote: filling etcd with the next
// size's Services (300 000 writes from 30 000 to 100 000) pushes that
// version out of the API server's watch cache, which then ends the watch
// at once with 410 Gone (what stopped the run full-n1k-100k at 100 000).
func watchProbe(ctx context.Context, c kubernetes.Interface) (*probeWatch, error) {
	cur, err := c.DiscoveryV1().EndpointSlices(benchNS).Get(ctx, "probe", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading the probe EndpointSlice: %w", err)
	}
	rv := cur.ResourceVersion
	w, err := c.DiscoveryV1().EndpointSlices(benchNS).Watch(ctx, metav1.ListOptions{
		FieldSelector:   "metadata.name=probe",
		ResourceVersion: rv,
	})
	if err != nil {
		return nil, fmt.Errorf("watching the probe EndpointSlice: %w", err)
	}
	p := &probeWatch{w: w, seen: make(chan seenAt, 64)}
	go func() {
		defer close(p.seen)
		for ev := range w.ResultChan() {
			at := time.Now()
			if s, ok := ev.Object.(*discoveryv1.EndpointSlice); ok && ev.Type == watch.Modified {
				p.seen <- seenAt{s.ResourceVersion, at}
			}
			if ev.Type == watch.Error {
				p.err = apierrors.FromObject(ev.Object)
			}
		}
	}()
	return p, nil
}

// wait returns when the watch delivered the write that made rv; the
// events of earlier writes are passed over.
func (p *probeWatch) wait(rv string, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		select {
		case s, ok := <-p.seen:
			if !ok {
				return time.Time{}, fmt.Errorf("the probe watch closed before resourceVersion %s arrived (%v)", rv, p.err)
			}
			if s.rv == rv {
				return s.at, nil
			}
		case <-deadline:
			return time.Time{}, fmt.Errorf("the probe watch did not deliver resourceVersion %s within %s", rv, timeout)
		}
	}
}

func (p *probeWatch) stop() { p.w.Stop() }
