package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/pkg/datapath"
)

type config struct {
	sizes    []int
	rounds   int
	duration time.Duration
	queries  int
	testRuns int
	maps     mapSizes
}

// measure builds one lab, then for each size programs the maps and runs
// the rounds. The world and the datapath are torn down before it returns,
// also on error.
func measure(ctx context.Context, cfg config) (r *run, err error) {
	r, err = newRun(cfg)
	if err != nil {
		return nil, err
	}
	specs := make([]lab.PodSpec, endpointsPerService)
	pods := make([]netip.Addr, endpointsPerService)
	for i := range specs {
		specs[i] = lab.PodSpec{Name: fmt.Sprintf("pod-%d", i+1), IP: fmt.Sprintf("10.244.1.%d", i+1)}
		pods[i] = netip.MustParseAddr(specs[i].IP)
	}
	w, err := lab.NewWorld(specs...)
	if err != nil {
		return nil, fmt.Errorf("building the lab: %w", err)
	}
	defer func() { err = errors.Join(err, w.Close()) }()

	dp, err := datapath.Open(datapath.Config{
		BPFFSPath:        w.BPFFS.Path(),
		CgroupPath:       w.Cgroup.Path(),
		TerminateSockets: datapath.TerminateNone,
		MaxServices:      cfg.maps.MaxServices,
		MaxBackends:      cfg.maps.MaxBackends,
		MaxSockets:       cfg.maps.MaxSockets,
		GrowBudget:       0,
	})
	if err != nil {
		return nil, fmt.Errorf("opening the datapath: %w", err)
	}
	defer func() {
		// Closed first: Cleanup refuses pins a live datapath holds.
		cl := dp.Close()
		_, cerr := datapath.Cleanup(w.BPFFS.Path(), false)
		err = errors.Join(err, cl, cerr)
	}()

	// The kernel counts run_time_ns only while some fd holds stats on.
	statsOn, err := datapath.EnableRunTimeStats()
	if err != nil {
		return nil, err
	}
	defer statsOn.Close()

	empty, err := newEmptyHook()
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, empty.Close()) }()

	m := &measurer{ctx: ctx, w: w, cfg: cfg, pod: pods[0], empty: empty}
	defer func() { m.progs.Close() }()
	for _, n := range cfg.sizes {
		want, err := desired(n, pods, lab.DefaultTCPPort, lab.DefaultUDPPort)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		if err := dp.Apply(want).Err(); err != nil {
			return nil, fmt.Errorf("programming %d Services: %w", n, err)
		}
		fmt.Fprintf(os.Stderr, "hookcost: %d Services programmed in %s\n", n, time.Since(start).Round(time.Millisecond))
		// Opened once programmed: the egress hook is attached only then.
		if m.progs == nil {
			if m.progs, err = datapath.OpenHookPrograms(w.BPFFS.Path(), hookNames...); err != nil {
				return nil, err
			}
		}
		sz, err := m.size(n)
		if err != nil {
			return nil, fmt.Errorf("N=%d: %w", n, err)
		}
		if sz.TranslateAlone, err = translateAlone(dp.Maps(), cfg.testRuns); err != nil {
			return nil, fmt.Errorf("N=%d: %w", n, err)
		}
		r.Sizes = append(r.Sizes, *sz)
	}
	return r, nil
}

type measurer struct {
	ctx   context.Context
	w     *lab.World
	progs datapath.HookPrograms
	cfg   config
	pod   netip.Addr
	empty *emptyHook
}

