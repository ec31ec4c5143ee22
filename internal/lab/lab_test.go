package lab

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/socklb/socklb/internal/testkit"
)

func TestMain(m *testing.M) {
	code := m.Run()
	_ = RemoveLabclient()
	os.Exit(code)
}

func needRoot(t *testing.T) {
	t.Helper()
	testkit.RequireRoot(t, "creates network namespaces and cgroups")
}

func netnsList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v: %s", err, out)
	}
	return string(out)
}

func TestCgroupRefusesRoot(t *testing.T) {
	mount, err := Cgroup2Mount()
	if err != nil {
		t.Skipf("no cgroup2: %v", err)
	}
	for _, p := range []string{mount, mount + "/", mount + "/system.slice", mount + "/socklb-lab-1/x"} {
		c := &Cgroup{mount: mount, path: p}
		if err := c.checkOwn(); err == nil {
			t.Errorf("checkOwn(%q) accepted", p)
		}
		if err := c.Close(); err == nil {
			t.Errorf("Close(%q) succeeded", p)
		}
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescapeMountinfo(`/a\040b/c`); got != "/a b/c" {
		t.Errorf("got %q", got)
	}
}

func TestLab(t *testing.T) {
	needRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cg, err := NewCgroup()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cg.Close(); err != nil {
			t.Errorf("cgroup close: %v", err)
		}
	})
	if _, err := os.Stat(cg.Path()); err != nil {
		t.Fatalf("cgroup dir: %v", err)
	}

	l, err := New(Config{Pods: []PodSpec{
		{Name: "pod-a", IP: "10.244.1.11", IPv6: "fd00::11"},
		{Name: "pod-b", IP: "10.244.1.12", IPv6: "fd00::12"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("lab close: %v", err)
		}
	})
	if err := l.StartAllServers(); err != nil {
		t.Fatal(err)
	}
	list := netnsList(t)
	for _, ns := range l.NetNSNames() {
		if !strings.Contains(list, ns) {
			t.Errorf("netns %s missing from `ip netns list`:\n%s", ns, list)
		}
	}
	cli := l.Client("")

	t.Run("process-in-cgroup", func(t *testing.T) {
		r := must(t)(cli.Info(ctx, cg))
		want := "/" + strings.TrimPrefix(cg.Path(), cg.mount+"/")
		if r.Cgroup != want {
			t.Errorf("labclient cgroup = %q, want %q", r.Cgroup, want)
		}
		self, _ := os.Readlink("/proc/self/ns/net")
		if r.NetNS == "" || r.NetNS == self {
			t.Errorf("labclient netns = %q, ours %q: not in the client namespace", r.NetNS, self)
		}
	})

	t.Run("tcp-pod-ip", func(t *testing.T) {
		l.ResetCounts()
		for _, p := range l.Pods() {
			r := must(t)(cli.TCP(ctx, cg, p.IP.String()+":8080", 3))
			if r.Replies[p.Name] != 3 || r.OK != 3 || len(r.Errors) != 0 {
				t.Errorf("tcp %s: %+v", p.IP, r)
			}
			if want := p.IP.String() + ":8080"; r.Peer != want {
				t.Errorf("tcp %s: peer %q, want %q", p.IP, r.Peer, want)
			}
		}
		counts := l.Counts("tcp")
		if counts["pod-a"] != 3 || counts["pod-b"] != 3 {
			t.Errorf("server tcp counts %v, want 3 each", counts)
		}
		peers := l.Pod("pod-a").Servers()[0].Peers()
		if peers[cli.IP] != 3 {
			t.Errorf("pod-a peers %v, want 3 from %s", peers, cli.IP)
		}
	})

	t.Run("tcp-ipv6-pod-ip", func(t *testing.T) {
		p := l.Pod("pod-b")
		r := must(t)(cli.TCP(ctx, cg, "["+p.IPv6.String()+"]:8080", 2))
		wantReplies(t, "tcp6", r, "pod-b", 2)
	})

	t.Run("no-route", func(t *testing.T) {
		r := must(t)(cli.TCP(ctx, cg, "10.96.0.99:80", 1))
		wantError(t, "tcp", r, "ENETUNREACH")
		r = must(t)(cli.TCP(ctx, cg, "[fd00:96::99]:80", 1))
		wantError(t, "IPv6", r, "ENETUNREACH")
		r = must(t)(cli.UDP(ctx, cg, "10.96.0.99:53", 1))
		wantError(t, "udp", r, "ENETUNREACH")
	})

	t.Run("tcp-refused", func(t *testing.T) {
		r := must(t)(cli.TCP(ctx, cg, "10.244.1.11:9", 1))
		wantError(t, "tcp", r, "ECONNREFUSED")
	})

	t.Run("udp-pod-ip", func(t *testing.T) {
		l.ResetCounts()
		r := must(t)(cli.UDP(ctx, cg, "10.244.1.12:5353", 4))
		wantReplies(t, "udp", r, "pod-b", 4)
		if len(r.Sources) != 1 || r.Sources[0] != "10.244.1.12:5353" {
			t.Errorf("udp sources %v", r.Sources)
		}
		if got := l.Counts("udp")["pod-b"]; got != 4 {
			t.Errorf("server udp count %d, want 4", got)
		}
		r = must(t)(cli.UDPConnected(ctx, cg, "10.244.1.11:5353", 2))
		if r.Replies["pod-a"] != 2 || r.Peer != "10.244.1.11:5353" {
			t.Errorf("udp-connected: %+v", r)
		}
		r = must(t)(cli.UDP(ctx, cg, "[fd00::11]:5353", 1))
		wantReplies(t, "udp6", r, "pod-a", 1)
	})

	t.Run("second-client", func(t *testing.T) {
		c2, err := l.AddClient("cli2")
		if err != nil {
			t.Fatal(err)
		}
		l.ResetCounts()
		r := must(t)(c2.TCP(ctx, cg, "10.244.1.11:8080", 2))
		wantReplies(t, "cli2 tcp", r, "pod-a", 2)
		if got := l.Pod("pod-a").Servers()[0].Peers()[c2.IP]; got != 2 {
			t.Errorf("pod-a saw %d connections from %s, want 2", got, c2.IP)
		}
		r = must(t)(c2.TCP(ctx, cg, "[fd00::12]:8080", 1))
		wantReplies(t, "cli2 tcp6", r, "pod-b", 1)
	})

	t.Run("loop", func(t *testing.T) {
		r := must(t)(cli.Loop(ctx, cg, "10.244.1.11:8080", 300*time.Millisecond))
		if r.OK == 0 || len(r.Errors) != 0 {
			t.Errorf("loop: %+v", r)
		}
	})

	// A loop with no end runs until Stop, and says when its failures were:
	// a test compares that with the times of its own events.
	t.Run("loop-until-stopped", func(t *testing.T) {
		l.ResetCounts()
		b, err := cli.StartLoop(ctx, cg, "10.244.1.11:8080")
		if err != nil {
			t.Fatal(err)
		}
		for l.Counts("tcp")["pod-a"] < 10 {
			if !b.Running() {
				r, err := b.Stop()
				t.Fatalf("the loop ended on its own: %+v %v", r, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		r := must(t)(b.Stop())
		if b.Running() || r.OK < 10 || len(r.Errors) != 0 || r.FailedFrom != "" || r.FailedUntil != "" {
			t.Errorf("loop stopped after 10 connects: running %v, %+v", b.Running(), r)
		}

		// A server that closes every connection unanswered: each connect
		// is a failure ("empty") that the server side can count.
		var ln net.Listener
		if err := InNetNS(l.Pod("pod-b").NetNS, func() (err error) {
			ln, err = net.Listen("tcp4", ":8081")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		var closed atomic.Int64
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				closed.Add(1)
				c.Close()
			}
		}()
		start := time.Now()
		b, err = cli.StartLoop(ctx, cg, "10.244.1.12:8081")
		if err != nil {
			t.Fatal(err)
		}
		for closed.Load() < 10 {
			if !b.Running() {
				r, err := b.Stop()
				t.Fatalf("the loop ended on its own: %+v %v", r, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		r = must(t)(b.Stop())
		stop := time.Now()
		from, err1 := time.Parse(time.RFC3339Nano, r.FailedFrom)
		until, err2 := time.Parse(time.RFC3339Nano, r.FailedUntil)
		if r.OK != 0 || r.Errors["empty"] < 10 || err1 != nil || err2 != nil || from.Before(start) || until.After(stop) {
			t.Errorf("loop failing from %s until stopped at %s: %+v (%v, %v)", start.Format(time.RFC3339Nano), stop.Format(time.RFC3339Nano), r, err1, err2)
		}
	})

	t.Run("no-cgroup", func(t *testing.T) {
		r := must(t)(cli.TCP(ctx, nil, "10.244.1.11:8080", 1))
		wantReplies(t, "tcp without cgroup", r, "pod-a", 1)
	})

	t.Run("close-cleans-up", func(t *testing.T) {
		names := l.NetNSNames()
		if err := l.Close(); err != nil {
			t.Fatalf("lab close: %v", err)
		}
		if err := l.Close(); err != nil {
			t.Fatalf("second lab close: %v", err)
		}
		list := netnsList(t)
		for _, ns := range names {
			if strings.Contains(list, ns) {
				t.Errorf("netns %s left behind:\n%s", ns, list)
			}
		}
		if err := cg.Close(); err != nil {
			t.Fatalf("cgroup close: %v", err)
		}
		if err := cg.Close(); err != nil {
			t.Fatalf("second cgroup close: %v", err)
		}
		if _, err := os.Stat(cg.Path()); !os.IsNotExist(err) {
			t.Errorf("cgroup %s left behind (stat: %v)", cg.Path(), err)
		}
	})
}

// TestCgroupKillsLeftovers starts a long-running labclient in the cgroup and
// checks that Close kills it and removes the cgroup.
func TestCgroupKillsLeftovers(t *testing.T) {
	needRoot(t)
	cg, err := NewCgroup()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cg.Close() })
	l, err := New(Config{Pods: []PodSpec{{Name: "p", IP: "10.244.1.11"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	if err := l.StartAllServers(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Client("").Loop(context.Background(), cg, "10.244.1.11:8080", time.Minute)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids, _ := cg.Procs()
		if len(pids) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("labclient never appeared in the cgroup")
		}
		time.Sleep(20 * time.Millisecond)
	}
	start := time.Now()
	if err := cg.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Error("killed labclient reported success")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("labclient still running after cgroup Close")
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("Close took %v", time.Since(start))
	}
	if _, err := os.Stat(cg.Path()); !os.IsNotExist(err) {
		t.Errorf("cgroup left behind")
	}
}

// TestNewFailureCleansUp makes New fail after it created namespaces and
// checks that none is left behind.
func TestNewFailureCleansUp(t *testing.T) {
	needRoot(t)
	before := netnsList(t)
	l, err := New(Config{Pods: []PodSpec{
		{Name: "ok", IP: "10.244.1.11"},
		{Name: "bad", IP: "not-an-ip"},
	}})
	if err == nil {
		_ = l.Close()
		t.Fatal("New accepted a bad pod address")
	}
	if l != nil {
		t.Error("New returned a lab with an error")
	}
	if after := netnsList(t); after != before {
		t.Errorf("namespaces changed across a failed New:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// must stops the test when a client run fails to run at all (as opposed to
// a connection error, which the result counts): must(t)(cli.TCP(...)).
func must(t *testing.T) func(*Result, error) *Result {
	return func(r *Result, err error) *Result {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
}

// wantError checks that r's one attempt failed with errno.
func wantError(t *testing.T, what string, r *Result, errno string) {
	t.Helper()
	if r.Errors[errno] != 1 {
		t.Errorf("%s: want %s, got %+v", what, errno, r)
	}
}

// wantReplies checks that pod answered n of r's attempts.
func wantReplies(t *testing.T, what string, r *Result, pod string, n int) {
	t.Helper()
	if r.Replies[pod] != n {
		t.Errorf("%s: %+v", what, r)
	}
}
