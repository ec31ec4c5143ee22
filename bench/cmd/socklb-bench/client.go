package main

// The measuring client. The harness starts it once per dataplane as
// `ip netns exec <client netns> socklb-bench client`, placed into the
// dataplane's cgroup at clone time when socklb is measured, and drives it
// with one JSON request per line on stdin; it answers one JSON line each.
// Sockets are raw syscalls (blocking, with timeouts) so that the Go runtime
// adds as little as possible to what the dataplane costs.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

type request struct {
	Op       string        `json:"op"` // tcp, udp, probe, peer
	Addr     string        `json:"addr"`
	Count    int           `json:"count,omitempty"`
	Want     string        `json:"want,omitempty"`     // probe: the reply byte to wait for
	Timeout  time.Duration `json:"timeout,omitempty"`  // probe
	Interval time.Duration `json:"interval,omitempty"` // probe: pause between tries
	// ConnectTimeout bounds each connect() (default 3 s). The full-sync
	// probe uses a short one: before kube-proxy's rules exist, a SYN is
	// dropped, and its retransmissions follow the un-NATed conntrack entry
	// of the first one, so only a fresh connection sees the new rules.
	ConnectTimeout time.Duration `json:"connect_timeout,omitempty"`
	// SrcPorts, if set, makes each try bind the next source port of
	// [SrcPorts, SrcPorts+10000): below the ephemeral range, so that the
	// conntrack entries of the dropped SYNs of the full-sync probe (alive
	// 2 min, never NATed) cannot catch a later connection's port.
	SrcPorts int `json:"src_ports,omitempty"`
}

type response struct {
	OK         int            `json:"ok"`
	Errors     int            `json:"errors"`
	FirstError string         `json:"first_error,omitempty"`
	Elapsed    time.Duration  `json:"elapsed"`
	P50        time.Duration  `json:"p50,omitempty"` // connect() latency
	P99        time.Duration  `json:"p99,omitempty"`
	Seen       int64          `json:"seen,omitempty"` // probe: wall clock (UnixNano) of the first reply from Want
	Replies    map[string]int `json:"replies,omitempty"`
	Peer       string         `json:"peer,omitempty"` // peer: the source address the server saw
}

func clientMain() error {
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			return err
		}
		ap, err := netip.ParseAddrPort(req.Addr)
		if err != nil {
			return err
		}
		sa := &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
		var resp response
		switch req.Op {
		case "tcp":
			resp = tcpRounds(sa, req.Count)
		case "udp":
			resp = udpRounds(sa, ap, req.Count)
		case "probe":
			resp = probe(sa, req)
		case "peer":
			resp = peer(sa)
		default:
			return fmt.Errorf("unknown op %q", req.Op)
		}
		if err := out.Encode(resp); err != nil {
			return err
		}
	}
	return in.Err()
}

// 3 s: a lost SYN is retransmitted after 1 s and counts as a slow connect,
// not a failure.
var timeout3s = unix.Timeval{Sec: 3}

// tcpOnce connects, sends one byte, reads the one-byte answer and closes.
func tcpOnce(sa unix.Sockaddr, connectTimeout time.Duration, srcPort int) (reply byte, connect time.Duration, err error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, 0, err
	}
	defer unix.Close(fd)
	if srcPort > 0 {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Port: srcPort}); err != nil {
			return 0, 0, err
		}
	}
	// SO_SNDTIMEO bounds connect() too.
	sndto := timeout3s
	if connectTimeout > 0 {
		sndto = unix.NsecToTimeval(connectTimeout.Nanoseconds())
	}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &sndto)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &timeout3s)
	start := time.Now()
	if err := unix.Connect(fd, sa); err != nil {
		return 0, 0, err
	}
	connect = time.Since(start)
	if _, err := unix.Write(fd, []byte{'?'}); err != nil {
		return 0, connect, err
	}
	var buf [1]byte
	n, err := retryEINTR(func() (int, error) { return unix.Read(fd, buf[:]) })
	if err != nil {
		return 0, connect, err
	}
	if n != 1 {
		return 0, connect, fmt.Errorf("read %d bytes", n)
	}
	return buf[0], connect, nil
}

