package testkit

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Proc is a process a test started: etcd, kube-apiserver,
// kube-controller-manager or a socklb agent. It is only ever stopped by its
// own PID. Its output goes to a log file for the failure report.
type Proc struct {
	Name    string
	cmd     *exec.Cmd
	LogPath string // its stdout and stderr
	log     *os.File
	exited  chan struct{}
	waitErr error
}

// The children get PR_SET_PDEATHSIG so that they die with the test binary,
// even when it is killed (go test -timeout). The kernel sends that signal
// when the *thread* that forked them exits, so every child is started from
// one goroutine locked to its OS thread for the life of the process.
var spawner = func() chan func() {
	ch := make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: this thread lives as long as the process
		for f := range ch {
			f()
		}
	}()
	return ch
}()

// StartProc starts bin with args, its output to logPath, with
// PR_SET_PDEATHSIG so that it dies with this process.
func StartProc(name, logPath string, bin string, args ...string) (*Proc, error) {
	return StartProcCmd(name, logPath, exec.Command(bin, args...))
}

// StartProcCmd is StartProc for a prepared command (its Stdout, Stderr and
// Pdeathsig are set here; other SysProcAttr fields are kept).
func StartProcCmd(name, logPath string, cmd *exec.Cmd) (*Proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	p := &Proc{Name: name, LogPath: logPath, log: logf, exited: make(chan struct{})}
	p.cmd = cmd
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if p.cmd.SysProcAttr == nil {
		p.cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	p.cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	done := make(chan error, 1)
	spawner <- func() { done <- p.cmd.Start() }
	if err := <-done; err != nil {
		logf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Alive reports whether the process is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Stop sends SIGTERM to the process (by PID), waits up to grace, then
// SIGKILLs it. Safe to call more than once.
func (p *Proc) Stop(grace time.Duration) {
	if p == nil || !p.Alive() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string {
	b, _ := os.ReadFile(p.LogPath)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// LogContains reports whether the log has s.
func (p *Proc) LogContains(s string) bool {
	b, _ := os.ReadFile(p.LogPath)
	return bytes.Contains(b, []byte(s))
}

// ExitedErr describes an unexpected exit, with the end of the log.
func (p *Proc) ExitedErr() error {
	return fmt.Errorf("%s (pid %d) exited: %v\n--- last lines of %s:\n%s", p.Name, p.Pid(), p.waitErr, p.LogPath, p.Tail(40))
}

// WaitFor polls cond every 50 ms until it returns nil, the process exits,
// or the timeout passes.
func (p *Proc) WaitFor(what string, timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if !p.Alive() {
			return p.ExitedErr()
		}
		if last = cond(); last == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %s not ready within %s: %v\n--- last lines of %s:\n%s", p.Name, what, timeout, last, p.LogPath, p.Tail(40))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1. They are free
// when this returns; a process that binds them later races with the rest
// of the machine, which is fine for tests that bind right away.
var portMu sync.Mutex
var portsGiven = map[int]bool{}

func FreePorts(n int) ([]int, error) {
	portMu.Lock()
	defer portMu.Unlock()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		port := l.Addr().(*net.TCPAddr).Port
		if portsGiven[port] {
			continue
		}
		portsGiven[port] = true
		ports = append(ports, port)
	}
	return ports, nil
}

// Exited is closed when the process has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Signal sends sig to the process, by its PID, if it still runs.
func (p *Proc) Signal(sig os.Signal) error {
	if !p.Alive() {
		return nil
	}
	return p.cmd.Process.Signal(sig)
}

// ExitErr is what Wait returned; meaningful once Exited is closed.
func (p *Proc) ExitErr() error {
	<-p.exited
	return p.waitErr
}
