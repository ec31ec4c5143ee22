package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/socklb/socklb/internal/testkit"
)

// TestRevisionOf: the revision given at build time (-X main.revision,
// what `make image` and deploy/Dockerfile pass, their builds having no
// VCS stamp) wins over the one Go recorded; without either there is none.
func TestRevisionOf(t *testing.T) {
	stamped := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "go-recorded"}}}
	unstamped := &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "-trimpath", Value: "true"}}}
	for _, c := range []struct {
		name   string
		ldflag string
		bi     *debug.BuildInfo
		ok     bool
		want   string
	}{
		{"-X main.revision over Go's stamp", "from-ldflags", stamped, true, "from-ldflags"},
		{"-X main.revision, no stamp (the image)", "from-ldflags", unstamped, true, "from-ldflags"},
		{"Go's stamp alone (go build in a checkout)", "", stamped, true, "go-recorded"},
		{"neither", "", unstamped, true, ""},
		{"no build info", "", nil, false, ""},
	} {
		if got := revisionOf(c.ldflag, c.bi, c.ok); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestVersionCommandRevision: `socklb version` prints the build-time
// revision (and the agent labels socklb_build_info with the same
// buildRevision).
func TestVersionCommandRevision(t *testing.T) {
	defer func(r string) { revision = r }(revision)
	revision = "0123456789abcdef0123456789abcdef01234567"
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"version"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := "socklb " + version + " (" + revision + ")\n"; out.String() != want {
		t.Errorf("socklb version printed %q, want %q", out.String(), want)
	}
}

// TestRevisionLinkerFlag: the symbol the image builds set exists, so
// their -X is not silently dropped (the linker ignores an -X naming no
// variable): a binary built as deploy/image builds it, without VCS
// stamping, prints the revision it was given.
func TestRevisionLinkerFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("links socklb: not in -short")
	}
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "socklb")
	const rev = "feedfacefeedfacefeedfacefeedfacefeedface"
	build := exec.Command("go", "build", "-buildvcs=false", "-ldflags", "-X main.version=v9.9.9 -X main.revision="+rev, "-o", bin, "./cmd/socklb")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "socklb v9.9.9 ("+rev+")" {
		t.Errorf("socklb version: %q, %v; want socklb v9.9.9 (%s)", got, err, rev)
	}
}
