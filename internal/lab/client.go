package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/socklb/socklb/internal/testkit"
	"github.com/socklb/socklb/tests/labclient/wire"
)

// Result is what labclient prints; see package wire.
type Result = wire.Result

// Client is a network namespace to run labclient in: a client namespace of
// a Lab, or any machine of a MultiNode (its outside, a node, a pod).
type Client struct {
	Name  string // Lab: "cli" or the name given to AddClient; MultiNode: "out", "n1", "n1-p1"
	NetNS string // name for `ip netns exec`

	// Lab: 10.244.0.<k>, and fd00::1 or fd00::ffff:<k> (configured only if
	// some pod has IPv6). MultiNode: the machine's own addresses.
	IP   netip.Addr
	IPv6 netip.Addr
}

// Client runs labclient inside the pod's namespace, with the pod's
// addresses as its own: a pod as the client of a Service.
func (p *Pod) Client() *Client {
	return &Client{Name: p.Name, NetNS: p.NetNS, IP: p.IP, IPv6: p.IPv6}
}

// LabclientEnv names an environment variable that, if set, is the path of a
// prebuilt labclient binary to use instead of building one.
const LabclientEnv = "SOCKLB_LABCLIENT"

// Run runs labclient with args inside the client's namespace, as a process
// placed into cg at clone time (CLONE_INTO_CGROUP), so socklb's programs
// attached to cg see its sockets. cg may be nil to run in the caller's
// cgroup (no socklb). Returns labclient's stdout; on failure the error
// carries its stderr. ctx cancellation kills the process.
func (c *Client) Run(ctx context.Context, cg *Cgroup, args ...string) ([]byte, error) {
	cmd, stdout, stderr, err := c.command(ctx, cg, args)
	if err != nil {
		return nil, err
	}
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), c.failed(args, err, stderr)
	}
	return stdout.Bytes(), nil
}

// command prepares labclient with args in the client's namespace and cg.
func (c *Client) command(ctx context.Context, cg *Cgroup, args []string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer, error) {
	bin, err := labclient.Build()
	if err != nil {
		return nil, nil, nil, err
	}
	// ip netns exec execs labclient in place (no fork): a signal to the
	// process reaches labclient.
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", c.NetNS, bin}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if cg != nil {
		if err := cg.checkOwn(); err != nil {
			return nil, nil, nil, err
		}
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = cg.FD()
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	return cmd, &stdout, &stderr, nil
}

func (c *Client) failed(args []string, err error, stderr *bytes.Buffer) error {
	return fmt.Errorf("labclient %s in %s: %w: %s", strings.Join(args, " "), c.NetNS, err, strings.TrimSpace(stderr.String()))
}

// Background is a labclient started by Start. It runs until its own end
// (its --count or --duration) or until Stop.
type Background struct {
	c      *Client
	args   []string
	cmd    *exec.Cmd
	stdout *bytes.Buffer
	stderr *bytes.Buffer
	done   chan struct{}
	err    error // cmd.Wait's, once done is closed
}

// Start runs labclient as Run does, in the background. With `loop
// --duration 0` or `udp --count 0` it runs until Stop: a test stops it
// once the event it covers (a restart, an upgrade) is over and checked,
// however long that took, and Running tells whether it really lasted.
func (c *Client) Start(ctx context.Context, cg *Cgroup, args ...string) (*Background, error) {
	cmd, stdout, stderr, err := c.command(ctx, cg, args)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, c.failed(args, err, stderr)
	}
	b := &Background{c: c, args: args, cmd: cmd, stdout: stdout, stderr: stderr, done: make(chan struct{})}
	go func() {
		b.err = cmd.Wait()
		close(b.done)
	}()
	return b, nil
}

// StartLoop starts `labclient loop --addr addr --duration 0`: one connect
// after the other until Stop.
func (c *Client) StartLoop(ctx context.Context, cg *Cgroup, addr string, extra ...string) (*Background, error) {
	return c.Start(ctx, cg, append([]string{"loop", "--addr", addr, "--duration", "0"}, extra...)...)
}

// Running reports whether labclient is still running: it has neither ended
// on its own nor been killed.
func (b *Background) Running() bool {
	select {
	case <-b.done:
		return false
	default:
		return true
	}
}

// Done is closed when labclient has exited.
func (b *Background) Done() <-chan struct{} { return b.done }

// Stop ends labclient with SIGTERM (it finishes the attempt in flight and
// prints its result), waits for it and returns the result. On a labclient
// that already ended it only returns the result. labclient handles
// SIGTERM from its first instructions on: Stop a client only after it has
// shown it runs (it served a connect), or a SIGTERM that comes first kills
// it with no result.
func (b *Background) Stop() (*Result, error) {
	if b.Running() {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
	}
	<-b.done
	if b.err != nil {
		return nil, b.c.failed(b.args, b.err, b.stderr)
	}
	return ParseResult(b.stdout.Bytes())
}

// RunResult is Run followed by ParseResult.
func (c *Client) RunResult(ctx context.Context, cg *Cgroup, args ...string) (*Result, error) {
	out, err := c.Run(ctx, cg, args...)
	if err != nil {
		return nil, err
	}
	return ParseResult(out)
}

// TCP runs `labclient tcp --addr addr --count n --seq`.
func (c *Client) TCP(ctx context.Context, cg *Cgroup, addr string, n int) (*Result, error) {
	return c.RunResult(ctx, cg, "tcp", "--addr", addr, "--count", strconv.Itoa(n), "--seq")
}

// UDP runs `labclient udp --addr addr --count n --seq` (one unconnected
// socket, sendto/recvfrom).
func (c *Client) UDP(ctx context.Context, cg *Cgroup, addr string, n int) (*Result, error) {
	return c.RunResult(ctx, cg, "udp", "--addr", addr, "--count", strconv.Itoa(n), "--seq")
}

// UDPConnected runs `labclient udp-connected --addr addr --count n --seq`.
func (c *Client) UDPConnected(ctx context.Context, cg *Cgroup, addr string, n int) (*Result, error) {
	return c.RunResult(ctx, cg, "udp-connected", "--addr", addr, "--count", strconv.Itoa(n), "--seq")
}

// Loop runs `labclient loop --addr addr --duration d`.
func (c *Client) Loop(ctx context.Context, cg *Cgroup, addr string, d time.Duration) (*Result, error) {
	return c.RunResult(ctx, cg, "loop", "--addr", addr, "--duration", d.String())
}

// Info runs `labclient info`: its pid, cgroup and netns as seen from inside.
func (c *Client) Info(ctx context.Context, cg *Cgroup) (*Result, error) {
	return c.RunResult(ctx, cg, "info")
}

// ParseResult decodes labclient's JSON output.
func ParseResult(out []byte) (*Result, error) {
	var r Result
	if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
		return nil, fmt.Errorf("labclient output %q: %w", out, err)
	}
	if r.Replies == nil {
		r.Replies = map[string]int{}
	}
	if r.Errors == nil {
		r.Errors = map[string]int{}
	}
	return &r, nil
}

// labclient is built once per process; LabclientEnv names a prebuilt one.
var labclient = &testkit.Binary{Pkg: "./tests/labclient", Env: LabclientEnv}

// BuildLabclient builds the labclient binary now (Run otherwise builds it on
// first use) and returns its path.
func BuildLabclient() (string, error) { return labclient.Build() }

// RemoveLabclient deletes the built labclient binary; the next Run rebuilds
// it. Call it from TestMain or at the end of a program.
func RemoveLabclient() error { return labclient.Remove() }
