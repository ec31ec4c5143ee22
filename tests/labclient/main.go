// Command labclient is the client side of the socklb lab tests. It runs inside
// a client network namespace (and the test's cgroup, where socklb's programs
// are attached), talks to a Service address, and prints one JSON object
// (wire.Result) on stdout describing what happened.
//
//	labclient tcp           --addr IP:PORT [--count N] [--timeout D] [--seq]
//	labclient udp           --addr IP:PORT [--count N] [--timeout D] [--seq]
//	labclient udp-connected --addr IP:PORT [--count N] [--timeout D] [--seq] [--reconnect | --hold]
//	labclient loop          --addr IP:PORT --duration D [--timeout D] [--interval D]
//	labclient info
//
// Failures are counted by errno name (ECONNREFUSED, ENETUNREACH, ...), not
// treated as fatal: the exit status is 0 whenever the JSON was printed, and 2
// on a usage error.
//
// SIGTERM ends tcp, udp, udp-connected and loop after the attempt in flight,
// and the JSON is printed as usual. With it, loop --duration 0 and udp,
// udp-connected --count 0 run until the test stops them (lab.Background):
// a client that must outlast an event (an agent restart, an upgrade) does
// so however long the event takes on a busy machine, instead of for a
// duration guessed in advance.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/socklb/socklb/tests/labclient/wire"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	mode, args := os.Args[1], os.Args[2:]

	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	addr := fs.String("addr", "", "destination IP:PORT (IPv6 as [IP]:PORT)")
	count := fs.Int("count", 1, "number of connects or queries; udp, udp-connected: 0 until SIGTERM")
	timeout := fs.Duration("timeout", 0, "per-attempt timeout (default 2s for tcp, 1s for udp)")
	seq := fs.Bool("seq", false, "include the per-attempt sequence of answers in the output")
	reconnect := fs.Bool("reconnect", false, "udp-connected: use a new socket for every query")
	hold := fs.Bool("hold", false, "udp-connected: keep the one socket whatever fails, never dial again (statsd, syslog)")
	duration := fs.Duration("duration", 5*time.Second, "loop: how long to keep connecting, 0 until SIGTERM; tcp-hold: how long to hold the socket")
	interval := fs.Duration("interval", 0, "loop, udp, udp-connected: pause between attempts")
	_ = fs.Parse(args)

	sigterm := make(chan os.Signal, 1)
	signal.Notify(sigterm, syscall.SIGTERM)
	go func() {
		<-sigterm
		stopping.Store(true)
	}()

	res := &wire.Result{
		Mode:    mode,
		Addr:    *addr,
		Replies: map[string]int{},
		Errors:  map[string]int{},
	}
	start := time.Now()

	if mode == "info" {
		info(res)
		emit(res, start)
		return
	}

	dst, err := netip.ParseAddrPort(*addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "labclient: --addr %q: %v\n", *addr, err)
		os.Exit(2)
	}
	if mode != "tcp" {
		// Only tcp dials v4-mapped addresses from an AF_INET6 socket.
		dst = netip.AddrPortFrom(dst.Addr().Unmap(), dst.Port())
	}
	rec := &recorder{res: res, seq: *seq, lastOK: time.Now()}

	switch mode {
	case "tcp":
		to := orDefault(*timeout, 2*time.Second)
		for i := 0; i < *count && !stopping.Load(); i++ {
			rec.record(tcpOnce(dst, to, res))
		}
	case "udp":
		udpUnconnected(dst, *count, orDefault(*timeout, time.Second), *interval, rec)
	case "udp-connected":
		udpConnected(dst, *count, orDefault(*timeout, time.Second), *reconnect, *hold, *interval, rec)
	case "tcp-hold":
		tcpHold(dst, orDefault(*timeout, 2*time.Second), *duration, rec)
	case "loop":
		to := orDefault(*timeout, 2*time.Second)
		end := time.Now().Add(*duration)
		for (*duration == 0 || time.Now().Before(end)) && !stopping.Load() {
			rec.begin()
			rec.record(tcpOnce(dst, to, res))
			if *interval > 0 {
				time.Sleep(*interval)
			}
		}
	default:
		usage()
	}
	emit(res, start)
}

// stopping is set by SIGTERM: the attempt in flight is the last.
var stopping atomic.Bool

