// Package source defines how the agent learns about Services, EndpointSlices
// and Nodes, whatever they come from: a live API server (package kube) or a
// directory of manifests that needs no cluster at all (package manifests).
//
// Problems: a source never fails because one object or one file is bad. It
// hands each problem to the Report function it was built with (the agent's,
// which logs and counts it; a nil Report drops them), keeps serving
// everything else, and never calls Report concurrently with itself. Problems are not part of the Snapshot, because
// they describe what happened while reading, not the objects that were read.
package source

import (
	"context"

	"github.com/socklb/socklb/pkg/model"
)

// Source delivers snapshots of Services, EndpointSlices and Nodes.
type Source interface {
	// Run blocks until ctx is done. It calls changed() (never concurrently)
	// after the objects change; the agent then calls Snapshot. The first call
	// to changed() happens once the initial state is complete (informer
	// caches synced / first directory read done). Run returns nil when ctx is
	// done and an error only when it cannot start watching at all. Call it
	// once per Source.
	Run(ctx context.Context, changed func()) error

	// Snapshot returns the current objects; the returned slices/objects must
	// not be mutated by the caller and are never mutated later by the source
	// (fresh slices per call or per change). NodeName is filled from the
	// source's config. Safe to call from any goroutine, at any time: before
	// the first changed() it may be empty.
	Snapshot() model.Input
}
