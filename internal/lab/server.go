package lab

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/vishvananda/netns"
)

// Server is a TCP or UDP server running in a pod's namespace. The TCP server
// writes "<pod name>\n" to each connection and closes it; the UDP server
// answers each datagram with the pod name. Both count what they receive.
type Server struct {
	Pod   string
	Proto string // "tcp" or "udp"
	Port  int

	count atomic.Int64
	mu    sync.Mutex
	peers map[netip.Addr]int64

	ln   net.Listener   // tcp
	pc   net.PacketConn // udp
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

// Count is the number of connections accepted (tcp) or datagrams received
// (udp) since start or the last Reset.
func (s *Server) Count() int64 { return s.count.Load() }

// Peers counts connections or datagrams by client address.
func (s *Server) Peers() map[netip.Addr]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[netip.Addr]int64, len(s.peers))
	for k, v := range s.peers {
		out[k] = v
	}
	return out
}

// Reset zeroes the counters.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.count.Store(0)
	s.peers = map[netip.Addr]int64{}
}

func (s *Server) hit(from net.Addr) {
	s.count.Add(1)
	var a netip.Addr
	switch f := from.(type) {
	case *net.TCPAddr:
		a, _ = netip.AddrFromSlice(f.IP)
	case *net.UDPAddr:
		a, _ = netip.AddrFromSlice(f.IP)
	}
	s.mu.Lock()
	s.peers[a.Unmap()]++
	s.mu.Unlock()
}

// Close stops the server and waits for its goroutines. Idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		if s.ln != nil {
			s.err = s.ln.Close()
		}
		if s.pc != nil {
			s.err = s.pc.Close()
		}
		s.wg.Wait()
	})
	return s.err
}

// Servers is the pair StartServers starts in a pod.
type Servers struct {
	TCP *Server
	UDP *Server
}

// StartServers starts a TCP server on Config.TCPPort and a UDP server on
// Config.UDPPort in the pod's namespace, listening on all of the pod's
// addresses (IPv4 and IPv6).
func (l *Lab) StartServers(pod string) (*Servers, error) {
	p := l.Pod(pod)
	if p == nil {
		return nil, fmt.Errorf("lab: no pod %q", pod)
	}
	return startServers(p, l.cfg.TCPPort, l.cfg.UDPPort, &l.td)
}

// StartAllServers runs StartServers for every pod.
func (l *Lab) StartAllServers() error {
	for _, p := range l.Pods() {
		if _, err := l.StartServers(p.Name); err != nil {
			return err
		}
	}
	return nil
}

// StartServer starts one server (proto "tcp" or "udp") on port in the pod's
// namespace. Lab.Close stops it.
func (l *Lab) StartServer(pod, proto string, port int) (*Server, error) {
	p := l.Pod(pod)
	if p == nil {
		return nil, fmt.Errorf("lab: no pod %q", pod)
	}
	return startServer(p, proto, port, &l.td)
}

// startServers starts a TCP and a UDP server in p; td stops them.
func startServers(p *Pod, tcpPort, udpPort int, td *teardown) (*Servers, error) {
	t, err := startServer(p, "tcp", tcpPort, td)
	if err != nil {
		return nil, err
	}
	u, err := startServer(p, "udp", udpPort, td)
	if err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return &Servers{TCP: t, UDP: u}, nil
}

// startServer starts one server in p's namespace; td stops it.
func startServer(p *Pod, proto string, port int, td *teardown) (*Server, error) {
	pod := p.Name
	s := &Server{Pod: pod, Proto: proto, Port: port, peers: map[netip.Addr]int64{}}
	addr := fmt.Sprintf(":%d", port) // all addresses, IPv4 and IPv6
	err := InNetNS(p.NetNS, func() error {
		var err error
		switch proto {
		case "tcp":
			s.ln, err = net.Listen("tcp", addr)
		case "udp":
			s.pc, err = net.ListenPacket("udp", addr)
		default:
			err = fmt.Errorf("lab: unknown protocol %q", proto)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lab: start %s server in %s: %w", proto, pod, err)
	}
	if err := td.push(s.Close); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	p.mu.Lock()
	p.servers = append(p.servers, s)
	p.mu.Unlock()
	s.wg.Add(1)
	if proto == "tcp" {
		go s.serveTCP()
	} else {
		go s.serveUDP()
	}
	return s, nil
}

func (s *Server) serveTCP() {
	defer s.wg.Done()
	reply := []byte(s.Pod + "\n")
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s.hit(c.RemoteAddr())
		_, _ = c.Write(reply)
		_ = c.Close()
	}
}

func (s *Server) serveUDP() {
	defer s.wg.Done()
	reply := []byte(s.Pod)
	buf := make([]byte, 2048)
	for {
		_, from, err := s.pc.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		s.hit(from)
		_, _ = s.pc.WriteTo(reply, from)
	}
}

// Counts sums, per pod, the Count of its servers of protocol proto ("tcp" or
// "udp"). Every pod appears, with 0 if it got nothing.
func (l *Lab) Counts(proto string) map[string]int64 { return counts(l.Pods(), proto) }

// counts sums the Count of each pod's servers of protocol proto.
func counts(pods []*Pod, proto string) map[string]int64 {
	out := map[string]int64{}
	for _, p := range pods {
		out[p.Name] += 0
		for _, s := range p.Servers() {
			if s.Proto == proto {
				out[p.Name] += s.Count()
			}
		}
	}
	return out
}

// ResetCounts zeroes every server's counters.
func (l *Lab) ResetCounts() { resetCounts(l.Pods()) }

// peers merges, per pod, the Peers of its servers of protocol proto.
func peers(pods []*Pod, proto string) map[string]map[netip.Addr]int64 {
	out := map[string]map[netip.Addr]int64{}
	for _, p := range pods {
		for _, s := range p.Servers() {
			if s.Proto != proto {
				continue
			}
			for a, n := range s.Peers() {
				if out[p.Name] == nil {
					out[p.Name] = map[netip.Addr]int64{}
				}
				out[p.Name][a] += n
			}
		}
	}
	return out
}

func resetCounts(pods []*Pod) {
	for _, p := range pods {
		for _, s := range p.Servers() {
			s.Reset()
		}
	}
}

// InNetNS runs fn on an OS thread switched into the named network namespace
// (sockets fn creates stay in that namespace), then switches the thread back.
// If switching back fails the thread stays locked and is discarded when the
// goroutine exits, so no other goroutine ever runs in the wrong namespace.
func InNetNS(name string, fn func() error) error {
	target, err := netns.GetFromName(name)
	if err != nil {
		return fmt.Errorf("netns %s: %w", name, err)
	}
	defer target.Close()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		if err := netns.Set(target); err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("setns %s: %w", name, err)
			return
		}
		ferr := fn()
		if err := netns.Set(orig); err != nil {
			errc <- errors.Join(ferr, fmt.Errorf("setns back: %w", err))
			return // thread stays locked: it dies with this goroutine
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}
