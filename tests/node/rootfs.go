package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// agnhostPackages are Debian's equivalents of what upstream's agnhost image
// adds to alpine (test/images/agnhost/Dockerfile): the e2e tests exec
// curl, nc, ss, dig, socat and sh in it. The same root filesystem is
// glibc-dns-testing's (Debian with dnsutils: dig and glibc's getent) and
// distroless-iptables' (the KubeProxy test execs conntrack in it).
var agnhostPackages = []string{"curl", "netcat-openbsd", "iproute2", "dnsutils", "bash", "socat", "util-linux", "procps", "conntrack", "iptables"}

// AgnhostRootfs returns a Debian 12 root filesystem for the agnhost image,
// made once with debootstrap from the machine's own Debian mirror
// (debianMirror) into cacheDir: the only step of the run that downloads,
// so it runs before Enter, in the machine's network namespace.
func AgnhostRootfs(cacheDir string) (string, error) {
	key := strings.Join(agnhostPackages, ",")
	dir := filepath.Join(cacheDir, "rootfs-agnhost")
	if b, err := os.ReadFile(filepath.Join(dir, ".socklb-packages")); err == nil && string(b) == key {
		return dir, nil
	}
	tmp := dir + ".tmp"
	os.RemoveAll(tmp)
	os.RemoveAll(dir)
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command("debootstrap", "--variant=minbase", "--include="+key, "bookworm", tmp, debianMirror("/"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		os.RemoveAll(tmp)
		return "", fmt.Errorf("debootstrap of the agnhost root filesystem (apt-get install debootstrap): %w", err)
	}
	// What no test reads: about half of the tree.
	for _, d := range []string{"var/cache/apt", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale", "usr/share/info"} {
		os.RemoveAll(filepath.Join(tmp, d))
	}
	if err := os.WriteFile(filepath.Join(tmp, ".socklb-packages"), []byte(key), 0o644); err != nil {
		return "", err
	}
	return dir, os.Rename(tmp, dir)
}
