package testkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// Binary is a command of this module that tests run as a real process. It
// is built once per process (a build takes longer than most tests) into a
// temporary directory, removed by Remove: call it at the end of TestMain or
// of the program (else a few MB named socklb-<name>-* stay in the OS temp
// directory).
type Binary struct {
	Pkg string // the package, from the module root: "./cmd/socklb"
	Env string // a variable that names a prebuilt binary to use instead; may be empty

	mu   sync.Mutex
	dir  string
	path string
}

// Build builds the binary as `make build` does (static, no cgo) unless it
// is built already, and returns its path.
func (b *Binary) Build() (string, error) {
	if b.Env != "" {
		if p := os.Getenv(b.Env); p != "" {
			return p, nil
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.path != "" {
		return b.path, nil
	}
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	name := filepath.Base(b.Pkg)
	dir, err := os.MkdirTemp("", "socklb-"+name+"-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command(GoTool(), "build", "-trimpath", "-o", bin, b.Pkg)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("building %s (go build %s in %s): %w\n%s", name, b.Pkg, root, err, out)
	}
	b.dir, b.path = dir, bin
	return bin, nil
}

// Remove deletes what Build built; the next Build builds again.
func (b *Binary) Remove() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dir == "" {
		return nil
	}
	err := os.RemoveAll(b.dir)
	b.dir, b.path = "", ""
	return err
}
