// Command firstsync measures where the agent's first sync goes at N
// Services of 10 endpoints: it starts the e2e control plane
// (internal/cluster), writes the Services and their EndpointSlices as
// socklb-bench does, starts the agent with --profiling on a fresh child
// cgroup and a private bpffs, takes a CPU profile of its start, and prints
// the agent's "first sync" line (informers, rebuild, map writes), its RSS
// once the profile is done and a heap profile then. Needs
// root and the e2e tools (`make e2e-tools`); it sends no traffic.
//
//	go run ./bench/cmd/firstsync -n 10000 -agent bin/socklb -out /tmp/firstsync
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/socklb/socklb/internal/cluster"
	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

const (
	ns       = "bench"
	nodeName = "node-a"
	perSvc   = 10
)

func main() {
	n := flag.Int("n", 10000, "Services, each with one EndpointSlice of 10 endpoints")
	agent := flag.String("agent", "bin/socklb", "the socklb binary (make build); several, comma-separated, run one after the other against the same objects (a,b,a,b alternates two builds)")
	out := flag.String("out", "", "directory for the logs and the profile (default: a temporary one)")
	profile := flag.Duration("profile", 15*time.Second, "length of the CPU profile taken from the agent's start")
	flag.Parse()
	if err := run(*n, strings.Split(*agent, ","), *out, *profile); err != nil {
		log.Fatal(err)
	}
}

func run(n int, agents []string, out string, profile time.Duration) error {
	root, _ := os.Getwd()
	tools, why := cluster.ToolsDir(root)
	if why != "" {
		return fmt.Errorf("%s", why)
	}
	if out == "" {
		var err error
		if out, err = os.MkdirTemp("", "socklb-firstsync-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(filepath.Join(out, "cluster"), 0o755); err != nil {
		return err
	}
	cp, err := cluster.Start(tools, filepath.Join(out, "cluster"))
	if err != nil {
		return err
	}
	defer cp.Stop()
	ctx := context.Background()
	if err := objects(ctx, cp.Admin, n); err != nil {
		return err
	}
	for i, agent := range agents {
		dir := filepath.Join(out, fmt.Sprintf("agent-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		fmt.Printf("--- %s (%s)\n", agent, time.Now().UTC().Format("15:04:05"))
		if err := runAgent(cp, agent, dir, profile); err != nil {
			return fmt.Errorf("%s: %w", agent, err)
		}
	}
	return nil
}

// runAgent starts one agent on a fresh cgroup and bpffs, so each starts
// from empty maps, and reports its first sync.
func runAgent(cp *cluster.ControlPlane, agent, out string, profile time.Duration) error {
	cg, err := lab.NewCgroup()
	if err != nil {
		return err
	}
	defer cg.Close()
	fs, err := testkit.NewBPFFS()
	if err != nil {
		return err
	}
	defer fs.Close()
	defer testkit.CleanupPins(agent, fs.Path())
	ports, err := testkit.FreePorts(2)
	if err != nil {
		return err
	}
	metrics := fmt.Sprintf("127.0.0.1:%d", ports[1])
	logPath := filepath.Join(out, "socklb-agent.log")
	start := time.Now()
	a, err := testkit.StartAgent(agent, logPath,
		"--kubeconfig", cp.AdminKubeconfig, "--node-name", nodeName,
		"--cgroup-path", cg.Path(), "--bpffs-path", fs.Path(),
		"--healthz-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--metrics-bind-address", metrics, "--profiling")
	if err != nil {
		return err
	}
	defer a.Stop(10 * time.Second)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := cpuProfile(metrics, profile, filepath.Join(out, "agent-start.pprof")); err != nil {
			log.Printf("CPU profile: %v", err)
		}
	}()
	line, err := waitLine(logPath, "first sync", 3*time.Minute)
	if err != nil {
		return err
	}
	fmt.Printf("first sync seen %.3fs after the agent's exec\n%s\n", time.Since(start).Seconds(), line)
	wg.Wait()
	// Read after the CPU profile so its own buffers are gone, as the
	// benchmark reads RSS "at full sync" once the agent is idle.
	rss, err := vmRSS(a.Pid())
	if err != nil {
		return err
	}
	fmt.Printf("agent RSS after the first sync: %.1f MiB\n", float64(rss)/(1<<20))
	heap := filepath.Join(out, "agent-heap.pprof")
	if err := fetch(fmt.Sprintf("http://%s/debug/pprof/heap", metrics), heap); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	fmt.Printf("profiles: %s, %s; agent log: %s\n", filepath.Join(out, "agent-start.pprof"), heap, logPath)
	return nil
}

// vmRSS is the process's resident set (VmRSS of /proc/<pid>/status), what
// socklb-bench reports as the agent's RSS.
func vmRSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

func fetch(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(f, resp.Body)
	return err
}

// cpuProfile fetches /debug/pprof/profile from the agent as soon as its
// metrics server answers.
func cpuProfile(addr string, d time.Duration, path string) error {
	url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", addr, int(d.Seconds()))
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := fetch(url, path)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func waitLine(path, msg string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if f, err := os.Open(path); err == nil {
			sc := bufio.NewScanner(f)
			sc.Buffer(make([]byte, 1<<20), 1<<20)
			for sc.Scan() {
				if strings.Contains(sc.Text(), msg) {
					f.Close()
					return sc.Text(), nil
				}
			}
			f.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", fmt.Errorf("no %q line in %s within %s", msg, path, timeout)
}

// objects writes the Node, the namespace and n selector-less Services with
// one EndpointSlice each, as socklb-bench's fillers.
func objects(ctx context.Context, c kubernetes.Interface, n int) error {
	node, err := c.CoreV1().Nodes().Create(ctx, testkit.Node(nodeName, ""), metav1.CreateOptions{})
	if err != nil {
		return err
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.244.0.1"}}
	if _, err := c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		return err
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	start := time.Now()
	jobs := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := fillService(ctx, c, i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case jobs <- i:
		case err := <-errs:
			close(jobs)
			wg.Wait()
			return err
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	log.Printf("%d Services x %d endpoints written in %s", n, perSvc, time.Since(start).Round(time.Millisecond))
	return nil
}

func fillService(ctx context.Context, c kubernetes.Interface, i int) error {
	name := fmt.Sprintf("fill-%d", i)
	svc := testkit.Service(ns+"/"+name, "", corev1.ServicePort{Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP})
	if _, err := c.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	s := testkit.EndpointSlice(ns+"/"+name, name, discoveryv1.AddressTypeIPv4, []discoveryv1.EndpointPort{testkit.EndpointPort("", corev1.ProtocolTCP, 8080)})
	for j := 0; j < perSvc; j++ {
		v := uint32(10)<<24 | uint32(128)<<16 | uint32(i*16+j)
		ip := netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
		s.Endpoints = append(s.Endpoints, testkit.OnNode(nodeName, testkit.ReadyEndpoint(ip)))
	}
	if _, err := c.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("%s slice: %w", name, err)
	}
	return nil
}
