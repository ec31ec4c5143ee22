package agent

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/servicemap"
)

// sizedApplier is a datapath whose maps hold room entries, as the kernel's
// do: a write past them fails with the full map's error.
type sizedApplier struct {
	mu    sync.Mutex
	room  servicemap.Capacity
	state servicemap.State
	// failRemove makes removals of a Service's frontends fail once each.
	failRemove map[string]bool
}

func (s *sizedApplier) Capacity() servicemap.Capacity { return s.room }

func (s *sizedApplier) Apply(st servicemap.State) datapath.ApplyResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = servicemap.State{}
	res := datapath.ApplyResult{Failed: map[servicemap.FrontendKey]error{}}
	for k, fe := range st {
		s.write(k, fe, &res)
	}
	return res
}

func (s *sizedApplier) ApplyDelta(d servicemap.Delta) datapath.ApplyResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	res := datapath.ApplyResult{Failed: map[servicemap.FrontendKey]error{}}
	for _, k := range d.Remove {
		if fe, ok := s.state[k]; ok {
			if s.failRemove[fe.Service.Name] {
				res.Failed[k] = fmt.Errorf("removing %s: injected", k)
				continue
			}
			delete(s.state, k)
			res.Removed++
		}
	}
	for k, fe := range d.Upsert {
		delete(s.state, k)
		s.write(k, fe, &res)
	}
	return res
}

func (s *sizedApplier) write(k servicemap.FrontendKey, fe servicemap.Frontend, res *datapath.ApplyResult) {
	be := 0
	for _, f := range s.state {
		be += len(f.Backends)
	}
	if len(s.state)+1 > s.room.Frontends || be+len(fe.Backends) > s.room.Backends {
		res.Failed[k] = &datapath.MapError{Map: "services", Err: fmt.Errorf("services map is full")}
		return
	}
	s.state[k] = fe
	res.Upserted++
}

func (s *sizedApplier) services() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for _, fe := range s.state {
		out[fe.Service.String()]++
	}
	return out
}

// svc is a Service of ports TCP ports (1000 up) created age hours after
// the first one.
func svc(nsName, ip string, age, ports int) *corev1.Service {
	var ps []corev1.ServicePort
	for i := range ports {
		ps = append(ps, testkit.ServicePort(fmt.Sprintf("p%d", i), corev1.ProtocolTCP, int32(1000+i)))
	}
	s := testkit.Service(nsName, ip, ps...)
	s.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, age, 0, 0, 0, time.UTC))
	return s
}

func nn(s string) types.NamespacedName {
	ns, n, _ := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: n}
}

