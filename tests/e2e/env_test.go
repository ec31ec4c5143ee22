package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/pkg/datapath"
)

// env is one test's world: a namespace of the shared API server, a lab
// (client namespace + pod namespaces with servers), a fresh child cgroup,
// a private bpffs, and a socklb agent attached to that cgroup only.
type env struct {
	t       *testing.T
	ctx     context.Context
	ns      string
	lab     *lab.Lab
	cg      *lab.Cgroup
	fs      *testkit.BPFFS
	agent   *testkit.AgentProcess
	ready   time.Time // when the agent had finished its first sync
	logDir  string
	healthz string // host:port
	metrics string
	// apiRestarted: the test restarted kube-apiserver. Until its RBAC
	// informers have synced a fresh API server answers 403, so the agent's
	// re-list and re-watch may be refused once; those refusals are not a
	// missing permission.
	apiRestarted bool
}

func newEnv(t *testing.T, pods ...lab.PodSpec) *env {
	t.Helper()
	needCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	// Made before the cleanups below are registered, so it outlives them.
	e := &env{t: t, ctx: ctx, logDir: t.TempDir()}
	w, err := lab.NewWorld(pods...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { check(t, w.Close()) })
	e.cg, e.fs, e.lab = w.Cgroup, w.BPFFS, w.Lab

	ns, err := cp.Admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.ns = ns.Name
	// The ServiceAccount admission plugin refuses Pods until the
	// ServiceAccount controller has made the namespace's "default".
	if err := cp.KCM.WaitFor("ServiceAccount "+e.ns+"/default", 30*time.Second, func() error {
		_, err := cp.Admin.CoreV1().ServiceAccounts(e.ns).Get(ctx, "default", metav1.GetOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// No kubelet finishes graceful deletions here: force them, so the
		// namespace controller can empty the namespace.
		bg := context.Background()
		zero := metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}
		check(t, cp.Admin.CoreV1().Pods(e.ns).DeleteCollection(bg, zero, metav1.ListOptions{}))
		check(t, cluster.IgnoreNotFound(cp.Admin.CoreV1().Namespaces().Delete(bg, e.ns, metav1.DeleteOptions{})))
	})
	// Registered last, so it runs first: stop the agent, then detach.
	t.Cleanup(func() {
		if e.agent == nil {
			return
		}
		e.agent.Stop(10 * time.Second)
		// The ServiceAccount's RBAC is enough: nothing was ever denied.
		if b, err := os.ReadFile(e.agent.LogPath); err != nil {
			t.Error(err)
		} else if denied := deniedLines(b, e.apiRestarted); len(denied) > 0 {
			t.Errorf("the agent was denied something with the ServiceAccount of deploy/base/rbac.yaml:\n%s", strings.Join(denied, "\n"))
		}
		check(t, testkit.CleanupPins(socklbBin, e.fs.Path()))
		if t.Failed() {
			t.Logf("agent log (%s):\n%s", e.agent.LogPath, e.agent.Tail(60))
			if err := cp.Alive(); err != nil {
				t.Log(err)
			}
		}
	})
	return e
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Error(err)
	}
}

// startAgent runs `socklb agent` the way the DaemonSet does, with the
// ServiceAccount's kubeconfig instead of the in-cluster config, attached to
// the test's cgroup and bpffs.
func (e *env) startAgent(extraArgs ...string) {
	e.t.Helper()
	ports, err := testkit.FreePorts(2)
	if err != nil {
		e.t.Fatal(err)
	}
	e.healthz, e.metrics = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
	logPath := filepath.Join(e.logDir, "socklb-agent.log")
	e.agent, err = testkit.StartAgent(socklbBin, logPath, append([]string{
		"--kubeconfig", agentKubeconfig,
		"--node-name", nodeName,
		"--cgroup-path", e.cg.Path(),
		"--bpffs-path", e.fs.Path(),
		"--healthz-bind-address", e.healthz,
		"--metrics-bind-address", e.metrics,
	}, extraArgs...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	// The first sync: the informer caches are synced and the sync loop runs.
	if err := e.agent.WaitReady(e.healthz, e.metrics, 30*time.Second); err != nil {
		e.t.Fatal(err)
	}
	e.ready = time.Now()
}

// get fetches http://addr/path.
func (e *env) get(addr, path string) (int, string, error) { return testkit.Get(addr, path) }

// metric returns the value of one sample line of the agent's /metrics,
// e.g. "socklb_network_programming_duration_seconds_count".
func (e *env) metric(name string) (float64, bool) {
	e.t.Helper()
	body, err := testkit.Scrape(e.metrics)
	if err != nil {
		e.t.Fatal(err)
	}
	return testkit.Sample(body, name)
}

// --- API objects -----------------------------------------------------------

// podPorts are the lab servers' ports (lab.DefaultTCPPort, DefaultUDPPort),
// named so that Services can target them by name.
var podPorts = []corev1.ContainerPort{
	{Name: "tcp", ContainerPort: lab.DefaultTCPPort, Protocol: corev1.ProtocolTCP},
	{Name: "dns", ContainerPort: lab.DefaultUDPPort, Protocol: corev1.ProtocolUDP},
}

// createPod creates a Pod bound to this node and writes its status as a
// kubelet would: Running, with the lab pod's address, Ready or not. It
// returns the time of the status write, where network programming starts.
func (e *env) createPod(name, app, ip string, ready bool) time.Time {
	e.t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "server", Image: "registry.k8s.io/pause:3.10", Ports: podPorts}},
		},
	}
	if _, err := cp.Admin.CoreV1().Pods(e.ns).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return e.setPodStatus(name, ip, ready)
}