// size runs the rounds at one size. Rounds alternate which dataplane goes
// first, so a load change on the shared machine hits both alike.
func (m *measurer) size(n int) (*sizeResult, error) {
	sz := &sizeResult{Services: n, Hooks: map[string]progStats{}, PassHooks: map[string]progStats{}, EmptyHooks: map[string]progStats{}}
	vip := measuredVIP.String()
	tcpVIP, udpVIP := vip+":"+strconv.Itoa(vipTCPPort), vip+":"+strconv.Itoa(vipUDPPort)
	tcpPod := netip.AddrPortFrom(m.pod, lab.DefaultTCPPort).String()
	udpPod := netip.AddrPortFrom(m.pod, lab.DefaultUDPPort).String()

	// One short warm-up each: page in the binary, fill the socket caches.
	for _, a := range []struct {
		cg   *lab.Cgroup
		addr string
	}{{m.w.Cgroup, tcpVIP}, {nil, tcpPod}} {
		if _, err := m.tcp(a.cg, a.addr, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
	for i := 0; i < m.cfg.rounds; i++ {
		var rd round
		order := []dataplane{viaSocklb, direct, passthrough, emptyProg}
		order = append(order[i%4:], order[:i%4]...)
		for _, dpl := range order {
			cg, tcpAddr, udpAddr := (*lab.Cgroup)(nil), tcpPod, udpPod
			stats := m.progs.Stats
			switch dpl {
			case viaSocklb:
				cg, tcpAddr, udpAddr = m.w.Cgroup, tcpVIP, udpVIP
			case passthrough:
				cg = m.w.Cgroup
			case emptyProg:
				cg, stats = m.empty.cg, m.empty.stats
			}
			before, err := stats()
			if err != nil {
				return nil, err
			}
			tcp, err := m.tcp(cg, tcpAddr, m.cfg.duration)
			if err != nil {
				return nil, err
			}
			udp, err := m.udp(cg, udpAddr, m.cfg.queries)
			if err != nil {
				return nil, err
			}
			after, err := stats()
			if err != nil {
				return nil, err
			}
			switch dpl {
			case viaSocklb:
				rd.Socklb = pair{TCP: tcp, UDP: udp}
				add(sz.Hooks, datapath.SubStats(before, after))
			case passthrough:
				rd.Passthrough = pair{TCP: tcp, UDP: udp}
				add(sz.PassHooks, datapath.SubStats(before, after))
			case emptyProg:
				rd.Empty = pair{TCP: tcp, UDP: udp}
				add(sz.EmptyHooks, datapath.SubStats(before, after))
			default:
				rd.Direct = pair{TCP: tcp, UDP: udp}
			}
		}
		fmt.Fprintf(os.Stderr, "hookcost: N=%d round %d: connects/s %.0f vs %.0f direct, UDP req/s %.0f vs %.0f direct\n",
			n, i+1, rd.Socklb.TCP.PerSec, rd.Direct.TCP.PerSec, rd.Socklb.UDP.PerSec, rd.Direct.UDP.PerSec)
		sz.Rounds = append(sz.Rounds, rd)
	}
	return sz, nil
}

// The ways the client reaches a pod: through the ClusterIP, to the pod IP
// with no hooks at all, to the pod IP with the hooks attached (what every
// pod-to-pod connect in socklb's cgroup pays: a Service miss), and to the
// pod IP from a cgroup with only an empty connect4 program (emptyHook).
type dataplane int

const (
	viaSocklb dataplane = iota
	direct
	passthrough
	emptyProg
)

func add(sum, d map[string]progStats) {
	for name, v := range d {
		h := sum[name]
		h.RunTimeNS += v.RunTimeNS
		h.RunCount += v.RunCount
		sum[name] = h
	}
}

func (m *measurer) tcp(cg *lab.Cgroup, addr string, d time.Duration) (rate, error) {
	res, err := m.w.Lab.Client(lab.DefaultClient).Loop(m.ctx, cg, addr, d)
	if err != nil {
		return rate{}, err
	}
	return rateOf(res, addr)
}

func (m *measurer) udp(cg *lab.Cgroup, addr string, n int) (rate, error) {
	res, err := m.w.Lab.Client(lab.DefaultClient).RunResult(m.ctx, cg, "udp", "--addr", addr, "--count", strconv.Itoa(n))
	if err != nil {
		return rate{}, err
	}
	return rateOf(res, addr)
}

// rateOf refuses a run with errors: a failed connect is cheaper than a
// successful one and would flatter the ratio.
func rateOf(res *lab.Result, addr string) (rate, error) {
	if e := res.TotalErrors(); e > 0 {
		return rate{}, fmt.Errorf("%s to %s: %d of %d attempts failed (first: %s)", res.Mode, addr, e, res.Attempts, res.FirstError)
	}
	d, err := time.ParseDuration(res.Duration)
	if err != nil || d <= 0 {
		return rate{}, fmt.Errorf("%s to %s: labclient reported duration %q", res.Mode, addr, res.Duration)
	}
	return rate{OK: res.OK, Seconds: d.Seconds(), PerSec: float64(res.OK) / d.Seconds()}, nil
}
