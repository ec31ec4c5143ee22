package main

// socklb's own profiles, fetched from its --profiling endpoint on the
// metrics address and kept with the run (bench/results/<name>/profiles/),
// so that bench/NOTES.md can cite the profile behind a figure: the CPU of
// the full sync, the heap after it (behind the RSS), the CPU of the churn
// (behind the CPU per change).

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// topLines of `go tool pprof -top` are kept: the header and the ~20
// heaviest functions, enough to cite.
const topLines = 26

// syncProfileSeconds is the CPU profile window from the metrics port's
// first answer: pprof cannot be stopped early, so it is sized to cover
// the full sync at N (5.5 s at 10 000 in the n10k-socklb run) with room,
// and the harness waits for it before the programming-latency changes.
func syncProfileSeconds(n int, limit time.Duration) int {
	s := 10 + n/1000
	return max(1, min(s, int(limit.Seconds())))
}

type profiler struct {
	addr string // the agent's metrics address
	dir  string // <run>/profiles
	run  string // <run>, what Path is relative to
}

// fetch saves /debug/pprof/<what> as name (.pb.gz) and its top text
// (.top.txt) beside it.
func (p *profiler) fetch(ctx context.Context, n int, kind, what string, seconds int) (Profile, error) {
	url := fmt.Sprintf("http://%s/debug/pprof/%s", p.addr, what)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Profile{}, err
	}
	c := &http.Client{Timeout: time.Duration(seconds)*time.Second + 30*time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return Profile{}, fmt.Errorf("fetching %s (is the agent started with --profiling?): %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Profile{}, fmt.Errorf("reading %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return Profile{}, fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(body))
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return Profile{}, err
	}
	base := filepath.Join(p.dir, fmt.Sprintf("n%d-%s", n, kind))
	if err := os.WriteFile(base+".pb.gz", body, 0o644); err != nil {
		return Profile{}, err
	}
	top, err := pprofTop(base + ".pb.gz")
	if err != nil {
		return Profile{}, err
	}
	if err := os.WriteFile(base+".top.txt", []byte(top), 0o644); err != nil {
		return Profile{}, err
	}
	rel := func(f string) string { r, _ := filepath.Rel(p.run, f); return filepath.ToSlash(r) }
	logf("profile %s at N=%d: %s (%d KiB)", kind, n, rel(base+".pb.gz"), len(body)>>10)
	return Profile{NServices: n, Kind: kind, Seconds: float64(seconds), Path: rel(base + ".pb.gz"), Top: rel(base + ".top.txt")}, nil
}

// pprofTop is the head of `go tool pprof -top`: the profile carries its
// symbols, so the agent's binary is not needed.
func pprofTop(path string) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out, err := exec.Command(goBin, "tool", "pprof", "-top", path).Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("go tool pprof -top %s: %w: %s", path, err, msg)
	}
	lines := strings.SplitAfter(string(out), "\n")
	return strings.Join(lines[:min(len(lines), topLines)], ""), nil
}

// background runs fetch in a goroutine; wait returns its result.
type pending struct {
	done chan struct{}
	p    Profile
	err  error
}

func (p *profiler) background(ctx context.Context, n int, kind, what string, seconds int, ready func() error) *pending {
	pd := &pending{done: make(chan struct{})}
	go func() {
		defer close(pd.done)
		if ready != nil {
			if pd.err = ready(); pd.err != nil {
				return
			}
		}
		pd.p, pd.err = p.fetch(ctx, n, kind, what, seconds)
	}()
	return pd
}

func (pd *pending) wait() (Profile, error) { <-pd.done; return pd.p, pd.err }

// keepProfile waits for pd and keeps its profile, or notes why there is
// none.
func (d *dataplane) keepProfile(pd *pending) {
	if pd == nil {
		return
	}
	p, err := pd.wait()
	if err != nil {
		note := fmt.Sprintf("%s: no profile: %v", d.name, err)
		logf("%s", note)
		d.profileNotes = append(d.profileNotes, note)
		return
	}
	d.profiles = append(d.profiles, p)
}

// waitMetrics returns once the agent's metrics address answers, so that
// the sync profile starts as early as the agent can serve it.
func (d *dataplane) waitMetrics(startedAt time.Time) error {
	url := "http://" + d.metrics + "/metrics"
	c := &http.Client{Timeout: time.Second}
	for time.Since(startedAt) < d.cfg.syncTimeout {
		if resp, err := c.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if !d.agent.Alive() {
			return fmt.Errorf("the agent exited before %s answered", url)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer within %s", url, d.cfg.syncTimeout)
}
