package oci

import (
	"os"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// SocklbImage is socklb's image for one architecture: the static binary
// alone at /socklb, which is all the DaemonSet runs (the agent and its init
// container, `socklb mount-cgroup`), and its SBOM at SBOMPath. No shell,
// no libc, no package manager. Its manifest carries m's annotations.
func SocklbImage(arch, bin string, m Meta) (v1.Image, error) {
	sbom, err := SBOM(bin, m)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "socklb-sbom-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sbomFile := filepath.Join(dir, "sbom.json")
	if err := os.WriteFile(sbomFile, sbom, 0o644); err != nil {
		return nil, err
	}
	l, err := FilesLayer([]File{{Path: "/socklb", Src: bin, Mode: 0o755}, {Path: SBOMPath, Src: sbomFile, Mode: 0o644}})
	if err != nil {
		return nil, err
	}
	img, err := Image(arch, []string{"/socklb"}, []string{"agent"}, l)
	if err != nil {
		return nil, err
	}
	return mutate.Annotations(img, m.Annotations()).(v1.Image), nil
}
