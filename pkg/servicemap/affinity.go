package servicemap

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// maxAffinitySeconds is the API server's upper bound on
// sessionAffinityConfig.clientIP.timeoutSeconds (MaxClientIPServiceAffinitySeconds
// in k8s.io/kubernetes/pkg/apis/core, which we do not import).
const maxAffinitySeconds = 24 * 60 * 60

// sessionAffinity returns the ClientIP affinity timeout of a Service, or 0.
// kube-proxy dereferences timeoutSeconds unchecked, trusting the API
// server's defaulting; a manifests directory holds undefaulted objects, so
// nil takes the API default (10800 s) here, and an out-of-range value is
// reported and replaced by that default rather than silently dropping
// stickiness the user asked for.
func (b *builder) sessionAffinity(nn types.NamespacedName, spec *corev1.ServiceSpec) time.Duration {
	switch spec.SessionAffinity {
	case "", corev1.ServiceAffinityNone:
		return 0
	case corev1.ServiceAffinityClientIP:
	default:
		b.problem(model.KindService, nn, "spec.sessionAffinity %q is not None or ClientIP; no affinity is applied until it is fixed", spec.SessionAffinity)
		return 0
	}
	secs := corev1.DefaultClientIPServiceAffinitySeconds
	if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
		if t := *c.ClientIP.TimeoutSeconds; t > 0 && t <= maxAffinitySeconds {
			secs = t
		} else {
			b.problem(model.KindService, nn, "spec.sessionAffinityConfig.clientIP.timeoutSeconds %d is not 1-%d; the default %d is used until it is fixed",
				t, maxAffinitySeconds, corev1.DefaultClientIPServiceAffinitySeconds)
		}
	}
	return time.Duration(secs) * time.Second
}
