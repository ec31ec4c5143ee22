// Command termcost measures what socket termination costs a sync with
// many processes in the hooked cgroup (issue #22 item 5): the agent
// destroys the sockets of a removed backend by walking the sockets of
// every network namespace a process of the cgroup lives in, once per sync.
//
// One lab (pods serving UDP, a fresh child cgroup, a private bpffs), one
// datapath attached to that cgroup with --terminate-sockets=udp, one UDP
// Service of 10 endpoints. A round is two syncs: one removes an endpoint
// (its sockets are looked for), the next puts it back (nothing to look
// for). Rounds run with the cgroup empty, then, once -procs sleeping
// processes spread over -netns network namespaces were started in it,
// twice: with the namespaces found from every process's /proc entry
// (--disable-kernel-features task_iter), and with one walk of the kernel's
// task list; each phase its own datapath, all in the same process.
//
//	go run ./bench/cmd/termcost -procs 10000 -netns 100 -rounds 20 -out bench/results/termcost
//
// Needs root. Writes one raw JSON file named after the commit measured.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/pkg/datapath"
	"github.com/socklb/socklb/pkg/servicemap"
)

// How a phase's datapath finds the namespaces to walk.
const (
	listProc  = "proc"      // every process's /proc entry (--disable-kernel-features task_iter)
	listTasks = "task_iter" // one walk of the kernel's task list
)

type phase struct {
	Listing    string    `json:"listing"`
	Processes  int       `json:"processes"`
	Namespaces int       `json:"network_namespaces"`
	RemoveMs   []float64 `json:"remove_sync_ms"` // syncs that retire an endpoint: a socket walk
	AddMs      []float64 `json:"add_sync_ms"`    // syncs that retire nothing: no walk
	MedRemove  float64   `json:"remove_sync_median_ms"`
	MedAdd     float64   `json:"add_sync_median_ms"`
	// Of the remove syncs, as the datapath timed them (ApplyResult's
	// SocketScan): finding the namespaces, then walking their sockets.
	ListMs  []float64 `json:"namespace_listing_ms"`
	WalkMs  []float64 `json:"socket_walk_ms"`
	Found   int       `json:"namespaces_walked"`
	MedList float64   `json:"namespace_listing_median_ms"`
	MedWalk float64   `json:"socket_walk_median_ms"`
}

type run struct {
	Commit string `json:"git_commit"`
	Dirty  bool   `json:"git_dirty"`
	Date   string `json:"date"`
	Kernel string `json:"kernel"`
	Rounds int    `json:"rounds"`
	// SlowListing is why the datapath lists namespaces from /proc rather
	// than with its task iterator ("": it used the iterator).
	SlowListing string  `json:"slow_namespace_listing,omitempty"`
	Phases      []phase `json:"phases"`
	// Ratio is the median remove sync with the processes, the task walk
	// over /proc's listing.
	Ratio float64 `json:"remove_ratio_task_iter_over_proc"`
}

func main() {
	procs := flag.Int("procs", 10000, "sleeping processes started in the hooked cgroup for the second phase")
	netns := flag.Int("netns", 100, "network namespaces the processes spread over (one new namespace per this many processes)")
	rounds := flag.Int("rounds", 20, "remove/add sync pairs per phase")
	out := flag.String("out", "bench/results/termcost", "directory for the raw JSON file")
	flag.Parse()
	if os.Geteuid() != 0 {
		fail(errors.New("needs root: it loads BPF programs, makes network namespaces and a cgroup"))
	}
	if *netns < 1 || *procs < *netns {
		fail(fmt.Errorf("-netns %d with -procs %d: want 1 <= netns <= procs", *netns, *procs))
	}
	r, err := measure(*procs, *netns, *rounds)
	if err != nil {
		fail(err)
	}
	path, err := r.write(*out)
	if err != nil {
		fail(err)
	}
	b, _ := json.MarshalIndent(r.Phases, "", "  ")
	fmt.Printf("%s\nremove sync with %d processes, task walk over /proc: %.3fx\nraw results: %s\n", b, *procs, r.Ratio, path)
}

