package oci

import v1 "github.com/google/go-containerregistry/pkg/v1"

// SocklbImage is socklb's image for one architecture: the static binary
// alone at /socklb, which is all the DaemonSet runs (the agent and its init
// container, `socklb mount-cgroup`). No shell, no libc, no package manager.
func SocklbImage(arch, bin string) (v1.Image, error) {
	l, err := FilesLayer([]File{{Path: "/socklb", Src: bin, Mode: 0o755}})
	if err != nil {
		return nil, err
	}
	return Image(arch, []string{"/socklb"}, []string{"agent"}, l)
}
