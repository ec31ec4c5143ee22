package datapath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
)

// Feature is an optional kernel capability socklb adapts to: it probes for
// each at start and falls back when one is missing.
type Feature string

const (
	// FeatureSetRetval is bpf_set_retval in cgroup programs (Linux 5.18).
	// Without it a connect() or sendmsg() to a Service with no usable
	// endpoint fails with EPERM, the only error a cgroup sock_addr program
	// can give there, instead of ECONNREFUSED / EHOSTUNREACH.
	FeatureSetRetval Feature = "set_retval"
	// FeatureSockDestroy is the bpf_sock_destroy kfunc with the tcp and udp
	// socket iterators (Linux 6.5). Without it sockets connected to a
	// removed backend are not destroyed (--terminate-sockets is off).
	FeatureSockDestroy Feature = "sock_destroy"
	// FeatureKernCtx is the bpf_cast_to_kern_ctx kfunc (Linux 6.2): the
	// sock_release hook reads a closing socket's cookie without making
	// one. Without it every TCP socket closing in the cgroup, translated
	// or not, gets a cookie made and looked up in sock_conns.
	FeatureKernCtx Feature = "kern_ctx"
	// FeatureTaskIter is the task iterator with the bpf_cgroup_from_id
	// and bpf_task_under_cgroup kfuncs (Linux 6.5): one walk of the task
	// list finds the namespaces a removal's socket walk covers. Without it
	// every process's /proc entry is read, about 9 µs a process each sync
	// that removes an endpoint.
	FeatureTaskIter Feature = "task_iter"
)

// AllFeatures lists every optional feature, for flags and metrics.
var AllFeatures = []Feature{FeatureSetRetval, FeatureSockDestroy, FeatureKernCtx, FeatureTaskIter}

// ParseFeatures reads a comma-separated list of feature names.
func ParseFeatures(s string) ([]Feature, error) {
	var out []Feature
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		f := Feature(name)
		known := false
		for _, k := range AllFeatures {
			known = known || k == f
		}
		if !known {
			return nil, fmt.Errorf("unknown kernel feature %q: use %s", name, joinFeatures(AllFeatures))
		}
		out = append(out, f)
	}
	return out, nil
}

func joinFeatures(fs []Feature) string {
	s := make([]string, len(fs))
	for i, f := range fs {
		s[i] = string(f)
	}
	return strings.Join(s, ", ")
}

// errDisabled says a feature was switched off by configuration.
var errDisabled = errors.New("disabled by --disable-kernel-features")

func (c Config) disabled(f Feature) bool {
	for _, d := range c.DisableFeatures {
		if d == f {
			return true
		}
	}
	return false
}

// probeSetRetval says why cgroup sock_addr programs may not call
// bpf_set_retval (missing), nil when they may. A probe that could not run
// at all (permissions, memory) is failed, so a capable kernel is never
// quietly run on the fallback.
func probeSetRetval(cfg Config) (missing, failed error) {
	if cfg.disabled(FeatureSetRetval) {
		return errDisabled, nil
	}
	err := features.HaveProgramHelper(ebpf.CGroupSockAddr, asm.FnSetRetval)
	switch {
	case err == nil:
		return nil, nil
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("bpf_set_retval in cgroup programs (Linux 5.18+): %w", err), nil
	}
	return nil, fmt.Errorf("probing the kernel for bpf_set_retval (needs root or CAP_BPF): %w", err)
}

// probeKernCtx says why the hooks may not call bpf_cast_to_kern_ctx, nil
// when they may: the kfunc is in the kernel's BTF.
func probeKernCtx(cfg Config) error {
	if cfg.disabled(FeatureKernCtx) {
		return errDisabled
	}
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return fmt.Errorf("reading the kernel's BTF for the bpf_cast_to_kern_ctx kfunc: %w", err)
	}
	var fn *btf.Func
	if err := spec.TypeByName("bpf_cast_to_kern_ctx", &fn); err != nil {
		return fmt.Errorf("the bpf_cast_to_kern_ctx kfunc (Linux 6.2+): %w", err)
	}
	return nil
}

// Features reports which optional features this datapath uses; a missing
// one maps to why.
func (d *Datapath) Features() map[Feature]error {
	d.objsMu.RLock()
	defer d.objsMu.RUnlock()
	out := map[Feature]error{FeatureSetRetval: d.retvalErr, FeatureSockDestroy: nil, FeatureKernCtx: probeKernCtx(d.cfg)}
	if d.term == nil {
		out[FeatureSockDestroy] = d.termErr
		if out[FeatureSockDestroy] == nil {
			out[FeatureSockDestroy] = errors.New("socket termination not asked for (--terminate-sockets=none) or no cgroup attached")
		}
		out[FeatureTaskIter] = errors.New("no socket termination: no namespaces to find")
	} else {
		out[FeatureTaskIter] = d.term.listErr
	}
	return out
}
