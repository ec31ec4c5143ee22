// Command image builds socklb's container image without a container
// engine (`make image`): socklb compiled for each architecture, static and
// reproducible (-trimpath, no VCS stamp but the commit passed in, fixed
// times), one image per
// architecture under one OCI index, written as an OCI layout tarball that
// `ctr images import`, `skopeo copy oci-archive:...` or `crane push` take.
// Each image carries an SPDX SBOM of the binary (internal/oci.SBOM) and,
// as the index does, the OCI annotations naming source, version and commit.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/socklb/socklb/internal/oci"
)

// Source is the repository the image names as its source
// (org.opencontainers.image.source, and the SBOM's download location).
const Source = "https://github.com/socklb/socklb"

func main() {
	out := flag.String("out", "bin/socklb-image.tar", "the OCI layout tarball to write")
	ref := flag.String("name", "localhost/socklb:dev", "the image's name (deploy/base/kustomization.yaml's images: newName:newTag)")
	version := flag.String("version", "dev", "socklb's version, as `socklb version` prints it")
	revision := flag.String("revision", "", "the commit built (git rev-parse HEAD; make image passes it): `socklb version` and socklb_build_info's revision label")
	arches := flag.String("arch", "amd64,arm64", "GOARCH values, comma-separated")
	flag.Parse()
	if *revision == "" {
		fmt.Fprintln(os.Stderr, "image: no --revision: `socklb version` and socklb_build_info will name no commit (make image passes git rev-parse HEAD)")
	}
	if err := run(*out, *ref, *version, *revision, strings.Split(*arches, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// goBuild is the build of one architecture's binary. Reproducible:
// -trimpath, no build ID, and no VCS stamp (it would differ with the
// checkout's state), so the commit comes in through -X main.revision.
func goBuild(version, revision, bin string) []string {
	return []string{"go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= -X main.version=" + version + " -X main.revision=" + revision, "-o", bin, "./cmd/socklb"}
}

func run(out, ref, version, revision string, arches []string) error {
	tmp, err := os.MkdirTemp("", "socklb-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	images := map[string]v1.Image{}
	meta := oci.Meta{Source: Source, Version: version, Revision: revision}
	for _, arch := range arches {
		bin := filepath.Join(tmp, "socklb-"+arch)
		args := goBuild(version, revision, bin)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building socklb for %s: %w", arch, err)
		}
		if images[arch], err = oci.SocklbImage(arch, bin, meta); err != nil {
			return fmt.Errorf("image for %s: %w", arch, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	idx := mutate.Annotations(oci.Index(images), meta.Annotations()).(v1.ImageIndex)
	if err := oci.WriteOCIIndex(out, ref, idx); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%s, %s)\n", out, ref, strings.Join(arches, ", "))
	return nil
}
