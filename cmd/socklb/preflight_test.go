package main

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/socklb/socklb/internal/lab"
	"github.com/socklb/socklb/internal/testkit"
)

// TestChecksBeforeAnythingIsCreated: a bad setting fails `socklb agent`
// before it creates anything: no pin directory, map or link on the bpffs
// it was given, no program on its cgroup. Each case starts the agent (main,
// in a child process) on a bpffs of its own and a fresh child cgroup, with
// everything valid but the one setting; its error is one line naming the
// setting and the fix, and with --logging-format=json one JSON record.
// Checked after the datapath's Open (where the ports were bound, and
// where attachHooks met the cgroup), a case leaves maps and links pinned;
// a duplicate key taken as the last one starts the agent for good.
func TestChecksBeforeAnythingIsCreated(t *testing.T) {
	testkit.RequireRoot(t, "mounts a bpffs and makes a child cgroup for the agent")
	taken := func(t *testing.T) string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		return ln.Addr().String()
	}
	const header = "apiVersion: socklb.io/v1alpha1\nkind: SocklbConfiguration\n"
	for _, tc := range []struct {
		name string
		set  func(t *testing.T, flags map[string]string)
		want []string
	}{
		{"key given twice in --config", func(t *testing.T, flags map[string]string) {
			path := filepath.Join(t.TempDir(), "socklb.yaml")
			if err := os.WriteFile(path, []byte(header+"maxBackends: 1000\nmaxBackends: 2000\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			flags["--config"] = path
		}, []string{`line 4: "maxBackends" is given twice (first at line 3)`}},
		{"bind address without a port", func(t *testing.T, flags map[string]string) {
			flags["--healthz-bind-address"] = "127.0.0.1"
		}, []string{`--healthz-bind-address="127.0.0.1": want IP:port`}},
		{"healthz port taken", func(t *testing.T, flags map[string]string) {
			flags["--healthz-bind-address"] = taken(t)
		}, []string{"--healthz-bind-address 127.0.0.1:", "address already in use", "another process listens there"}},
		{"metrics port taken", func(t *testing.T, flags map[string]string) {
			flags["--metrics-bind-address"] = taken(t)
		}, []string{"--metrics-bind-address 127.0.0.1:", "address already in use"}},
		{"bpffs path on another filesystem", func(t *testing.T, flags map[string]string) {
			flags["--bpffs-path"] = filepath.Join(t.TempDir(), "pins")
		}, []string{"--bpffs-path", "is not on a bpf filesystem", "mount -t bpf"}},
		{"cgroup not on cgroup2", func(t *testing.T, flags map[string]string) {
			flags["--cgroup-path"] = t.TempDir()
		}, []string{"is not a cgroup v2 directory", "--cgroup-path"}},
		{"cgroup missing", func(t *testing.T, flags map[string]string) {
			flags["--cgroup-path"] = filepath.Join(flags["--cgroup-path"], "missing")
		}, []string{"--cgroup-path", "does not exist"}},
		{"node's /proc/sys/net not mounted", func(t *testing.T, flags map[string]string) {
			// A path that is not there: were the check gone, the agent
			// would find no conntrack there and write nothing.
			flags["--proc-sys-net"] = "/host/proc/sys/net-missing"
			flags["--conntrack-tcp-timeout-close-wait"] = "1h"
		}, []string{"--proc-sys-net=/host/proc/sys/net-missing is not a directory", "/host/proc/sys/net"}},
		{"unknown socket termination", func(t *testing.T, flags map[string]string) {
			flags["--terminate-sockets"] = "tcp"
		}, []string{`--terminate-sockets="tcp": use none, udp or all`}},
	} {
		for _, format := range []string{"text", "json"} {
			t.Run(tc.name+"/"+format, func(t *testing.T) {
				fs := testkit.PrivateBPFFS(t)
				cg, err := lab.NewCgroup()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					if err := cg.Close(); err != nil {
						t.Errorf("removing cgroup %s: %v", cg.Path(), err)
					}
				})
				flags := map[string]string{
					"--manifests": t.TempDir(), "--node-name": "node-a",
					"--bpffs-path": fs.Path(), "--cgroup-path": cg.Path(),
					"--healthz-bind-address": "127.0.0.1:0", "--metrics-bind-address": "127.0.0.1:0",
					"--logging-format": format,
				}
				// A new bpffs holds the kernel's own (maps.debug, progs.debug).
				kernels, err := os.ReadDir(filepath.Dir(fs.Path()))
				if err != nil {
					t.Fatal(err)
				}
				tc.set(t, flags)
				args := []string{"agent"}
				for _, k := range slices.Sorted(func(yield func(string) bool) {
					for k := range flags {
						if !yield(k) {
							return
						}
					}
				}) {
					args = append(args, k+"="+flags[k])
				}
				code, _, stderr := runMainFor(t, 30*time.Second, args...)
				if code != 1 {
					t.Errorf("exit %d, want 1", code)
				}
				checkFatalLine(t, format, stderr, tc.want)

				// Nothing socklb makes: the bpffs holds no pin directory,
				// the cgroup no program.
				if entries, err := os.ReadDir(filepath.Dir(fs.Path())); err != nil || !slices.Equal(names(entries), names(kernels)) {
					t.Errorf("the bpffs holds %v (%v) after the failed start, want only the kernel's %v", names(entries), err, names(kernels))
				}
				if p := flags["--bpffs-path"]; p != fs.Path() {
					if _, err := os.Lstat(p); err == nil {
						t.Errorf("%s was created", p)
					}
				}
				for _, at := range []ebpf.AttachType{ebpf.AttachCGroupInet4Connect, ebpf.AttachCGroupInet6Connect, ebpf.AttachCGroupUDP4Sendmsg, ebpf.AttachCGroupInetEgress} {
					res, err := link.QueryPrograms(link.QueryOptions{Target: cg.FD(), Attach: at})
					if err != nil {
						t.Fatalf("querying %s's programs: %v", cg.Path(), err)
					}
					if len(res.Programs) > 0 {
						t.Errorf("%d %s program(s) attached to %s after the failed start", len(res.Programs), at, cg.Path())
					}
				}
			})
		}
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}
