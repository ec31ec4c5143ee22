package lab

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// netnsDir is where iproute2 keeps named network namespaces.
const netnsDir = "/run/netns"

// NetNSPath is the file of a named network namespace, for
// `nsenter --net=<path>` or setns(2).
func NetNSPath(name string) string { return filepath.Join(netnsDir, name) }

// NetNSCommand prepares name with args to run inside the named network
// namespace through `nsenter --net=`. Unlike `ip netns exec`, nsenter keeps
// the caller's mount namespace, so bpffs and the cgroup2 mount stay
// visible: a socklb agent run this way can pin maps and attach to a lab
// cgroup. nsenter execs name in place (no fork), so the pid, Pdeathsig and
// a cgroup chosen at clone time (SysProcAttr.CgroupFD) are name's own.
func NetNSCommand(ctx context.Context, netns, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + NetNSPath(netns), "--", name}, args...)...)
}

// addNetNS creates a namespace, registers its removal on td, and brings its
// lo up. A name that exists already is an error: a lab never adopts a
// namespace it did not create.
func addNetNS(td *teardown, name string) error {
	if err := ip("netns", "add", name); err != nil {
		return err
	}
	del := func() error { return ip("netns", "del", name) }
	if err := td.push(del); err != nil {
		return errors.Join(err, del())
	}
	if err := ip("-n", name, "link", "set", "lo", "up"); err != nil {
		return err
	}
	// Belt and braces: a fresh namespace has no routes, but make sure.
	out, err := ipOut("-n", name, "route", "show", "default")
	if err != nil {
		return err
	}
	if strings.TrimSpace(out) != "" {
		return fmt.Errorf("lab: netns %s unexpectedly has a default route: %s", name, out)
	}
	return nil
}

// sysctl sets key=value pairs inside the named namespace. /proc/sys/net
// answers for the namespace of the process that reads it, so sysctl(8)
// run through nsenter sets the namespace's own values.
func sysctl(netns string, kv ...string) error {
	args := append([]string{"-q", "-w"}, kv...)
	out, err := NetNSCommand(context.Background(), netns, "sysctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("sysctl in %s: %v: %s", netns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ip runs iproute2's ip with args.
func ip(args ...string) error {
	_, err := ipOut(args...)
	return err
}

func ipOut(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