// more reports whether attempt i (from 0) is to be made: count 0 means
// until SIGTERM.
func more(i, count int) bool {
	return (count == 0 || i < count) && !stopping.Load()
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: labclient tcp|tcp-hold|udp|udp-connected|loop|info --addr IP:PORT [--count N] [--timeout D] [--seq] [--reconnect] [--hold] [--duration D] [--interval D]")
	os.Exit(2)
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func emit(res *wire.Result, start time.Time) {
	res.Duration = time.Since(start).Round(time.Millisecond).String()
	enc := json.NewEncoder(os.Stdout)
	if err := enc.Encode(res); err != nil {
		fmt.Fprintf(os.Stderr, "labclient: %v\n", err)
		os.Exit(1)
	}
}

// recorder tallies one attempt's outcome: a pod name or an error.
type recorder struct {
	res    *wire.Result
	seq    bool
	lastOK time.Time // the start, until an attempt succeeds
	gap    time.Duration
	began  time.Time // when the attempt being made began (loop)
}

// begin marks the start of an attempt, for FailedFrom and FailedUntil.
func (r *recorder) begin() { r.began = time.Now() }

func (r *recorder) record(pod string, err error) {
	r.res.Attempts++
	var what string
	if err != nil {
		what = errName(err)
		r.res.Errors[what]++
		if r.res.FirstError == "" {
			r.res.FirstError = err.Error()
		}
		if !r.began.IsZero() {
			// The first failure's end and the last failure's start: what
			// made them fail happened between the two, whatever the
			// scheduler did to this process around each connect.
			if r.res.FailedFrom == "" {
				r.res.FailedFrom = time.Now().Format(time.RFC3339Nano)
			}
			r.res.FailedUntil = r.began.Format(time.RFC3339Nano)
		}
	} else {
		what = pod
		r.res.OK++
		r.res.Replies[pod]++
		now := time.Now()
		if g := now.Sub(r.lastOK); g > r.gap {
			r.gap = g
			r.res.LongestGap = g.String()
		}
		r.lastOK = now
	}
	if r.seq {
		r.res.Sequence = append(r.res.Sequence, what)
	}
}

// errName maps an error to the name of its errno (ECONNREFUSED, ...), or to
// timeout / EOF / empty / other.
func errName(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		if n := unix.ErrnoName(errno); n != "" {
			return n
		}
		return fmt.Sprintf("errno-%d", int(errno))
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return "timeout"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "EOF"
	}
	if errors.Is(err, errEmpty) {
		return "empty"
	}
	return "other"
}

var errEmpty = errors.New("empty reply")

func network(proto string, dst netip.AddrPort) string {
	if dst.Addr().Is4() {
		return proto + "4"
	}
	return proto + "6"
}

// tcpOnce connects, reads the server's reply (its pod name) until EOF and
// closes. It records the first successful connection's getpeername in res.
func tcpOnce(dst netip.AddrPort, timeout time.Duration, res *wire.Result) (string, error) {
	var c net.Conn
	var err error
	if dst.Addr().Is4In6() {
		c, err = dialMapped(dst)
	} else {
		d := net.Dialer{Timeout: timeout}
		c, err = d.Dial(network("tcp", dst), dst.String())
	}
	if err != nil {
		return "", err
	}
	defer c.Close()
	if res.Peer == "" {
		if p, err := peerName(c.(*net.TCPConn)); err == nil {
			res.Peer = p
		}
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(io.LimitReader(c, 256))
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(b))
	if name == "" {
		return "", errEmpty
	}
	return name, nil
}

// tcpHold connects once, reads the server's reply, and then holds the
// socket (in CLOSE_WAIT: the server has closed its side) for d, watching
// its state with TCP_INFO. If the kernel closes it under the process
// (bpf_sock_destroy: socket termination), it records the socket's pending
// error, ECONNABORTED, and returns; a socket still open after d records
// nothing more.
func tcpHold(dst netip.AddrPort, timeout, d time.Duration, rec *recorder) {
	rec.record(tcpOnceHeld(dst, timeout, d))
}

