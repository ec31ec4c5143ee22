package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
)

// runningAgent is a `socklb agent` process and the configuration it runs
// with: its own command line and --config file, parsed by the agent's own
// code. `socklb status` reads the agent's pins and ports from it, so an
// install configured through --config is read as the agent reads it.
type runningAgent struct {
	pid        int
	configFile string // the agent's --config, as it gave it; "" for none
	cfg        *SocklbConfiguration
}

// findAgent finds the agent under proc (/proc): the one in this process's
// mount namespace (the container `kubectl exec` runs in), else the only
// one visible. With hostPID, a pod sees every agent of the node: during a
// rolling update the old pod's agent and the new one's both run.
func findAgent(proc string) (runningAgent, error) {
	self, _ := os.Readlink(filepath.Join(proc, "self"))
	selfNS, _ := os.Readlink(filepath.Join(proc, "self", "ns", "mnt"))
	entries, err := os.ReadDir(proc)
	if err != nil {
		return runningAgent{}, err
	}
	var all, ours []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || e.Name() == self {
			continue
		}
		argv, err := cmdline(proc, pid)
		if err != nil || !isAgent(argv) {
			continue // gone since ReadDir, a kernel thread, or another program
		}
		all = append(all, pid)
		if ns, err := os.Readlink(filepath.Join(proc, e.Name(), "ns", "mnt")); err == nil && selfNS != "" && ns == selfNS {
			ours = append(ours, pid)
		}
	}
	sort.Ints(all)
	pick := ours
	if len(ours) == 0 {
		pick = all
	}
	switch {
	case len(all) == 0:
		return runningAgent{}, fmt.Errorf("no `socklb agent` process in %s: run socklb status in the agent's container (kubectl -n kube-system exec POD -c socklb -- /socklb status), or on its node as root", proc)
	case len(pick) > 1:
		where := "none in this container"
		if len(ours) > 1 {
			where = fmt.Sprintf("%d in this container", len(ours))
		}
		return runningAgent{}, fmt.Errorf("%d `socklb agent` processes (pids %s), %s: run socklb status in the agent's container, or choose with --bpffs-path, --healthz-address and --metrics-address", len(all), joinInts(all), where)
	}
	return readAgent(proc, pick[0])
}

// readAgent parses the command line of agent pid, and the --config file
// it names, as `socklb agent` parsed them when it started. The file is
// read through the process's root and working directory, as it sees it.
func readAgent(proc string, pid int) (runningAgent, error) {
	argv, err := cmdline(proc, pid)
	if err != nil {
		return runningAgent{}, err
	}
	if !isAgent(argv) {
		return runningAgent{}, fmt.Errorf("process %d is not `socklb agent`: %q", pid, argv)
	}
	dir := filepath.Join(proc, strconv.Itoa(pid))
	cwd, err := os.Readlink(filepath.Join(dir, "cwd"))
	if err != nil {
		cwd = "/"
	}
	o := newAgentOptions()
	o.readFile = func(path string) ([]byte, error) {
		if !filepath.IsAbs(path) {
			path = filepath.Join(cwd, path)
		}
		return os.ReadFile(filepath.Join(dir, "root", path))
	}
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	fs.SetOutput(io.Discard) // deprecation notices are the agent's to print
	for _, s := range o.flagSets().FlagSets {
		fs.AddFlagSet(s)
	}
	if err := fs.Parse(argv[2:]); err != nil {
		return runningAgent{}, fmt.Errorf("the command line of agent process %d: %w", pid, err)
	}
	if err := o.loadConfig(fs); err != nil {
		return runningAgent{}, fmt.Errorf("agent process %d: %w", pid, err)
	}
	return runningAgent{pid: pid, configFile: o.configFile, cfg: o.cfg}, nil
}

func cmdline(proc string, pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSuffix(b, []byte{0})
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(string(b), "\x00"), nil
}

// isAgent: the image's /socklb agent, or a socklb binary anywhere.
func isAgent(argv []string) bool {
	return len(argv) >= 2 && filepath.Base(argv[0]) == "socklb" && argv[1] == "agent"
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
