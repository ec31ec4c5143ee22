package datapath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Check says whether Open can start with c, without creating, mounting,
// loading or attaching anything: the values, the bpffs path and the
// cgroup. Open runs it first; the agent runs it before it binds its ports
// and starts its source, so a bad path fails the start with nothing to
// clean up (an Open that fails after ensureBPFFS leaves a pin directory,
// one that fails at attach leaves the maps pinned).
func (c Config) Check() error {
	c = c.withDefaults()
	if err := c.validate(); err != nil {
		return err
	}
	if err := checkBPFFS(c.BPFFSPath); err != nil {
		return err
	}
	if c.CgroupPath != "" {
		return checkCgroup(c.CgroupPath)
	}
	return nil
}

// checkBPFFS is ensureBPFFS without its side effects: path, or the
// nearest of its parents that exists (where ensurePinDir would create
// it), must be on a bpf filesystem, unless path is under /sys/fs/bpf and
// that is unmounted, which ensureBPFFS mounts. An existing path must
// already be a pin directory ensurePinDir accepts.
func checkBPFFS(path string) error {
	path = filepath.Clean(path)
	if strings.HasPrefix(path+"/", defaultBPFFS+"/") && !isBPFFS(defaultBPFFS) {
		return nil
	}
	// path itself must not be a symlink (ensurePinDir); its parents may.
	dir := path
	fi, err := os.Lstat(dir)
	for errors.Is(err, fs.ErrNotExist) && filepath.Dir(dir) != dir {
		dir = filepath.Dir(dir)
		fi, err = os.Stat(dir)
	}
	switch {
	case err != nil:
		return fmt.Errorf("checking --bpffs-path %s: %w", path, err)
	case dir == path:
		if err := checkPinDir(dir, fi); err != nil {
			return err
		}
	case !fi.IsDir():
		return fmt.Errorf("--bpffs-path %s: %s is not a directory: pass a directory on a bpf filesystem, such as /sys/fs/bpf/socklb", path, dir)
	}
	if !isBPFFS(dir) {
		return fmt.Errorf("--bpffs-path %s is not on a bpf filesystem (%s is not one): pass a directory under a bpffs mount, such as /sys/fs/bpf/socklb "+
			"(socklb mounts /sys/fs/bpf when it is not), or mount one with `mount -t bpf -o mode=0700 bpf DIR`", path, dir)
	}
	return nil
}

// checkCgroup checks that path is a cgroup v2 directory the hooks can
// attach to; attachHooks finds out only after the maps are pinned.
func checkCgroup(path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("--cgroup-path %s does not exist: pass a cgroup v2 directory (the default is the cgroup2 mount: every process of the node)", path)
	case err != nil:
		return fmt.Errorf("checking --cgroup-path %s: %w", path, err)
	case !fi.IsDir():
		return fmt.Errorf("--cgroup-path %s is not a directory: pass a cgroup v2 directory (the default is the cgroup2 mount: every process of the node)", path)
	}
	_, err = cgroupID(path)
	return err
}