func (e *env) setPodStatus(name, ip string, ready bool) time.Time {
	e.t.Helper()
	pods := cp.Admin.CoreV1().Pods(e.ns)
	pod, err := pods.Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	at := time.Now()
	now := metav1.NewTime(at)
	pod.Status = corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    "127.0.0.1",
		HostIPs:   []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP:     ip,
		PodIPs:    []corev1.PodIP{{IP: ip}},
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "server", Image: "registry.k8s.io/pause:3.10", Ready: ready, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		}},
	}
	if _, err := pods.UpdateStatus(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return at
}

// deletePod deletes a Pod with a grace period: with no kubelet to finish
// the deletion it stays terminating, which the EndpointSlice controller
// publishes as ready=false, terminating=true. Returns the time of the write.
func (e *env) deletePod(name string, grace int64) time.Time {
	e.t.Helper()
	at := time.Now()
	err := cp.Admin.CoreV1().Pods(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace)})
	if err != nil {
		e.t.Fatal(err)
	}
	return at
}

// createService creates a ClusterIP Service selecting app=app, TCP 80 to
// the pods' "tcp" port and UDP 53 to their "dns" port, and returns it with
// the ClusterIP the API server allocated.
func (e *env) createService(name, app string) (*corev1.Service, time.Time) {
	e.t.Helper()
	http, dns := testkit.ServicePort("http", corev1.ProtocolTCP, 80), testkit.ServicePort("dns", corev1.ProtocolUDP, 53)
	http.TargetPort, dns.TargetPort = intstr.FromString("tcp"), intstr.FromString("dns")
	svc := testkit.Service(e.ns+"/"+name, "", http, dns)
	svc.Spec.Selector = map[string]string{"app": app}
	at := time.Now()
	svc, err := cp.Admin.CoreV1().Services(e.ns).Create(e.ctx, svc, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return svc, at
}

func (e *env) deleteService(name string) time.Time {
	e.t.Helper()
	at := time.Now()
	if err := cp.Admin.CoreV1().Services(e.ns).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return at
}

// --- the datapath ----------------------------------------------------------

// backendsOf reads the pinned maps and returns the backends of frontend
// key ("10.96.1.2:80/TCP") and whether it is programmed at all.
func (e *env) backendsOf(key string) ([]string, bool, error) {
	svcs, err := datapath.Dump(e.fs.Path())
	if err != nil {
		return nil, false, err
	}
	for _, s := range svcs {
		if s.Frontend.Key.String() != key {
			continue
		}
		var bs []string
		for _, b := range s.Backends {
			bs = append(bs, b.Backend.String())
		}
		slices.Sort(bs)
		return bs, true, nil
	}
	return nil, false, nil
}

// waitBackends polls the maps every 2 ms until frontend key has exactly the
// backends want (nil want with present: programmed with no backend, the
// REJECT case), and records the time since the API write at `since`
// (unless zero).
func (e *env) waitBackends(what, key string, want []string, since time.Time) {
	e.t.Helper()
	want = slices.Clone(want)
	slices.Sort(want)
	e.waitMaps(what, since, func() (bool, string) {
		got, present, err := e.backendsOf(key)
		if err != nil {
			return false, err.Error()
		}
		return present && slices.Equal(got, want), fmt.Sprintf("%s: present %v, backends %v, want %v", key, present, got, want)
	})
}

// waitGone waits until frontend key is no longer programmed.
func (e *env) waitGone(what, key string, since time.Time) {
	e.t.Helper()
	e.waitMaps(what, since, func() (bool, string) {
		_, present, err := e.backendsOf(key)
		if err != nil {
			return false, err.Error()
		}
		return !present, key + " still programmed"
	})
}

func (e *env) waitMaps(what string, since time.Time, done func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, state := done()
		if ok {
			if !since.IsZero() {
				recordLatency(e.t, what, time.Since(since))
			}
			return
		}
		if !e.agent.Alive() {
			e.t.Fatal(e.agent.ExitedErr())
		}
		if time.Now().After(deadline) {
			out, _ := exec.Command(socklbBin, "inspect", "--bpffs-path", e.fs.Path()).CombinedOutput()
			e.t.Fatalf("%s: maps not updated within 30s: %s\nsocklb inspect:\n%s", what, state, out)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// --- the client ------------------------------------------------------------

func (e *env) tcp(addr string, n int) *lab.Result {
	e.t.Helper()
	res, err := e.lab.Client("").TCP(e.ctx, e.cg, addr, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func (e *env) udp(addr string, n int) *lab.Result {
	e.t.Helper()
	res, err := e.lab.Client("").UDP(e.ctx, e.cg, addr, n)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

// deniedLines are the agent's log lines where the API server refused it.
// After an API server restart, refused lists and watches are the fresh
// server's RBAC cache warming up (see env.apiRestarted), not a missing rule.
func deniedLines(log []byte, apiRestarted bool) []string {
	var out []string
	for _, l := range strings.Split(string(log), "\n") {
		if !strings.Contains(strings.ToLower(l), "forbidden") {
			continue
		}
		if apiRestarted && (strings.Contains(l, "cannot watch resource") || strings.Contains(l, "cannot list resource")) {
			continue
		}
		// Admission, not RBAC: an Event about an object of an earlier
		// test's namespace, which its cleanup is deleting.
		if strings.Contains(l, "because it is being terminated") {
			continue
		}
		out = append(out, l)
	}
	return out
}
