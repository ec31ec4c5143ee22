package testkit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// ModuleRoot walks up from the working directory to the directory holding
// go.mod: tests run in their package's directory, the benchmark and the
// demo wherever they were started.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if fileExists(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testkit: go.mod not found above the working directory: run from inside the socklb module")
		}
		dir = parent
	}
}

// GoTool is the go command that runs the tests: `sudo go test` often has
// no Go on root's PATH, but runtime.GOROOT still names it.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