func measure(procs, netns, rounds int) (r *run, err error) {
	r = &run{Date: time.Now().UTC().Format(time.RFC3339), Rounds: rounds}
	if r.Commit, r.Dirty, err = commit(); err != nil {
		return nil, err
	}
	var uts syscall.Utsname
	_ = syscall.Uname(&uts)
	r.Kernel = strings.TrimRight(string(int8sToBytes(uts.Release[:])), "\x00")

	const endpoints = 10
	specs := make([]lab.PodSpec, endpoints)
	for i := range specs {
		specs[i] = lab.PodSpec{Name: fmt.Sprintf("pod-%d", i+1), IP: fmt.Sprintf("10.244.1.%d", i+1)}
	}
	w, err := lab.NewWorld(specs...)
	if err != nil {
		return nil, fmt.Errorf("building the lab: %w", err)
	}
	defer func() { err = errors.Join(err, w.Close()) }()
	full, less := udpService(specs, 0), udpService(specs, 1)
	// runPhase opens a datapath that finds the namespaces by listing, runs
	// the rounds, and closes it (its pins removed) for the next phase.
	runPhase := func(listing string, p phase) (_ phase, err error) {
		p.Listing = listing
		cfg := datapath.Config{BPFFSPath: w.BPFFS.Path(), CgroupPath: w.Cgroup.Path(), TerminateSockets: datapath.TerminateUDP}
		if listing == listProc {
			cfg.DisableFeatures = []datapath.Feature{datapath.FeatureTaskIter}
		}
		dp, err := datapath.Open(cfg)
		if err != nil {
			return p, fmt.Errorf("opening the datapath: %w", err)
		}
		defer func() {
			cl := dp.Close()
			_, cerr := datapath.Cleanup(w.BPFFS.Path(), false)
			err = errors.Join(err, cl, cerr)
		}()
		if err := dp.SocketTerminationError(); err != nil {
			return p, fmt.Errorf("socket termination unavailable on this kernel: %w", err)
		}
		if err := dp.SocketWalkSlowError(); listing == listTasks && err != nil {
			return p, fmt.Errorf("the task walk is unavailable: %w", err)
		}
		if err := dp.Apply(full).Err(); err != nil {
			return p, err
		}
		for range rounds {
			for _, step := range []struct {
				s   servicemap.State
				out *[]float64
			}{{less, &p.RemoveMs}, {full, &p.AddMs}} {
				start := time.Now()
				res := dp.Apply(step.s)
				ms := float64(time.Since(start).Microseconds()) / 1000
				if err := errors.Join(res.Err(), res.SocketErr); err != nil {
					return p, err
				}
				*step.out = append(*step.out, ms)
				if step.out == &p.RemoveMs {
					sc := res.SocketScan
					p.ListMs = append(p.ListMs, float64(sc.Listing.Microseconds())/1000)
					p.WalkMs = append(p.WalkMs, float64(sc.Walk.Microseconds())/1000)
					p.Found = sc.Namespaces
				}
			}
		}
		p.MedRemove, p.MedAdd = median(p.RemoveMs), median(p.AddMs)
		p.MedList, p.MedWalk = median(p.ListMs), median(p.WalkMs)
		return p, nil
	}

	empty, err := runPhase(listTasks, phase{})
	if err != nil {
		return nil, fmt.Errorf("with the cgroup empty: %w", err)
	}
	sleepers, err := startSleepers(w.Cgroup, procs, netns)
	defer func() { err = errors.Join(err, sleepers.stop()) }()
	if err != nil {
		return nil, err
	}
	r.Phases = []phase{empty}
	for _, listing := range []string{listProc, listTasks} {
		p, err := runPhase(listing, phase{Processes: procs, Namespaces: netns})
		if err != nil {
			return nil, fmt.Errorf("with %d processes, listing by %s: %w", procs, listing, err)
		}
		r.Phases = append(r.Phases, p)
	}
	r.Ratio = r.Phases[2].MedRemove / r.Phases[1].MedRemove
	return r, nil
}

// udpService is one UDP ClusterIP with the pods' endpoints but the first
// drop of them.
func udpService(pods []lab.PodSpec, drop int) servicemap.State {
	fe := servicemap.Frontend{
		Key:     servicemap.FrontendKey{Addr: netip.MustParseAddr("10.96.0.10"), Port: 53, Proto: servicemap.UDP},
		Service: types.NamespacedName{Namespace: "termcost", Name: "dns"}, PortName: "dns",
	}
	for _, p := range pods[drop:] {
		fe.Backends = append(fe.Backends, servicemap.Backend{Addr: netip.MustParseAddr(p.IP), Port: lab.DefaultUDPPort})
	}
	return servicemap.State{fe.Key: fe}
}

// sleepers are processes started straight into the cgroup
// (CLONE_INTO_CGROUP): netns of them unshare a network namespace, the
// others enter one of those.
type sleepers []*exec.Cmd

func startSleepers(cg *lab.Cgroup, procs, netns int) (sleepers, error) {
	var s sleepers
	start := func(name string, args ...string) (*exec.Cmd, error) {
		c := exec.Command(name, args...)
		c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cg.FD(), Pdeathsig: syscall.SIGKILL}
		if err := c.Start(); err != nil {
			return nil, fmt.Errorf("starting %s (process %d): %w", name, len(s)+1, err)
		}
		s = append(s, c)
		return c, nil
	}
	var leaders []int
	for range netns {
		c, err := start("unshare", "--net", "sleep", "3600")
		if err != nil {
			return s, err
		}
		leaders = append(leaders, c.Process.Pid)
	}
	// unshare execs sleep once the namespace is made: wait for that, so
	// the followers enter the leader's new namespace, not the host's.
	for _, pid := range leaders {
		if err := waitExec(pid, "sleep"); err != nil {
			return s, err
		}
	}
	for i := netns; i < procs; i++ {
		leader := leaders[i%netns]
		if _, err := start("nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", leader), "sleep", "3600"); err != nil {
			return s, err
		}
	}
	fmt.Fprintf(os.Stderr, "termcost: %d processes over %d network namespaces in %s\n", procs, netns, cg.Path())
	return s, nil
}

func waitExec(pid int, comm string) error {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if err == nil && strings.TrimSpace(string(b)) == comm {
			return nil
		}
	}
	return fmt.Errorf("process %d did not become %s within 10 s", pid, comm)
}

// stop kills every sleeper this run started, by its own process, and
// reaps it.
func (s sleepers) stop() error {
	for _, c := range s {
		_ = c.Process.Kill()
	}
	for _, c := range s {
		_ = c.Wait()
	}
	return nil
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func commit() (string, bool, error) {
	out, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		return "", false, fmt.Errorf("run termcost from the socklb checkout: git rev-parse HEAD: %w", err)
	}
	status, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output()
	if err != nil {
		return "", false, err
	}
	return strings.TrimSpace(string(out)), len(status) > 0, nil
}

func (r *run) write(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	t, _ := time.Parse(time.RFC3339, r.Date)
	name := fmt.Sprintf("%s-%.12s", t.Format("20060102T150405Z"), r.Commit)
	if r.Dirty {
		name += "-dirty"
	}
	path := filepath.Join(dir, name+".json")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

func int8sToBytes(s []int8) []byte {
	b := make([]byte, len(s))
	for i, c := range s {
		b[i] = byte(c)
	}
	return b
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "termcost: %v\n", err)
	os.Exit(1)
}
