package datapath

import (
	"bufio"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/pkg/servicemap"
)

// TestCarryGivesTheNewIDs: after a layout change the carried sk_state
// entries must find their Service port under the id the refill gave it
// (what lb_sock_find looks for), as the hooks would for the socket's next
// datagram: an unconnected UDP socket keeps its backend only through that
// entry. Localhost NodePorts only (127.0.0.0/8, host namespace): no packet
// leaves loopback.
func TestCarryGivesTheNewIDs(t *testing.T) {
	requireRoot(t)
	a := frontend("127.0.0.1", 30054, servicemap.UDP, "127.0.0.1:9")
	b := frontend("127.0.0.1", 30053, servicemap.UDP, "127.0.0.1:7")
	a.Service.Name, b.Service.Name = "a", "b" // two Service ports: two ids
	for _, tc := range []struct {
		name  string
		sent  []string // what the socket sent to, in order
		sentB string   // the address of those that reached b
	}{
		// a's Service is deleted during the upgrade: its entry, first in
		// the socket's state, kept a's old id, which the refill gave b.
		{name: "a deleted Service's entry does not shadow another", sent: []string{"127.0.0.1:30054", "127.0.0.1:30053"}, sentB: "127.0.0.1:30053"},
		// Every 127/8 address is looked up as 127.0.0.1 (lb_local_key).
		{name: "a localhost NodePort on 127.0.0.2", sent: []string{"127.0.0.2:30053"}, sentB: "127.0.0.2:30053"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cg := childCgroup(t)
			dir := pinDir(t)
			old := openTest(t, Config{BPFFSPath: dir, CgroupPath: cg.Path()})
			// One Apply each, so that a has id 1 and b id 2.
			mustApply(t, old, state(a))
			mustApply(t, old, state(a, b))
			sock := udpSenderIn(t, cg.FD(), tc.sent...)
			old.Close()

			d := openWithLayout(t, "1", Config{BPFFSPath: dir, CgroupPath: cg.Path()})
			carryWaiting(t, d)
			res := mustApply(t, d, state(b)) // b alone: id 1
			if !strings.Contains(res.Switched, "carried sk_state of 1 sockets") {
				t.Fatalf("switch: %q", res.Switched)
			}
			id := d.Programmed()[b.Key].AffinityID
			var st socklbbpf.SocklbSockState
			if err := d.Maps().SkState.Lookup(int32(sock), &st); err != nil {
				t.Fatalf("the socket's sk_state: %v", err)
			}
			for _, e := range st.E {
				if e.AffinityId != id {
					continue
				}
				front := netip.AddrPortFrom(addrFromBytes(e.Frontend), portFromMap(e.FrontendPort))
				back := netip.AddrPortFrom(addrFromBytes(e.Backend), portFromMap(e.BackendPort))
				if front.String() != tc.sentB || back.String() != "127.0.0.1:7" {
					t.Errorf("b's id %d finds the entry %s -> %s, want %s -> 127.0.0.1:7 (state %+v)", id, front, back, tc.sentB, st)
				}
				return
			}
			t.Errorf("no entry of the socket has b's id %d: %+v", id, st)
		})
	}
}

// udpSenderIn starts a process in the cgroup cgFD whose one unconnected
// UDP socket sends a datagram to each address, and returns that socket as
// a descriptor of this process; the process lives until the test ends. The
// process is this test binary again (TestMain runs udpSender): the kernel
// puts it in the cgroup at clone, before it sends.
func udpSenderIn(t *testing.T, cgFD int, addrs ...string) int {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), udpSenderEnv+"="+strings.Join(addrs, ","))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgFD}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the UDP sender in the cgroup: %v", err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil && err != io.EOF {
		t.Fatal(err)
	}
	remote, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		t.Fatalf("the sender did not print its socket: %q", line)
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, remote, 0)
	if err != nil {
		t.Fatalf("taking the sender's socket: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}
