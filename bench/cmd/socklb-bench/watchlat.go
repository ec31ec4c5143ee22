package main

import (
	"context"
	"fmt"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
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
}

type seenAt struct {
	rv string
	at time.Time
}

// watchProbe starts watching the probe slice from resourceVersion rv.
func watchProbe(ctx context.Context, c kubernetes.Interface, rv string) (*probeWatch, error) {
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
				return time.Time{}, fmt.Errorf("the probe watch closed before resourceVersion %s arrived", rv)
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
