package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cilium/ebpf"

	socklbbpf "github.com/socklb/socklb/bpf"
	"github.com/socklb/socklb/internal/testkit"
)

// measuredCommit names the commit whose hooks this binary runs. The BPF
// objects are embedded in the binary at build time, and this tree builds
// with -buildvcs=false, so the checkout's HEAD is taken only after checking
// that the checkout's bpf/socklb_bpfel.o is the object embedded here.
func measuredCommit() (commit, bpfTree string, dirty bool, err error) {
	root, err := testkit.ModuleRoot()
	if err != nil {
		return "", "", false, fmt.Errorf("run hookcost from the socklb checkout: %w", err)
	}
	git := func(args ...string) (string, error) {
		out, err := exec.Command("git", append([]string{"-C", root}, args...)...).Output()
		return strings.TrimSpace(string(out)), err
	}
	if commit, err = git("rev-parse", "HEAD"); err != nil {
		return "", "", false, fmt.Errorf("git rev-parse HEAD in %s: %w", root, err)
	}
	// bpf/'s tree id names the objects whatever commit carries them.
	if bpfTree, err = git("rev-parse", "HEAD:bpf"); err != nil {
		return "", "", false, fmt.Errorf("git rev-parse HEAD:bpf in %s: %w", root, err)
	}
	status, err := git("status", "--porcelain", "--untracked-files=no", "--", "bpf")
	if err != nil {
		return "", "", false, fmt.Errorf("git status in %s: %w", root, err)
	}
	embedded, err := socklbbpf.LoadSocklb()
	if err != nil {
		return "", "", false, err
	}
	onDisk, err := ebpf.LoadCollectionSpec(filepath.Join(root, "bpf", "socklb_bpfel.o"))
	if err != nil {
		return "", "", false, err
	}
	for name, p := range embedded.Programs {
		q := onDisk.Programs[name]
		if q == nil || fmt.Sprint(p.Instructions) != fmt.Sprint(q.Instructions) {
			return "", "", false, fmt.Errorf("program %s embedded in this binary differs from %s's bpf/socklb_bpfel.o: "+
				"rebuild hookcost from this checkout (go run ./bench/cmd/hookcost)", name, root)
		}
	}
	return commit, bpfTree, status != "", nil
}
