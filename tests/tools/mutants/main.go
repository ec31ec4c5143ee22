// Command mutants plants named mutations in pkg/servicemap, each alone in
// a temporary copy of the module (two copies at work at once, -j), and
// checks that the package's tests turn red for each: a rule no test guards shows up as a mutant that
// survives. `make test` runs it.
//
// Each mutation names its file, the exact text to replace (which must
// occur once, so an edit of the code that moves it fails here rather than
// silently testing nothing) and its replacement.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

type mutation struct {
	name, file, from, to string
}

// mutations are rules of servicemap that a wrong edit could break quietly.
var mutations = []mutation{
	{
		name: "the Tracker forgets that externalIPs read node addresses",
		file: "pkg/servicemap/tracker.go",
		from: "if len(svc.Spec.ExternalIPs) > 0 || svc.Spec.HealthCheckNodePort != 0",
		to:   "if svc.Spec.HealthCheckNodePort != 0",
	},
	{
		name: "another Node's address is no longer a capturable externalIP",
		file: "pkg/servicemap/external.go",
		from: "own || b.peerAddrs.Contains(a)",
		to:   "own",
	},
	{
		name: "the Tracker's node facts leave out the other Nodes' addresses",
		file: "pkg/servicemap/tracker.go",
		from: "fmt.Sprint(b.nodeAddrs, b.ownAddrs, b.peerAddrs.Sum(), b.primary,",
		to:   "fmt.Sprint(b.nodeAddrs, b.ownAddrs, b.primary,",
	},
	{
		name: "the Tracker reads the other Nodes' addresses from Nodes at every change",
		file: "pkg/servicemap/tracker.go",
		from: "b.peerAddrs = in.PeerAddresses",
		to:   "b.peerAddrs = PeerAddresses(in)",
	},
	{
		name: "Full reuses a Service's entry across a change of the node's addresses",
		file: "pkg/servicemap/tracker.go",
		from: "reuse := t.started && tb.fp == t.fp",
		to:   "reuse := t.started && tb.coreFP == t.coreFP",
	},
	{
		name: "Full reuses the entry of a Service that changed",
		file: "pkg/servicemap/tracker.go",
		from: "reuse && prev != nil && prev.svc == svc && slices.Equal",
		to:   "reuse && prev != nil && slices.Equal",
	},
	{
		name: "no terminating fallback when nothing is ready (KEP-1669)",
		file: "pkg/servicemap/topology.go",
		from: "out = filterEndpoints(eps, func(e endpoint) bool { return e.serving && e.terminating })",
		to:   "out = filterEndpoints(eps, func(e endpoint) bool { return false })",
	},
	{
		name: "internalTrafficPolicy Local falls back to a remote terminating endpoint",
		file: "pkg/servicemap/topology.go",
		from: "out = filterEndpoints(eps, func(e endpoint) bool { return e.isLocal(node) && e.serving && e.terminating })",
		to:   "out = filterEndpoints(eps, func(e endpoint) bool { return e.serving && e.terminating })",
	},
	{
		name: "a family whose only source range is malformed is opened to every source",
		file: "pkg/servicemap/sourceranges.go",
		from: "out.closed4 = malformed && len(out.v4) == 0",
		to:   "out.closed4 = false",
	},
	{
		name: "a Service port of 65535 is refused",
		file: "pkg/servicemap/build.go",
		from: "p.Port < 1 || p.Port > 65535",
		to:   "p.Port < 1 || p.Port >= 65535",
	},
	{
		name: "an EndpointSlice port of 65535 is refused",
		file: "pkg/servicemap/endpoints.go",
		from: "*p.Port < 0 || *p.Port > 65535",
		to:   "*p.Port < 0 || *p.Port >= 65535",
	},
}

// copied is what pkg/servicemap's tests build from.
var copied = []string{"go.mod", "go.sum", "pkg", "internal"}

