package node

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Cgroups is one fresh cgroup of the same name in every mounted hierarchy:
// kubelet's cgroupRoot. runc puts each container at its cgroupsPath in
// every hierarchy, the v2 tree included, so every pod lands below V2.
type Cgroups struct {
	Name string   // the directory name, also kubelet's cgroupRoot ("/"+Name)
	V2   string   // the child in the cgroup v2 tree: where socklb attaches
	Dirs []string // the child in every hierarchy, V2 included
}

// hierarchies lists the mount points of every cgroup (v1) and cgroup2
// filesystem, and which one is v2.
func hierarchies() (all []string, v2 string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld != "-" || i+1 >= len(fields) || len(fields) < 5 {
				continue
			}
			switch fields[i+1] {
			case "cgroup2":
				v2 = fields[4]
				all = append(all, fields[4])
			case "cgroup":
				all = append(all, fields[4])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	if v2 == "" {
		return nil, "", errors.New("no cgroup2 hierarchy is mounted: socklb's hooks need one")
	}
	return all, v2, nil
}

// NewCgroups makes the child name in every hierarchy. It refuses a name
// that exists anywhere: a cgroup we did not make may hold processes we did
// not start.
func NewCgroups(name string) (*Cgroups, error) {
	all, v2, err := hierarchies()
	if err != nil {
		return nil, err
	}
	c := &Cgroups{Name: name, V2: filepath.Join(v2, name)}
	for _, h := range all {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			c.Remove()
			return nil, fmt.Errorf("making cgroup %s: %w", dir, err)
		}
		c.Dirs = append(c.Dirs, dir)
		// A v1 cpuset child starts with no CPUs and no memory nodes:
		// copy the parent's, or nothing can run in it.
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil && h != v2 {
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
					c.Remove()
					return nil, fmt.Errorf("setting %s of %s: %w", f, dir, err)
				}
			}
		}
	}
	return c, nil
}

// Join moves the calling process into the v2 child only: its children
// (containerd, kubelet, the control plane, e2e.test) inherit it, so
// socklb attached there sees them as it sees pods.
func (c *Cgroups) Join() error {
	return os.WriteFile(filepath.Join(c.V2, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
}

// Pids lists every process in the children, recursively, in every
// hierarchy.
func (c *Cgroups) Pids() []int {
	seen := map[int]bool{}
	for _, d := range c.Dirs {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || !e.IsDir() {
				return nil
			}
			b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
			if err != nil {
				return nil
			}
			for _, l := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(l); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	pids := make([]int, 0, len(seen))
	for p := range seen {
		pids = append(pids, p)
	}
	sort.Ints(pids)
	return pids
}

// KillAll SIGKILLs every process left in the children (each one was
// started by this run: the cgroups are fresh) until none is left or the
// timeout passes. It never signals the calling process.
func (c *Cgroups) KillAll(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		var left []int
		for _, pid := range c.Pids() {
			if pid == os.Getpid() {
				continue
			}
			left = append(left, pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(left) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v survive SIGKILL in cgroup %s", left, c.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Remove removes the children depth-first in every hierarchy. The
// cgroups must be empty (KillAll, and the caller moved out).
func (c *Cgroups) Remove() error {
	var errs []error
	for _, d := range c.Dirs {
		var dirs []string
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first.
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, p := range dirs {
			var err error
			for i := 0; i < 50; i++ {
				if err = syscall.Rmdir(p); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond) // a dying process leaves its cgroup late
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("removing cgroup %s: %w", p, err))
			}
		}
	}
	return errors.Join(errs...)
}
