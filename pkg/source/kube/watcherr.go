package kube

import (
	"context"
	"errors"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/socklb/socklb/pkg/model"
)

// watchErrors reports list and watch failures of one informer. Without it a
// forbidden list (missing RBAC) would only show as Run waiting forever.
func (s *Source) watchErrors(resource string) cache.WatchErrorHandlerWithContext {
	return func(ctx context.Context, r *cache.Reflector, err error) {
		cache.DefaultWatchErrorHandler(ctx, r, err)
		if routineWatchEnd(err) {
			return
		}
		s.report(model.Problem{Kind: model.KindWatch, Object: types.NamespacedName{Name: resource}, Reason: err.Error()})
	}
}

// routineWatchEnd tells the watch ends that happen in a healthy cluster (the
// server closes watches, compacts history) from real failures.
func routineWatchEnd(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		apierrors.IsResourceExpired(err) || apierrors.IsGone(err)
}