func main() {
	repo := flag.String("repo", ".", "the module's root")
	jobs := flag.Int("j", 2, "mutations tested at once, each in its own copy of the module")
	flag.Parse()
	if err := run(*repo, max(*jobs, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "mutants:", err)
		os.Exit(1)
	}
}

// outcome is what one mutation's test run showed.
type outcome struct {
	survived bool
	err      error // the mutation tests nothing, or the copy broke
}

func run(repo string, jobs int) error {
	tmp, err := os.MkdirTemp("", "socklb-mutants-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// One copy per worker: each plants its mutation in its own tree. A
	// test run is mostly compiling and linking, one core's work, so two at
	// once take about half the time on two cores.
	jobs = min(jobs, len(mutations))
	dirs := make([]string, jobs)
	for i := range dirs {
		dirs[i] = filepath.Join(tmp, fmt.Sprint(i))
		if err := os.Mkdir(dirs[i], 0o755); err != nil {
			return err
		}
		for _, p := range copied {
			if err := copyTree(filepath.Join(repo, p), filepath.Join(dirs[i], p)); err != nil {
				return fmt.Errorf("copying %s: %w", p, err)
			}
		}
	}
	// The unmutated copy must pass, or every mutant would look killed.
	if out, err := goTest(dirs[0]); err != nil {
		return fmt.Errorf("pkg/servicemap's tests fail without a mutation:\n%s", out)
	}

	outcomes := make([]outcome, len(mutations))
	next := make(chan int)
	var mu sync.Mutex // one progress line at a time
	var wg sync.WaitGroup
	for _, dir := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				start := time.Now()
				outcomes[i] = try(dir, mutations[i])
				if outcomes[i].err != nil {
					continue
				}
				verdict := "killed  "
				if outcomes[i].survived {
					verdict = "SURVIVED"
				}
				mu.Lock()
				fmt.Printf("%s %s (%s)\n", verdict, mutations[i].name, time.Since(start).Round(time.Second/10))
				mu.Unlock()
			}
		}()
	}
	for i := range mutations {
		next <- i
	}
	close(next)
	wg.Wait()

	var survived []string
	for i, o := range outcomes {
		if o.err != nil {
			return fmt.Errorf("mutation %q: %w", mutations[i].name, o.err)
		}
		if o.survived {
			survived = append(survived, mutations[i].name)
		}
	}
	if len(survived) > 0 {
		return fmt.Errorf("%d of %d mutations survived pkg/servicemap's tests: %s", len(survived), len(mutations), strings.Join(survived, "; "))
	}
	fmt.Printf("all %d mutations killed\n", len(mutations))
	return nil
}

// try plants m in the copy at dir, runs the tests and takes m out again.
func try(dir string, m mutation) outcome {
	path := filepath.Join(dir, m.file)
	orig, err := os.ReadFile(path)
	if err != nil {
		return outcome{err: err}
	}
	if n := bytes.Count(orig, []byte(m.from)); n != 1 {
		return outcome{err: fmt.Errorf("%s holds its text %d times, want once: update the mutation with the code", m.file, n)}
	}
	if err := os.WriteFile(path, bytes.Replace(orig, []byte(m.from), []byte(m.to), 1), 0o644); err != nil {
		return outcome{err: err}
	}
	out, testErr := goTest(dir)
	if err := os.WriteFile(path, orig, 0o644); err != nil {
		return outcome{err: err}
	}
	var exit *exec.ExitError
	switch {
	case testErr == nil:
		return outcome{survived: true}
	case errors.As(testErr, &exit) && !strings.Contains(out, "[build failed]") && !strings.Contains(out, "[setup failed]"):
		return outcome{}
	default:
		return outcome{err: fmt.Errorf("does not build, so it tests nothing: %v\n%s", testErr, out)}
	}
}

// goTest runs the package's tests without vet: vet is make vet's job, and
// here it would only add time, or fail a mutant that no test catches.
func goTest(dir string) (string, error) {
	cmd := exec.Command("go", "test", "-count=1", "-vet=off", "./pkg/servicemap/")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}
