package kube

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"

	"github.com/socklb/socklb/pkg/model"
)

// Events records Warning Events on the API objects the agent could not
// serve, through events.k8s.io/v1 as kube-proxy records its own: what one
// node's log and metrics say becomes visible to the object's owner
// (`kubectl describe service`, `kubectl events`). The broadcaster folds a
// repeat of the same object and reason into a series; the agent bounds how
// many it records per sync.
type Events struct {
	broadcaster events.EventBroadcaster
	recorder    events.EventRecorder
	src         *Source
}

// Events records through the Source's client, finding each object in its
// caches. Nothing is sent before Start.
func (s *Source) Events() *Events {
	return newEvents(s.client, s)
}

func newEvents(client kubernetes.Interface, src *Source) *Events {
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	return &Events{broadcaster: b, recorder: b.NewRecorder(scheme.Scheme, "socklb"), src: src}
}

// Start sends the Events recorded from now on, until ctx ends. An Event
// recorded before Start is dropped.
func (e *Events) Start(ctx context.Context) error {
	if err := e.broadcaster.StartRecordingToSinkWithContext(ctx); err != nil {
		return err
	}
	context.AfterFunc(ctx, e.broadcaster.Shutdown)
	return nil
}

// maxNote is the longest note events.k8s.io accepts.
const maxNote = 1024

// Warn records a Warning on the object kind/name as the informers hold it,
// with its UID, so `kubectl describe` finds the Event. An object the caches
// no longer hold is gone, and so is the reason to tell its owner.
func (e *Events) Warn(kind model.Kind, name types.NamespacedName, reason, note string) {
	obj := e.lookup(kind, name)
	if obj == nil {
		return
	}
	if len(note) > maxNote {
		note = strings.ToValidUTF8(note[:maxNote-3], "") + "..."
	}
	e.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Sync", "%s", note)
}

func (e *Events) lookup(kind model.Kind, name types.NamespacedName) runtime.Object {
	var (
		obj runtime.Object
		err error
	)
	switch kind {
	case model.KindService:
		obj, err = e.src.services.Services(name.Namespace).Get(name.Name)
	case model.KindEndpointSlice:
		obj, err = e.src.slices.EndpointSlices(name.Namespace).Get(name.Name)
	case model.KindNode:
		obj, err = e.src.nodes.Get(name.Name)
	default:
		return nil
	}
	if err != nil {
		return nil
	}
	return obj
}
