package agent

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

type recordedEvent struct {
	kind         model.Kind
	name         types.NamespacedName
	reason, note string
}

type fakeRecorder struct {
	mu  sync.Mutex
	got []recordedEvent
}

func (r *fakeRecorder) Warn(kind model.Kind, name types.NamespacedName, reason, note string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, recordedEvent{kind, name, reason, note})
}

func (r *fakeRecorder) events() []recordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recordedEvent(nil), r.got...)
}

// TestEventsForWhatIsNotServed: an object the agent finds unusable, and a
// Service whose frontends it cannot program, each get one Warning Event
// naming the object and why, however many syncs the condition lasts; a
// Service that works gets none.
func TestEventsForWhatIsNotServed(t *testing.T) {
	rec := &fakeRecorder{}
	h := startAgent(t, func(c *Config) { c.Events = rec })
	h.dp.setFail("full", true)
	h.src.set(func(in *model.Input) {
		in.Services = []*corev1.Service{service("bad", "not-an-ip"), service("full", "10.96.0.11"), service("web", "10.96.0.10")}
	})
	h.waitApply()
	h.settle()
	// More syncs with the same conditions: no new Event.
	h.src.set(func(in *model.Input) { in.Services = append(in.Services, service("web2", "10.96.0.12")) })
	h.waitApply()
	h.settle()

	byReason := map[string][]recordedEvent{}
	for _, e := range rec.events() {
		byReason[e.reason] = append(byReason[e.reason], e)
		if e.name.Name == "web" || e.name.Name == "web2" {
			t.Errorf("an Event on a Service that is served: %+v", e)
		}
	}
	if u := byReason["UnusableInput"]; len(u) != 1 || u[0].kind != model.KindService || u[0].name.Name != "bad" || !strings.Contains(u[0].note, "not-an-ip") {
		t.Errorf("UnusableInput Events %+v, want one on Service bad naming its cluster IP", u)
	}
	// One per frontend that failed (the fake Service has one port).
	if f := byReason["FailedToProgram"]; len(f) != 1 || f[0].kind != model.KindService || f[0].name.Name != "full" || !strings.Contains(f[0].note, "services map is full") {
		t.Errorf("FailedToProgram Events %+v, want one on Service full naming the full map", f)
	}
}

// TestEventsBoundedPerSync: a sync that finds more unservable objects than
// maxEventsPerSync records that many Events and logs how many it left out;
// the log names every object.
func TestEventsBoundedPerSync(t *testing.T) {
	rec := &fakeRecorder{}
	h := startAgent(t, func(c *Config) { c.Events = rec })
	var svcs []*corev1.Service
	for i := range maxEventsPerSync + 5 {
		svcs = append(svcs, service("bad"+strconv.Itoa(i), "not-an-ip-"+strconv.Itoa(i)))
	}
	h.src.set(func(in *model.Input) { in.Services = svcs })
	h.waitApply()
	h.settle()
	if got := len(rec.events()); got != maxEventsPerSync {
		t.Errorf("%d Events for %d unusable Services in one sync, want %d", got, len(svcs), maxEventsPerSync)
	}
	if n := len(h.logs.lines(t, "skipping unusable input")); n != len(svcs) {
		t.Errorf("%d problems logged, want every one of %d", n, len(svcs))
	}
	skipped := h.logs.lines(t, "recorded only the first Events of this sync; the log above names every object")
	if len(skipped) != 1 || skipped[0]["not_recorded"] != float64(5) {
		t.Errorf("the log of Events not recorded: %v, want one line with not_recorded 5", skipped)
	}
}
