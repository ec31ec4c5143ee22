package agent

import (
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Health answers /healthz and /livez as kube-proxy does: unhealthy when a
// change has waited longer than Timeout without being applied. A node that
// never saw a change is healthy: there is nothing it failed to do.
type Health struct {
	Timeout time.Duration
	Now     func() time.Time

	mu          sync.Mutex
	queued      time.Time // oldest change not yet applied; zero when none
	lastUpdated time.Time
}

func NewHealth(timeout time.Duration) *Health {
	return &Health{Timeout: timeout, Now: time.Now}
}

// Queued records that a change is waiting; the oldest waiting one counts.
func (h *Health) Queued(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queued.IsZero() {
		h.queued = t
	}
}

// Updated records a completed sync.
func (h *Health) Updated(t time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lastUpdated = t
	if !h.queued.IsZero() && !h.queued.After(t) {
		h.queued = time.Time{}
	}
}

type healthBody struct {
	LastUpdated  time.Time `json:"lastUpdated"`
	CurrentTime  time.Time `json:"currentTime"`
	NodeEligible *bool     `json:"nodeEligible,omitempty"`
}

func (h *Health) healthy(now time.Time) (bool, time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.queued.IsZero() {
		return true, h.lastUpdated
	}
	return now.Sub(h.queued) <= h.Timeout, h.lastUpdated
}

func (h *Health) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := h.Now()
	ok, last := h.healthy(now)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !ok {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	eligible := true
	_ = json.NewEncoder(w).Encode(healthBody{LastUpdated: last, CurrentTime: now, NodeEligible: &eligible})
}
