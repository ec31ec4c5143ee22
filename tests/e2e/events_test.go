package e2e

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/socklb/socklb/internal/testkit"
)

// TestEventOnRefusedExternalIP: a Service whose externalIP the agent
// refuses (CVE-2020-8554: not an address of a node, not inside
// --external-ip-cidrs) gets a Warning Event from socklb, through
// events.k8s.io with the ServiceAccount of deploy/base/rbac.yaml, on the
// Service by UID (so `kubectl describe service` shows it) and naming the
// refused address; a Service that is served gets none.
func TestEventOnRefusedExternalIP(t *testing.T) {
	e := newEnv(t)
	e.startAgent()
	http := testkit.ServicePort("http", corev1.ProtocolTCP, 80)
	hijack := testkit.Service(e.ns+"/hijack", "", http)
	hijack.Spec.ExternalIPs = []string{"203.0.113.50"}
	hijack, err := cp.Admin.CoreV1().Services(e.ns).Create(e.ctx, hijack, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fine, _ := e.createService("fine", "fine")

	var found *eventsv1.Event
	var all []eventsv1.Event
	for deadline := time.Now().Add(30 * time.Second); found == nil && time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		list, err := cp.Admin.EventsV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		all = list.Items
		for i, ev := range all {
			if ev.ReportingController == "socklb" && ev.Regarding.UID == hijack.UID {
				found = &all[i]
			}
		}
	}
	if found == nil {
		t.Fatalf("no Event from socklb on Service %s/hijack within 30 s; events in the namespace: %+v", e.ns, all)
	}
	t.Logf("Event: type %s, reason %s, action %s, instance %s, note %q", found.Type, found.Reason, found.Action, found.ReportingInstance, found.Note)
	if found.Type != corev1.EventTypeWarning || found.Reason != "UnusableInput" || found.Regarding.Kind != "Service" ||
		found.Regarding.Name != "hijack" || !strings.Contains(found.Note, `"203.0.113.50" is refused`) {
		t.Errorf("the Event: %+v; want a Warning UnusableInput on Service hijack naming 203.0.113.50 as refused", found)
	}
	for _, ev := range all {
		if ev.ReportingController == "socklb" && ev.Regarding.UID == fine.UID {
			t.Errorf("an Event on Service fine, which is served: %+v", ev)
		}
	}
}