func tcpOnceHeld(dst netip.AddrPort, timeout, d time.Duration) (string, error) {
	dl := net.Dialer{Timeout: timeout}
	c, err := dl.Dial(network("tcp", dst), dst.String())
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	b, err := io.ReadAll(io.LimitReader(c, 256))
	if err != nil {
		return "", err
	}
	name := strings.TrimSpace(string(b))
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return "", err
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) {
		var info *unix.TCPInfo
		var soErr int
		var gerr error
		_ = rc.Control(func(fd uintptr) {
			info, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
			if gerr == nil && info.State == unix.BPF_TCP_CLOSE {
				soErr, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
			}
		})
		if gerr != nil {
			return "", gerr
		}
		if info.State == unix.BPF_TCP_CLOSE {
			if soErr != 0 {
				return "", syscall.Errno(soErr)
			}
			return "", errors.New("socket closed without an error")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return name, nil
}

// dialMapped connects an AF_INET6 socket to an IPv4-mapped address
// (::ffff:a.b.c.d), the way dual-stack applications reach IPv4 Services.
// Go's dialer turns such addresses into AF_INET sockets, so use syscalls.
func dialMapped(dst netip.AddrPort) (net.Conn, error) {
	fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	if err := unix.Connect(fd, &unix.SockaddrInet6{Addr: dst.Addr().As16(), Port: int(dst.Port())}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "tcp6-mapped")
	defer f.Close()
	return net.FileConn(f)
}

// peerName calls getpeername(2) on the socket explicitly, so that the
// getpeername4/6 hook is what the test observes.
func peerName(c syscall.Conn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var sa unix.Sockaddr
	var gerr error
	if err := rc.Control(func(fd uintptr) { sa, gerr = unix.Getpeername(int(fd)) }); err != nil {
		return "", err
	}
	if gerr != nil {
		return "", gerr
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)).String(), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)).String(), nil
	}
	return "", fmt.Errorf("unexpected sockaddr %T", sa)
}

// udpUnconnected uses ONE unconnected socket: sendto/recvfrom per query, so
// the sendmsg and recvmsg hooks are what the test observes.
func udpUnconnected(dst netip.AddrPort, count int, timeout, interval time.Duration, rec *recorder) {
	c, err := net.ListenUDP(network("udp", dst), nil)
	if err != nil {
		for i := 0; i < max(count, 1); i++ {
			rec.record("", err)
		}
		return
	}
	defer c.Close()
	sources := map[string]bool{}
	buf := make([]byte, 512)
	for i := 0; more(i, count); i++ {
		if i > 0 && interval > 0 {
			time.Sleep(interval)
			if stopping.Load() {
				break
			}
		}
		if _, err := c.WriteToUDPAddrPort([]byte(fmt.Sprintf("q%d", i)), dst); err != nil {
			rec.record("", err)
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		n, src, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			rec.record("", err)
			continue
		}
		src = netip.AddrPortFrom(src.Addr().Unmap(), src.Port())
		sources[src.String()] = true
		name := strings.TrimSpace(string(buf[:n]))
		if name == "" {
			rec.record("", errEmpty)
			continue
		}
		rec.record(name, nil)
	}
	for s := range sources {
		rec.res.Sources = append(rec.res.Sources, s)
	}
	sort.Strings(rec.res.Sources)
}

// udpConnected uses a connected socket (connect hook), send/recv, and records
// getpeername. With reconnect, every query gets a fresh socket.
//
// Like a resolver, it keeps its socket until the socket fails, then makes a
// new one; --interval spaces the queries so a test can change the Service
// while the socket is held. With hold it never makes a new one, as a
// statsd or syslog client that dials once at start.
func udpConnected(dst netip.AddrPort, count int, timeout time.Duration, reconnect, hold bool, interval time.Duration, rec *recorder) {
	var c *net.UDPConn
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	peers := map[string]bool{}
	defer func() {
		for p := range peers {
			rec.res.Peers = append(rec.res.Peers, p)
		}
		sort.Strings(rec.res.Peers)
	}()
	buf := make([]byte, 512)
	for i := 0; more(i, count); i++ {
		if c == nil || reconnect {
			if c != nil {
				c.Close()
				c = nil
			}
			var err error
			c, err = net.DialUDP(network("udp", dst), nil, net.UDPAddrFromAddrPort(dst))
			if err != nil {
				c = nil
				rec.record("", err)
				continue
			}
			if rec.res.Peer == "" {
				if p, err := peerName(c); err == nil {
					rec.res.Peer = p
				}
			}
		}
		if i > 0 && interval > 0 {
			time.Sleep(interval)
			if stopping.Load() {
				break
			}
		}
		if _, err := c.Write([]byte(fmt.Sprintf("q%d", i))); err != nil {
			rec.record("", err)
			if !hold {
				c.Close()
				c = nil
			}
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(timeout))
		n, err := c.Read(buf)
		if err != nil {
			rec.record("", err)
			if !hold {
				c.Close()
				c = nil
			}
			continue
		}
		if p, err := peerName(c); err == nil {
			peers[p] = true
		}
		name := strings.TrimSpace(string(buf[:n]))
		if name == "" {
			rec.record("", errEmpty)
			continue
		}
		rec.record(name, nil)
	}
}

// info reports where this process runs: its cgroup v2 path and netns.
func info(res *wire.Result) {
	res.Pid = os.Getpid()
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				res.Cgroup = p
			}
		}
	}
	if l, err := os.Readlink("/proc/self/ns/net"); err == nil {
		res.NetNS = l
	}
}
