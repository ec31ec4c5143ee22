package lab

import (
	"errors"

	"github.com/socklb/socklb/internal/testkit"
)

// World is what every agent test needs: a fresh child cgroup for the hooks,
// a private bpffs for the pins, and a lab of pods with their servers
// running. Close tears it down in reverse order.
type World struct {
	Cgroup *Cgroup
	BPFFS  *testkit.BPFFS
	Lab    *Lab
}

// NewWorld builds a World; on failure it removes what it had made.
func NewWorld(pods ...PodSpec) (w *World, err error) {
	w = &World{}
	defer func() {
		if err != nil {
			err = errors.Join(err, w.Close())
			w = nil
		}
	}()
	if w.Cgroup, err = NewCgroup(); err != nil {
		return w, err
	}
	if w.BPFFS, err = testkit.NewBPFFS(); err != nil {
		return w, err
	}
	if w.Lab, err = New(Config{Pods: pods}); err != nil {
		return w, err
	}
	return w, w.Lab.StartAllServers()
}

// Close removes the lab, the bpffs mount and the cgroup; idempotent.
func (w *World) Close() error {
	var errs []error
	if w.Lab != nil {
		errs = append(errs, w.Lab.Close())
	}
	if w.BPFFS != nil {
		errs = append(errs, w.BPFFS.Close())
	}
	if w.Cgroup != nil {
		errs = append(errs, w.Cgroup.Close())
	}
	return errors.Join(errs...)
}