func tcpRounds(sa unix.Sockaddr, n int) response {
	var r response
	r.Replies = map[string]int{}
	lat := make([]time.Duration, 0, n)
	start := time.Now()
	for i := 0; i < n; i++ {
		b, d, err := tcpOnce(sa, 0, 0)
		if err != nil {
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = err.Error()
			}
			continue
		}
		r.OK++
		r.Replies[string(b)]++
		lat = append(lat, d)
	}
	r.Elapsed = time.Since(start)
	r.P50, r.P99 = percentile(lat, 50), percentile(lat, 99)
	return r
}

// udpRounds sends n one-byte requests from one unconnected socket
// (sendto/recvfrom, the DNS pattern), one at a time, and checks that every
// answer comes from the address it was sent to.
func udpRounds(sa *unix.SockaddrInet4, ap netip.AddrPort, n int) response {
	var r response
	r.Replies = map[string]int{}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		r.Errors, r.FirstError = n, err.Error()
		return r
	}
	defer unix.Close(fd)
	to := unix.Timeval{Usec: 200000}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &to)
	fail := func(err error) {
		r.Errors++
		if r.FirstError == "" {
			r.FirstError = err.Error()
		}
	}
	var buf [64]byte
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := unix.Sendto(fd, []byte{'?'}, 0, sa); err != nil {
			fail(err)
			continue
		}
		var from unix.Sockaddr
		m, err := retryEINTR(func() (int, error) {
			var n int
			var err error
			n, from, err = unix.Recvfrom(fd, buf[:], 0)
			return n, err
		})
		if err != nil {
			fail(err)
			continue
		}
		f, ok := from.(*unix.SockaddrInet4)
		if !ok || netip.AddrPortFrom(netip.AddrFrom4(f.Addr), uint16(f.Port)) != ap {
			fail(fmt.Errorf("reply from %v, want %s", from, ap))
			continue
		}
		r.OK++
		if m > 0 {
			r.Replies[string(buf[:1])]++
		}
	}
	r.Elapsed = time.Since(start)
	return r
}

// askPeer is the byte that asks a server for the source address it saw.
const askPeer = '@'

// peer asks the server behind sa which source address it saw: one TCP
// connection, whose answer is the server's id, a space and that address.
func peer(sa unix.Sockaddr) response {
	var r response
	fail := func(err error) response {
		r.Errors, r.FirstError = 1, err.Error()
		return r
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fail(err)
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &timeout3s)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &timeout3s)
	if err := unix.Connect(fd, sa); err != nil {
		return fail(err)
	}
	if _, err := unix.Write(fd, []byte{askPeer}); err != nil {
		return fail(err)
	}
	var got []byte
	buf := make([]byte, 64)
	for {
		n, err := retryEINTR(func() (int, error) { return unix.Read(fd, buf) })
		if err != nil {
			return fail(err)
		}
		if n == 0 {
			break
		}
		got = append(got, buf[:n]...)
	}
	id, addr, ok := strings.Cut(string(got), " ")
	if !ok {
		return fail(fmt.Errorf("answer %q: want <id> <address>", got))
	}
	r.OK, r.Replies, r.Peer = 1, map[string]int{id: 1}, addr
	return r
}

// probe connects again and again until an answer comes from req.Want, and
// reports the wall clock of that answer.
func probe(sa unix.Sockaddr, req request) response {
	var r response
	deadline := time.Now().Add(req.Timeout)
	start := time.Now()
	for try := 0; time.Now().Before(deadline); try++ {
		port := 0
		if req.SrcPorts > 0 {
			port = req.SrcPorts + try%10000
		}
		b, _, err := tcpOnce(sa, req.ConnectTimeout, port)
		switch {
		case err != nil:
			r.Errors++
			if r.FirstError == "" {
				r.FirstError = err.Error()
			}
		case string(b) == req.Want:
			r.OK++
			r.Seen = time.Now().UnixNano()
			r.Elapsed = time.Since(start)
			return r
		default:
			r.OK++
		}
		if req.Interval > 0 {
			time.Sleep(req.Interval)
		}
	}
	r.Elapsed = time.Since(start)
	r.FirstError = fmt.Sprintf("no answer from %q within %s (%d answers from others, %d errors; first: %s)", req.Want, req.Timeout, r.OK, r.Errors, r.FirstError)
	return r
}

func percentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

// retryEINTR repeats a blocking call with a timeout (SO_RCVTIMEO), which
// the kernel does not restart after a signal.
func retryEINTR(f func() (int, error)) (int, error) {
	for {
		n, err := f()
		if err != unix.EINTR {
			return n, err
		}
	}
}
