package manifests

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// running starts a Source on dir and returns a channel that receives one
// value per changed() call. The Source stops when the test ends.
func running(t *testing.T, dir string, p *problems) (*Source, <-chan struct{}) {
	t.Helper()
	s, err := New(Config{Dir: dir, NodeName: "n1", Report: p.report})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := make(chan struct{}, 1000)
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func() { calls <- struct{}{} }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	select {
	case <-calls:
	case <-time.After(2 * time.Second):
		t.Fatal("no first changed() call")
	}
	return s, calls
}

// awaitServices waits until a changed() call leaves a snapshot with exactly
// the Services want.
func awaitServices(t *testing.T, s *Source, calls <-chan struct{}, want ...string) {
	t.Helper()
	start := time.Now()
	deadline := time.After(2 * time.Second)
	for {
		select {
		case <-calls:
			if got := serviceNames(s.Snapshot()); equal(got, want) {
				t.Logf("reflected after %v", time.Since(start))
				return
			}
		case <-deadline:
			t.Fatalf("after 2s services = %v, want %v", serviceNames(s.Snapshot()), want)
		}
	}
}

func TestRunFollowsEdits(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", svc("a"))
	var p problems
	s, calls := running(t, dir, &p)
	if got := s.Snapshot(); !equal(serviceNames(got), []string{"default/a"}) || got.NodeName != "n1" {
		t.Fatalf("first snapshot = %+v", got)
	}

	t.Run("write in place", func(t *testing.T) {
		writeFile(t, dir, "a.yaml", svc("b"))
		awaitServices(t, s, calls, "default/b")
	})
	t.Run("rename over", func(t *testing.T) {
		replaceFile(t, dir, "a.yaml", svc("c"))
		awaitServices(t, s, calls, "default/c")
	})
	t.Run("new file", func(t *testing.T) {
		writeFile(t, dir, "z.yml", svc("z"))
		awaitServices(t, s, calls, "default/c", "default/z")
	})
	t.Run("remove", func(t *testing.T) {
		if err := os.Remove(filepath.Join(dir, "z.yml")); err != nil {
			t.Fatal(err)
		}
		awaitServices(t, s, calls, "default/c")
	})
	t.Run("bad edit keeps objects", func(t *testing.T) {
		// Written atomically: a reload that caught a.yaml truncated but not
		// yet written would take its empty contents as the last good ones.
		replaceFile(t, dir, "a.yaml", "kind: [")
		writeFile(t, dir, "b.yaml", svc("b"))
		awaitServices(t, s, calls, "default/b", "default/c")
		got := p.take()
		if len(got) != 1 || !strings.HasSuffix(got[0].Object.Name, "a.yaml") {
			t.Errorf("problems = %v", got)
		}
	})
}

// A ConfigMap volume: files are symlinks through "..data", and an update
// swaps "..data" to a new timestamped directory with one rename.
func TestRunFollowsConfigMapSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(name, contents string) {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, name), "svc.yaml", contents)
		if err := os.Symlink(name, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("..2026_01", svc("one"))
	if err := os.Symlink("..data/svc.yaml", filepath.Join(dir, "svc.yaml")); err != nil {
		t.Fatal(err)
	}
	var p problems
	s, calls := running(t, dir, &p)
	if got := serviceNames(s.Snapshot()); !equal(got, []string{"default/one"}) {
		t.Fatalf("services = %v", got)
	}
	version("..2026_02", svc("two"))
	if err := os.RemoveAll(filepath.Join(dir, "..2026_01")); err != nil {
		t.Fatal(err)
	}
	awaitServices(t, s, calls, "default/two")
	if got := p.take(); len(got) != 0 {
		t.Errorf("problems = %v", got)
	}
}

// A save made of many writes should cost the agent one rebuild, not one per
// write.
func TestRunDebounces(t *testing.T) {
	dir := t.TempDir()
	var p problems
	s, calls := running(t, dir, &p)
	for i := range 20 {
		writeFile(t, dir, "a.yaml", svc("a"+strings.Repeat("x", i)))
	}
	final := "default/a" + strings.Repeat("x", 19)
	awaitServices(t, s, calls, final)
	time.Sleep(3 * debounce)
	n := 1 + len(calls)
	if n > 3 {
		t.Errorf("20 quick writes caused %d changed() calls", n)
	}
	t.Logf("20 quick writes caused %d changed() calls", n)
}

func TestNewRejectsMissingDirectory(t *testing.T) {
	if _, err := New(Config{Dir: filepath.Join(t.TempDir(), "nope")}); err == nil {
		t.Error("no error for a missing directory")
	}
	f := writeFile(t, t.TempDir(), "f.yaml", "")
	if _, err := New(Config{Dir: f}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("err = %v for a file", err)
	}
}

// TestRunFollowsOtherNodes: every Node of the directory is in the snapshot,
// this node's and the others' (servicemap.RemoteNodeAddresses reads them),
// and a change of another Node's addresses is a change.
func TestRunFollowsOtherNodes(t *testing.T) {
	dir := t.TempDir()
	nodeYAML := func(name, ip string) string {
		return "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\nstatus:\n  addresses:\n  - {type: InternalIP, address: " + ip + "}\n"
	}
	writeFile(t, dir, "n1.yaml", nodeYAML("n1", "192.0.2.1"))
	writeFile(t, dir, "n2.yaml", nodeYAML("n2", "192.0.2.2"))
	var p problems
	s, calls := running(t, dir, &p)
	if _, _, nodes := names(s.Snapshot()); !equal(nodes, []string{"n1", "n2"}) {
		t.Fatalf("nodes = %v, want n1 and n2", nodes)
	}
	replaceFile(t, dir, "n2.yaml", nodeYAML("n2", "192.0.2.22"))
	deadline := time.After(2 * time.Second)
	for {
		select {
		case <-calls:
			in := s.Snapshot()
			if len(in.Nodes) == 2 && in.Nodes[1].Status.Addresses[0].Address == "192.0.2.22" {
				return
			}
		case <-deadline:
			t.Fatalf("the other Node's new address never showed: %+v", s.Snapshot().Nodes)
		}
	}
}
