package main

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// newCheckConnectCommand is the chart's `helm test`: from a pod, connect to
// a Service and show that socklb translated it in connect(). Under socklb
// the kernel's socket holds the backend's address while getpeername
// reports the Service's (the getpeername hook); under kube-proxy's DNAT
// the socket holds the Service's address and only packets are rewritten.
// So a pass here cannot come from kube-proxy.
func newCheckConnectCommand() *cobra.Command {
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "check-connect [SERVICE-IP:PORT]",
		Short: "connect to a Service and check that socklb translated the connect (the chart's helm test)",
		Long: "check-connect dials SERVICE-IP:PORT over TCP (default: the kubernetes Service, from $KUBERNETES_SERVICE_HOST and $KUBERNETES_SERVICE_PORT, which kubelet sets in every pod) " +
			"and passes when getpeername reports that address while the kernel's socket (/proc/self/net/tcp) is connected to another one, a backend: the translation socklb makes in connect().",
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
			if len(args) == 1 {
				target = args[0]
			} else if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
				return errors.New("no SERVICE-IP:PORT given and $KUBERNETES_SERVICE_HOST is not set (kubelet sets it in pods)")
			}
			msg, err := checkConnect(target, timeout)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	singleFlagSet(cmd, func(fs *pflag.FlagSet) {
		fs.DurationVar(&timeout, "timeout", 10*time.Second, "how long the connect may take")
	})
	return cmd
}

func checkConnect(target string, timeout time.Duration) (string, error) {
	want, err := netip.ParseAddrPort(target)
	if err != nil {
		return "", fmt.Errorf("%q: want a Service's IP:PORT: %w", target, err)
	}
	conn, err := net.DialTimeout("tcp", target, timeout)
	if err != nil {
		return "", fmt.Errorf("connecting to %s: %w", target, err)
	}
	defer conn.Close()
	local := conn.LocalAddr().(*net.TCPAddr).AddrPort()
	peer := conn.RemoteAddr().(*net.TCPAddr).AddrPort()
	kernel, err := socketPeer(local)
	if err != nil {
		return "", err
	}
	if unmap(peer) != unmap(want) {
		return "", fmt.Errorf("connected to %s, but getpeername reports %s: socklb's getpeername hook would report the Service's address", target, peer)
	}
	if unmap(kernel) == unmap(want) {
		return "", fmt.Errorf("connected to %s, and the kernel's socket is connected to that address itself: nothing translated the connect (is socklb's hook on this pod's cgroup, --cgroup-path? kube-proxy's DNAT leaves sockets this way)", target)
	}
	return fmt.Sprintf("connected to %s: the socket is connected to backend %s, and getpeername reports %s; socklb translated the connect", target, kernel, peer), nil
}

// socketPeer finds the established socket bound to local in this network
// namespace's /proc/net/tcp and tcp6 and returns its remote address.
func socketPeer(local netip.AddrPort) (netip.AddrPort, error) {
	for _, file := range []string{"/proc/self/net/tcp", "/proc/self/net/tcp6"} {
		f, err := os.Open(file)
		if err != nil {
			return netip.AddrPort{}, err
		}
		peer, found, err := findPeer(bufio.NewScanner(f), local)
		f.Close()
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("reading %s: %w", file, err)
		}
		if found {
			return peer, nil
		}
	}
	return netip.AddrPort{}, fmt.Errorf("no established socket bound to %s in /proc/self/net/tcp or tcp6", local)
}

const tcpEstablished = "01"

func findPeer(sc *bufio.Scanner, local netip.AddrPort) (netip.AddrPort, bool, error) {
	sc.Scan() // the header
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || f[3] != tcpEstablished {
			continue
		}
		l, err := parseProcAddr(f[1])
		if err != nil {
			return netip.AddrPort{}, false, err
		}
		if unmap(l) != unmap(local) {
			continue
		}
		r, err := parseProcAddr(f[2])
		return r, err == nil, err
	}
	return netip.AddrPort{}, false, sc.Err()
}

// parseProcAddr reads /proc/net/tcp's ADDR:PORT: the address as 32-bit
// words printed as numbers in the CPU's byte order, the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	a, p, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("address %q has no port", s)
	}
	b, err := hex.DecodeString(a)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		return netip.AddrPort{}, fmt.Errorf("address %q is not 8 or 32 hex digits", a)
	}
	for w := 0; w < len(b); w += 4 {
		// The hex is the number; the address is its bytes in memory.
		binary.NativeEndian.PutUint32(b[w:], binary.BigEndian.Uint32(b[w:]))
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("port %q: %w", p, err)
	}
	addr, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(addr, uint16(port)), nil
}

func unmap(a netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(a.Addr().Unmap(), a.Port()) }
