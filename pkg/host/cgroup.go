package host

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// Cgroup2Root finds where cgroup v2 is mounted: /sys/fs/cgroup on a pure
// v2 host, /sys/fs/cgroup/unified on a hybrid one. The agent's default
// --cgroup-path is this root, so it serves every process of the node, as
// kube-proxy's rules do.
func Cgroup2Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("finding the cgroup2 mount: %w", err)
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// mountinfo: id parent major:minor root mountpoint opts... - fstype source superopts
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" && len(fields) > 4 {
				found = append(found, fields[4])
			}
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("reading /proc/self/mountinfo: %w", err)
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no cgroup2 filesystem is mounted: mount one (`mount -t cgroup2 none /run/socklb/cgroupv2`) and pass it as --cgroup-path")
	}
	return found[0], nil
}
