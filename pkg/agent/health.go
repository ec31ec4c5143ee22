package agent

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
)

// ToBeDeletedTaint is the taint the Cluster Autoscaler puts on a Node before
// deleting it; kube-proxy's /healthz fails on such a node so that load
// balancers drain it first, and so does ours.
const ToBeDeletedTaint = "ToBeDeletedByClusterAutoscaler"

// Health answers /healthz and /livez with kube-proxy's semantics
// (k8s.io/kubernetes/pkg/proxy/healthcheck.ProxyHealthServer):
//
//   - /healthz is unhealthy (503) when a change has been queued for longer
//     than Timeout without a sync applying it; healthy while starting up
//     (before the first sync) and whenever nothing waits;
//   - /healthz is also 503 when this node is not eligible: its Node has a
//     deletionTimestamp, carries the ToBeDeletedByClusterAutoscaler taint,
//     or was deleted;
//   - /livez ignores the node (a draining node's agent is not restarted)
//     and, unlike kube-proxy's, ignores syncs that ran but failed to
//     program something: it fails only when a change has waited Timeout
//     without any sync finishing, i.e. when the sync loop itself is stuck.
//     A frontend that cannot be programmed (a full map) fails again after
//     every restart, so restarting would only add a restart loop to the
//     outage; it is a readiness (/healthz) and metric signal instead;
//   - the body is JSON {lastUpdated, currentTime, nodeEligible (healthz
//     only), healthy}; lastUpdated is the current time when healthy, as
//     kube-proxy reports for compatibility with older releases.
//
// One difference: kube-proxy does not serve before it has read its Node and
// counts a missing Node as not eligible. socklb serves from the start, and a
// Node it has never seen (before the first sync, or a --manifests directory
// without a Node) counts as eligible; a Node that was seen and then
// disappeared does not.
type Health struct {
	Timeout time.Duration
	Now     func() time.Time

	mu          sync.Mutex
	queued      time.Time // oldest change not yet applied; zero when none
	unread      time.Time // oldest change no finished sync has read, applied or not
	lastQueued  time.Time // newest change queued
	lastUpdated time.Time // when the last successful sync finished
	attempted   bool      // a sync has finished, successful or not
	nodeSeen    bool
	eligible    bool
	pinsErr     error // the pins under --bpffs-path cannot be trusted; nil when they can
	devicesErr  error // the per-packet path could not attach to the devices it should serve

	healthzTotal, livezTotal *prometheus.CounterVec // optional, set by New
}

func NewHealth(timeout time.Duration) *Health {
	return &Health{Timeout: timeout, Now: time.Now, eligible: true}
}

// Queued records that a change arrived at t and waits for a sync (kube-proxy's
// QueuedUpdate). The oldest waiting change counts.
func (h *Health) Queued(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queued.IsZero() {
		h.queued = t
	}
	if h.unread.IsZero() {
		h.unread = t
	}
	if t.After(h.lastQueued) {
		h.lastQueued = t
	}
}

// Updated records a sync that read the objects at t and finished now
// (kube-proxy's Updated). Changes queued at or before t are applied; one
// queued after t still waits, and counts as waiting since t: the next sync
// picks it up.
func (h *Health) Updated(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = h.Now()
	h.attempted = true
	h.settle(&h.queued, t)
	h.settle(&h.unread, t)
}

// Failed records a sync that read the objects at t and left some frontend
// unprogrammed: nothing queued counts as applied (kube-proxy does not call
// Updated when iptables-restore fails), but the sync loop is alive: it read
// what was queued up to t.
func (h *Health) Failed(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.attempted = true
	h.settle(&h.unread, t)
}

// settle marks the changes queued at or before t as handled in *pending;
// one queued after t still waits, since t.
func (h *Health) settle(pending *time.Time, t time.Time) {
	switch {
	case pending.IsZero():
	case !h.lastQueued.After(t):
		*pending = time.Time{}
	case pending.Before(t):
		*pending = t
	}
}

// PinsBroken records whether the agent's pins are in place (nil) or not:
// with a hook detached under it the agent is not serving, whatever its
// syncs say, so /healthz fails until they are back.
func (h *Health) PinsBroken(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pinsErr = err
}

// DevicesBroken records whether the per-packet path serves the devices it
// should (nil) or not: NodePort and LoadBalancer traffic from other
// machines then goes unserved, which is what /healthz tells load balancers.
func (h *Health) DevicesBroken(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.devicesErr = err
}

// SyncNode records this node's Node object; nil means it is not in the
// latest snapshot.
func (h *Health) SyncNode(n *corev1.Node) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n == nil {
		// Never seen: unknown, counted as eligible. Seen, now gone: deleted.
		h.eligible = !h.nodeSeen
		return
	}
	h.nodeSeen = true
	h.eligible = nodeEligible(n)
}

func nodeEligible(n *corev1.Node) bool {
	if n.DeletionTimestamp != nil {
		return false
	}
	for _, t := range n.Spec.Taints {
		if t.Key == ToBeDeletedTaint {
			return false
		}
	}
	return true
}

// ProxyHealthy is kube-proxy's Health().Healthy, which its
// healthCheckNodePorts answer with: no change has waited Timeout for a
// successful sync (a failed one does not count), and, socklb's own, the
// hooks and devices are in place. Unlike /healthz it ignores the node's
// eligibility, as kube-proxy's per-Service checks do.
func (h *Health) ProxyHealthy() bool {
	now := h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.proxyHealthy(now)
}

func (h *Health) proxyHealthy(now time.Time) bool {
	return !h.late(h.queued, now) && h.pinsErr == nil && h.devicesErr == nil
}

// late says whether the oldest change waiting since waiting is Timeout
// old. Never while starting up (no sync finished yet).
func (h *Health) late(waiting, now time.Time) bool {
	return h.attempted && !waiting.IsZero() && now.Sub(waiting) >= h.Timeout
}

// HealthStatus is the JSON body of /healthz and /livez.
type HealthStatus struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
	Healthy      bool      `json:"healthy"`
}

// Status computes what /healthz (withNode) or /livez would answer.
func (h *Health) Status(withNode bool) (code int, st HealthStatus) {
	now := h.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	st = HealthStatus{LastUpdated: h.lastUpdated, CurrentTime: now, Healthy: true}
	if withNode {
		st.Healthy = h.proxyHealthy(now)
	} else {
		st.Healthy = !h.late(h.unread, now)
	}
	ok := st.Healthy
	if withNode {
		eligible := h.eligible
		st.NodeEligible = &eligible
		ok = ok && eligible
	}
	if !ok {
		return http.StatusServiceUnavailable, st
	}
	st.LastUpdated = now
	return http.StatusOK, st
}

// ServeHTTP answers as /healthz.
func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.serve(w, true)
}

// Livez returns the /livez handler: the same timeout, counted until a
// sync finishes rather than succeeds, without the node.
func (h *Health) Livez() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.serve(w, false) })
}

func (h *Health) serve(w http.ResponseWriter, withNode bool) {
	code, st := h.Status(withNode)
	counter := h.livezTotal
	if withNode {
		counter = h.healthzTotal
	}
	if counter != nil {
		counter.WithLabelValues(strconv.Itoa(code)).Inc()
	}
	body, _ := json.Marshal(st)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
