package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/socklb/socklb/pkg/model"
)

// problems collects reported problems; Report may be called from Run's
// goroutine while the test reads.
type problems struct {
	mu   sync.Mutex
	list []model.Problem
}

func (p *problems) report(pr model.Problem) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.list = append(p.list, pr)
}

func (p *problems) take() []model.Problem {
	p.mu.Lock()
	defer p.mu.Unlock()
	l := p.list
	p.list = nil
	return l
}

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func names(in model.Input) (svcs, eps, nodes []string) {
	for _, s := range in.Services {
		svcs = append(svcs, s.Namespace+"/"+s.Name)
	}
	for _, s := range in.Slices {
		eps = append(eps, s.Namespace+"/"+s.Name)
	}
	for _, n := range in.Nodes {
		nodes = append(nodes, n.Name)
	}
	return
}

func serviceNames(in model.Input) []string {
	s, _, _ := names(in)
	return s
}

func equal(a, b []string) bool { return slices.Equal(a, b) }

// replaceFile writes a file the way careful editors do: a temporary file
// renamed over the old one.
func replaceFile(t *testing.T, dir, name, data string) {
	t.Helper()
	tmp := writeFile(t, dir, "."+name+".tmp", data)
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}
