package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/socklb/socklb/internal/testkit"
)

const testRevision = "5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed"

// TestGoBuildRevision: the image's binaries carry the commit they were
// built from. Their build records no VCS stamp (reproducibility), so
// without -X main.revision `socklb version` and socklb_build_info would
// name none; cmd/socklb's TestRevisionLinkerFlag checks that the symbol
// exists and wins.
func TestGoBuildRevision(t *testing.T) {
	args := goBuild("v1.2.3", testRevision, "/tmp/socklb")
	i := slices.Index(args, "-ldflags")
	if i < 0 || i+1 >= len(args) {
		t.Fatalf("no -ldflags in %q", args)
	}
	ldflags := strings.Fields(args[i+1])
	for _, want := range [][]string{{"-X", "main.version=v1.2.3"}, {"-X", "main.revision=" + testRevision}} {
		if j := slices.Index(ldflags, want[1]); j < 1 || ldflags[j-1] != want[0] {
			t.Errorf("-ldflags %q lack %s %s", args[i+1], want[0], want[1])
		}
	}
	if !slices.Contains(args, "-buildvcs=false") || !slices.Contains(args, "-trimpath") {
		t.Errorf("%q: not the reproducible build", args)
	}
}

// `make image` promises one tarball, built twice from the same commit to
// the same bytes, holding socklb for amd64 and arm64 and nothing else.
func TestImageReproducibleMultiArch(t *testing.T) {
	if testing.Short() {
		t.Skip("builds socklb four times (two architectures, twice): not in -short")
	}
	root, err := testkit.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	for _, out := range []string{a, b} {
		if err := run(out, "localhost/socklb:test", "test", testRevision, []string{"amd64", "arm64"}); err != nil {
			t.Fatalf("building the image: %v", err)
		}
	}
	ab, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ab, bb) {
		t.Fatalf("two builds of the same commit differ (%d and %d bytes)", len(ab), len(bb))
	}

	idx := openIndex(t, ab, filepath.Join(dir, "layout"))
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if got := im.Annotations["org.opencontainers.image.revision"]; got != testRevision {
		t.Errorf("the index's org.opencontainers.image.revision is %q, want %s", got, testRevision)
	}
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var seen []string
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" {
			t.Fatalf("manifest %s: platform %v, want linux", d.Digest, d.Platform)
		}
		arch := d.Platform.Architecture
		seen = append(seen, arch)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.Architecture != arch || !slices.Equal(cf.Config.Entrypoint, []string{"/socklb"}) || cf.Config.User != "" {
			t.Errorf("%s: config says arch %s, entrypoint %v, user %q", arch, cf.Architecture, cf.Config.Entrypoint, cf.Config.User)
		}
		files := imageFiles(t, img)
		checkProvenance(t, arch, img, files["usr/share/sbom/socklb.spdx.json"])
		if len(files) != 2 || files["socklb"] == nil {
			names := make([]string, 0, len(files))
			for n := range files {
				names = append(names, n)
			}
			t.Fatalf("%s: the image holds %v, want socklb and its SBOM alone", arch, names)
		}
		f, err := elf.NewFile(bytes.NewReader(files["socklb"]))
		if err != nil {
			t.Fatalf("%s: /socklb is not an ELF binary: %v", arch, err)
		}
		if !bytes.Contains(files["socklb"], []byte(testRevision)) {
			t.Errorf("%s: /socklb does not hold its revision %s (-X main.revision)", arch, testRevision)
		}
		if f.Machine != want[arch] {
			t.Errorf("%s: /socklb is built for %s", arch, f.Machine)
		}
		if f.Progs != nil {
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s: /socklb is dynamically linked (PT_INTERP): the image has no libc", arch)
				}
			}
		}
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"amd64", "arm64"}) {
		t.Errorf("platforms %v, want amd64 and arm64", seen)
	}
}

// checkProvenance: the image's manifest names its source, version and
// commit in the OCI annotations, and its SPDX SBOM describes socklb at that
// commit and lists the modules linked in, with the versions go.mod pins.
func checkProvenance(t *testing.T, arch string, img v1.Image, sbom []byte) {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"org.opencontainers.image.revision": testRevision,
		"org.opencontainers.image.version": "test", "org.opencontainers.image.source": Source} {
		if got := m.Annotations[k]; got != want {
			t.Errorf("%s: annotation %s is %q, want %q", arch, k, got, want)
		}
	}
	var doc struct {
		SPDXVersion string `json:"spdxVersion"`
		Packages    []struct {
			Name     string `json:"name"`
			Version  string `json:"versionInfo"`
			Download string `json:"downloadLocation"`
		} `json:"packages"`
		Relationships []struct {
			Type string `json:"relationshipType"`
		} `json:"relationships"`
	}
	if err := json.Unmarshal(sbom, &doc); err != nil {
		t.Fatalf("%s: the SBOM at /usr/share/sbom/socklb.spdx.json does not parse (%d bytes): %v", arch, len(sbom), err)
	}
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"github.com/socklb/socklb": "test"}
	for _, path := range []string{"github.com/cilium/ebpf", "k8s.io/client-go", "golang.org/x/sys"} {
		v := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(path) + ` (v\S+)`).FindSubmatch(mod)
		if v == nil {
			t.Fatalf("go.mod does not require %s", path)
		}
		want[path] = string(v[1])
	}
	got := map[string]string{}
	for _, p := range doc.Packages {
		got[p.Name] = p.Version
		if p.Name == "github.com/socklb/socklb" && !strings.HasSuffix(p.Download, "@"+testRevision) {
			t.Errorf("%s: the SBOM's socklb comes from %q, want the commit %s", arch, p.Download, testRevision)
		}
	}
	for path, v := range want {
		if got[path] != v {
			t.Errorf("%s: the SBOM lists %s at %q, want %q", arch, path, got[path], v)
		}
	}
	if doc.SPDXVersion != "SPDX-2.3" || len(doc.Packages) < 20 || len(doc.Relationships) != len(doc.Packages) {
		t.Errorf("%s: SBOM %s with %d packages and %d relationships, want SPDX-2.3, every module linked in, each related", arch, doc.SPDXVersion, len(doc.Packages), len(doc.Relationships))
	}
}

// openIndex unpacks the OCI layout tarball and returns the image index its
// index.json names.
func openIndex(t *testing.T, tarball []byte, dir string) v1.ImageIndex {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		if h.Typeflag == tar.TypeDir {
			os.MkdirAll(p, 0o755)
			continue
		}
		os.MkdirAll(filepath.Dir(p), 0o755)
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	top, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatalf("reading the OCI layout: %v", err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("index.json names %d entries, want the one multi-arch index", len(m.Manifests))
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatalf("index.json's entry is not an image index: %v", err)
	}
	return idx
}

// imageFiles are the regular files of img's layers, by path.
func imageFiles(t *testing.T, img v1.Image) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if h.Typeflag == tar.TypeReg {
				b, err := io.ReadAll(tr)
				if err != nil {
					t.Fatal(err)
				}
				out[strings.TrimPrefix(filepath.Clean("/"+h.Name), "/")] = b
			}
		}
		rc.Close()
	}
	return out
}