// TestOneTenantCannotFillTheNode: a tenant's Service with more ports than
// the maps have room for is refused whole (the newest first, never the API
// server's), the node's syncs succeed and /healthz stays 200, the other
// Services are programmed, and the refusal is logged, counted per Service
// and recorded as an Event. Shrunk, it is served; a newer Service that
// does not fit is refused in its place, and served once room frees up.
func TestOneTenantCannotFillTheNode(t *testing.T) {
	slice := func(s *corev1.Service, ips ...string) []*discoveryv1.EndpointSlice {
		var ports []discoveryv1.EndpointPort
		for _, p := range s.Spec.Ports {
			ports = append(ports, testkit.EndpointPort(p.Name, corev1.ProtocolTCP, p.Port+1000))
		}
		var eps []discoveryv1.Endpoint
		for _, ip := range ips {
			eps = append(eps, testkit.Endpoint(ip, testkit.Ptr(true), nil, nil))
		}
		return []*discoveryv1.EndpointSlice{testkit.EndpointSlice(s.Namespace+"/"+s.Name+"-x", s.Name, discoveryv1.AddressTypeIPv4, ports, eps...)}
	}

	web := svc("shop/web", "10.96.0.10", 0, 1)
	big := svc("tenant/big", "10.96.0.20", 1, 70)
	small := svc("tenant/small", "10.96.0.21", 2, 1)
	// The API server's Service is the newest here, and still comes first.
	kube := svc("default/kubernetes", "10.96.0.1", 3, 1)
	src := newFakeTracked(model.Input{NodeName: "node-a"})
	for _, s := range []*corev1.Service{web, big, small, kube} {
		src.byName[nn(s.Namespace+"/"+s.Name)] = servicemap.ServiceObjects{Service: s, Slices: slice(s, "10.0.0.1", "10.0.0.2")}
	}
	// 64 of each: 62 for admitted Services after the 1/32 margin.
	dp := &sizedApplier{room: servicemap.Capacity{Frontends: 64, Backends: 128, Slots: 256, Ranges: 64}}
	rec := &fakeRecorder{}
	logs := &lockedBuffer{}
	a, wait := runTracked(t, src, Config{Datapath: dp, Log: slog.New(slog.NewJSONHandler(logs, nil)), Events: rec,
		HealthTimeout: 100 * time.Millisecond, RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond})
	sync := func(step string) {
		t.Helper()
		if !wait() {
			t.Fatalf("%s: the sync failed; a refusal must not fail it", step)
		}
	}
	served := func(step string, want map[string]int) {
		t.Helper()
		got := dp.services()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: frontends programmed per Service %v, want %v", step, got, want)
		}
	}
	refusedMetric := func(step, service string, want float64) {
		t.Helper()
		rr := httptest.NewRecorder()
		a.MetricsHandler(false).ServeHTTP(rr, httptest.NewRequest("GET", "/metrics", nil))
		got, ok := testkit.Sample(rr.Body.String(), fmt.Sprintf(`socklb_refused_services{service=%q}`, service))
		if want == 0 && ok || want != 0 && got != want {
			t.Errorf("%s: socklb_refused_services for %s is %v (present %v), want %v", step, service, got, ok, want)
		}
	}
	healthy := func(step string) {
		t.Helper()
		time.Sleep(250 * time.Millisecond) // past HealthTimeout
		rr := httptest.NewRecorder()
		a.HealthHandler().ServeHTTP(rr, httptest.NewRequest("GET", "/healthz", nil))
		if rr.Code != http.StatusOK {
			t.Fatalf("%s: /healthz %d %s, want 200", step, rr.Code, rr.Body)
		}
	}

	sync("first sync")
	served("first sync", map[string]int{"default/kubernetes": 1, "shop/web": 1, "tenant/small": 1})
	refusedMetric("first sync", "tenant/big", 70)
	healthy("first sync")
	if ev := rec.events(); len(ev) != 1 || ev[0].name != nn("tenant/big") || ev[0].reason != "CapacityExceeded" || !strings.Contains(ev[0].note, "70 frontends") {
		t.Fatalf("Events %+v, want one CapacityExceeded on tenant/big naming its 70 frontends", ev)
	}
	if l := logs.lines(t, "Service not programmed: the maps have no room for it"); len(l) != 1 || fmt.Sprint(l[0]["service"]) != "map[name:big namespace:tenant]" {
		t.Fatalf("refusal log lines %v, want one naming tenant/big", l)
	}

	// Shrunk to 50 ports it fits beside the others (53 of 62).
	big50 := svc("tenant/big", "10.96.0.20", 1, 50)
	src.put(nn("tenant/big"), servicemap.ServiceObjects{Service: big50, Slices: slice(big50, "10.0.0.1")})
	sync("shrunk")
	served("shrunk", map[string]int{"default/kubernetes": 1, "shop/web": 1, "tenant/small": 1, "tenant/big": 50})
	refusedMetric("shrunk", "tenant/big", 0)

	// A newer Service that does not fit in the 9 left is refused, whole.
	newer := svc("tenant/newer", "10.96.0.22", 4, 20)
	src.put(nn("tenant/newer"), servicemap.ServiceObjects{Service: newer})
	sync("newer")
	served("newer", map[string]int{"default/kubernetes": 1, "shop/web": 1, "tenant/small": 1, "tenant/big": 50})
	refusedMetric("newer", "tenant/newer", 20)
	healthy("newer")

	// The older Service gone, the newer one is served.
	src.put(nn("tenant/big"), servicemap.ServiceObjects{})
	sync("big deleted")
	served("big deleted", map[string]int{"default/kubernetes": 1, "shop/web": 1, "tenant/small": 1, "tenant/newer": 20})
	refusedMetric("big deleted", "tenant/newer", 0)
	if l := logs.lines(t, "Service programmed again: the maps have room for it"); len(l) != 2 {
		t.Fatalf("%d lines of Services served again, want 2 (big, then newer)", len(l))
	}
}

// TestRefusedAfterAFailedRemovalIsRemoved: a Service refused once the room
// is gone (a protected Service grew) whose removal fails is removed by the
// retry, not left programmed because it is refused.
func TestRefusedAfterAFailedRemovalIsRemoved(t *testing.T) {
	src := newFakeTracked(model.Input{NodeName: "node-a"})
	src.byName[nn("default/kubernetes")] = servicemap.ServiceObjects{Service: svc("default/kubernetes", "10.96.0.1", 1, 1)}
	src.byName[nn("t/tenant")] = servicemap.ServiceObjects{Service: svc("t/tenant", "10.96.0.20", 0, 40)}
	dp := &sizedApplier{room: servicemap.Capacity{Frontends: 64, Backends: 64, Slots: 128, Ranges: 64}, failRemove: map[string]bool{"tenant": true}}
	_, wait := runTracked(t, src, Config{Datapath: dp, Log: slog.New(slog.NewJSONHandler(&lockedBuffer{}, nil)),
		RetryMin: 10 * time.Millisecond, RetryMax: 20 * time.Millisecond})
	if !wait() || dp.services()["t/tenant"] != 40 {
		t.Fatalf("first sync: %v, want the tenant's 40 frontends programmed", dp.services())
	}
	// The API server's Service grows to 30 ports: 71 frontends against
	// room for 62, so the tenant's Service must go, and its removal fails.
	src.put(nn("default/kubernetes"), servicemap.ServiceObjects{Service: svc("default/kubernetes", "10.96.0.1", 1, 30)})
	if wait() {
		t.Fatal("a sync whose removals failed reported success")
	}
	dp.mu.Lock()
	dp.failRemove = nil
	dp.mu.Unlock()
	for deadline := time.Now().Add(5 * time.Second); dp.services()["t/tenant"] != 0; {
		if time.Now().After(deadline) {
			t.Fatalf("the refused Service is still programmed after the retries: %v", dp.services())
		}
		wait()
	}
	if got := dp.services(); got["default/kubernetes"] != 30 {
		t.Errorf("programmed %v, want the API server's 30 frontends", got)
	}
}
