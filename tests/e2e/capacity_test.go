package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/socklb/socklb/internal/testkit"
)

// TestTenantServiceRefusedNodeStaysReady: one tenant's Service with more
// ports than the maps have room for (100 against --max-services 64) is
// refused whole, through the real API: a CapacityExceeded Warning Event on
// it, socklb_refused_services naming it, /healthz 200 past
// --healthz-timeout, and the older Service answering on its pod. Cut to
// 10 ports, it fits and is programmed.
func TestTenantServiceRefusedNodeStaysReady(t *testing.T) {
	e := newEnv(t, threePods...)
	e.startAgent("--max-services", "64", "--map-memory-budget", "0", "--healthz-timeout", "2s")
	fine, at := e.createService("fine", "echo")
	vip := fine.Spec.ClusterIP
	e.createPod("echo-1", "echo", "10.244.1.11", true)
	e.waitBackends("the older Service's pod ready", vip+":80/TCP", []string{backend("10.244.1.11")}, at)

	tenant := testkit.Service(e.ns+"/tenant", "")
	for i := range 100 {
		p := testkit.ServicePort(fmt.Sprintf("p%d", i), corev1.ProtocolTCP, int32(1000+i))
		p.TargetPort = intstr.FromInt32(8080)
		tenant.Spec.Ports = append(tenant.Spec.Ports, p)
	}
	tenant.Spec.Selector = map[string]string{"app": "tenant"}
	tenant, err := cp.Admin.CoreV1().Services(e.ns).Create(e.ctx, tenant, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var found *eventsv1.Event
	for deadline := time.Now().Add(30 * time.Second); found == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		list, err := cp.Admin.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range list.Items {
			if ev.ReportingController == "socklb" && ev.Regarding.UID == tenant.UID {
				found = &list.Items[i]
			}
		}
	}
	if found == nil {
		t.Fatalf("no Event from socklb on Service %s/tenant within 30 s", e.ns)
	}
	if found.Type != corev1.EventTypeWarning || found.Reason != "CapacityExceeded" || !strings.Contains(found.Note, "100 frontends") || !strings.Contains(found.Note, "--max-services") {
		t.Errorf("the Event: %s %s %q; want a Warning CapacityExceeded naming its 100 frontends and --max-services", found.Type, found.Reason, found.Note)
	}
	if v, ok := e.metric(fmt.Sprintf(`socklb_refused_services{service="%s/tenant"}`, e.ns)); !ok || v != 100 {
		t.Errorf("socklb_refused_services for the tenant's Service is %v (present %v), want 100", v, ok)
	}
	tenantVIP := tenant.Spec.ClusterIP
	if _, ok, err := e.backendsOf(tenantVIP + ":1000/TCP"); err != nil || ok {
		t.Errorf("the refused Service's first port is programmed (%v, %v)", ok, err)
	}
	time.Sleep(3 * time.Second) // past --healthz-timeout
	if code, body, err := e.get(e.healthz, "/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz %d %s (%v) with a tenant's Service refused for room; want 200", code, body, err)
	}
	if res := e.tcp(vip+":80", 20); res.OK != 20 {
		t.Errorf("the older Service answered %d of 20 (errors %v) beside the refused one", res.OK, res.Errors)
	}

	tenant.Spec.Ports = tenant.Spec.Ports[:10]
	if _, err := cp.Admin.CoreV1().Services(e.ns).Update(e.ctx, tenant, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitBackends("the tenant's Service cut to 10 ports (no pods: REJECT)", tenantVIP+":1000/TCP", nil, time.Time{})
}
