package node

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/socklb/socklb/internal/oci"
)

// The e2e images the chosen tests run, under the names the suite expects
// (k8s.io/kubernetes test/utils/image/manifest.go at v1.37.2).
// Every image the focus runs is built here and imported on every node:
// a test that waits on an image not in this list is a harness bug (the
// report flags pull failures).
const (
	AgnhostImage = "registry.k8s.io/e2e-test-images/agnhost:2.66.1"
	BusyBoxImage = "registry.k8s.io/e2e-test-images/busybox:1.37.0-2"
	// The DNS tests' second prober: Debian with dnsutils (upstream's
	// test/images/glibc-dns-testing).
	GlibcDNSTestingImage = "registry.k8s.io/e2e-test-images/glibc-dns-testing:2.1.1"
	// The EndpointSlice and Endpoints tests run pods of nginx and never
	// talk to them: agnhost netexec serves HTTP on 80 in its place.
	NginxImage = "registry.k8s.io/e2e-test-images/nginx:1.27.0-2"
	// The KubeProxy CLOSE_WAIT test's host exec pod: sh, sleep, grep
	// and conntrack.
	DistrolessIptablesImage = "registry.k8s.io/build-image/distroless-iptables:v0.9.9"
	// The Conntrack INVALID-packets test's server, built from
	// k8s.io/kubernetes' test/images/regression-issue-74839.
	RegressionIssue74839Image = "registry.k8s.io/e2e-test-images/regression-issue-74839:1.5"
)

// LabclientImage holds tests/labclient beside agnhost, whose `pause`
// keeps the pod up while the tests exec the client in it.
const LabclientImage = "localhost/socklb-labclient:node"

// Binaries are the static programs the images are made of. AgnhostSource
// is k8s.io/kubernetes' test/images/agnhost, whose Dockerfile adds files
// beside the binary.
type Binaries struct {
	Agnhost, AgnhostSource, Socklb, Labclient, BusyBox, CoreDNS, Regression74839 string
}

// BuildImages writes one OCI tarball per image into dir and returns their
// paths: the e2e images under the names the suite expects, the pause
// image, socklb's image and the labclient image. rootfs is AgnhostRootfs.
func BuildImages(dir, rootfs string, b Binaries) ([]string, error) {
	agnhost, err := oci.FilesLayer([]oci.File{{Path: "/agnhost", Src: b.Agnhost, Mode: 0o755}})
	if err != nil {
		return nil, err
	}
	// As upstream's Dockerfile: porter's TLS ports (the Proxy conformance
	// test) read localhost.crt and localhost.key from the working directory.
	// And /coredns: the DNS tests run it from agnhost's image as their
	// own DNS server (generateCoreDNSServerPod: command /coredns), as
	// glibc-dns-testing's image has it too; upstream adds CoreDNS's
	// release binary, this is the one build.sh built.
	agnhostFiles, err := oci.FilesLayer([]oci.File{
		{Path: "/localhost.crt", Src: filepath.Join(b.AgnhostSource, "porter", "localhost.crt"), Mode: 0o644},
		{Path: "/localhost.key", Src: filepath.Join(b.AgnhostSource, "porter", "localhost.key"), Mode: 0o644},
		{Path: "/agnhost-2", Link: "agnhost"},
		{Path: "/coredns", Src: b.CoreDNS, Mode: 0o755},
		{Path: "/uploads/.keep", Src: "/dev/null", Mode: 0o644},
	})
	if err != nil {
		return nil, fmt.Errorf("agnhost's files from %s: %w", b.AgnhostSource, err)
	}
	base, err := oci.DirLayer(rootfs, dir)
	if err != nil {
		return nil, err
	}
	labclient, err := oci.FilesLayer([]oci.File{{Path: "/labclient", Src: b.Labclient, Mode: 0o755}})
	if err != nil {
		return nil, err
	}
	busybox, err := busyboxLayer(b.BusyBox)
	if err != nil {
		return nil, err
	}
	// Upstream's agnhost is alpine, whose wget is busybox's: the suite's
	// exec pods run `wget -q -T N -O - URL` against Services. Debian's
	// static busybox crashes in glibc's resolver there, so wget is that
	// call on the image's curl.
	shim := filepath.Join(dir, "wget")
	if err := os.WriteFile(shim, []byte(wgetShim), 0o755); err != nil {
		return nil, err
	}
	wget, err := oci.FilesLayer([]oci.File{{Path: "/usr/bin/wget", Src: shim, Mode: 0o755}})
	if err != nil {
		return nil, err
	}
	regression, err := oci.FilesLayer([]oci.File{{Path: "/regression-issue-74839", Src: b.Regression74839, Mode: 0o755}})
	if err != nil {
		return nil, err
	}
	type spec struct {
		ref             string
		entrypoint, cmd []string
		layers          []v1.Layer
	}
	specs := []spec{
		// CMD pause, as upstream's: the suite's exec pods (hostexec,
		// pause pods) run the image without args and must stay up.
		{AgnhostImage, []string{"/agnhost"}, []string{"pause"}, []v1.Layer{base, wget, agnhost, agnhostFiles}},
		// agnhost's pause answers SIGTERM and reaps, as the pause image does.
		{PauseImage, []string{"/agnhost", "pause"}, nil, []v1.Layer{agnhost}},
		{BusyBoxImage, nil, []string{"sh"}, []v1.Layer{busybox}},
		{LabclientImage, []string{"/agnhost", "pause"}, nil, []v1.Layer{agnhost, labclient}},
		{GlibcDNSTestingImage, nil, []string{"sh"}, []v1.Layer{base, agnhostFiles}},
		{NginxImage, []string{"/agnhost", "netexec", "--http-port=80"}, nil, []v1.Layer{base, agnhost}},
		{DistrolessIptablesImage, nil, []string{"sh"}, []v1.Layer{base}},
		{RegressionIssue74839Image, []string{"/regression-issue-74839"}, nil, []v1.Layer{regression}},
	}
	var out []string
	for i, s := range specs {
		img, err := oci.Image("amd64", s.entrypoint, s.cmd, s.layers...)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", s.ref, err)
		}
		path := filepath.Join(dir, fmt.Sprintf("image-%d.tar", i))
		if err := oci.WriteOCI(path, s.ref, img); err != nil {
			return nil, err
		}
		out = append(out, path)
	}
	path := filepath.Join(dir, "image-coredns.tar")
	if err := CoreDNSImageTarball(b.CoreDNS, path); err != nil {
		return nil, fmt.Errorf("CoreDNS's image: %w", err)
	}
	out = append(out, path)
	path = filepath.Join(dir, "image-socklb.tar")
	if err := SocklbImageTarball(b.Socklb, path); err != nil {
		return nil, fmt.Errorf("socklb's image: %w", err)
	}
	return append(out, path), nil
}

// wgetShim takes the options the suite gives wget (-q, -T seconds, -O file)
// and runs curl, failing on an HTTP error as wget does.
const wgetShim = `#!/bin/sh
t=10 out=- url=
while [ $# -gt 0 ]; do
	case "$1" in
	-T) t=$2; shift ;;
	-T*) t=${1#-T} ;;
	-O) out=$2; shift ;;
	-O*) out=${1#-O} ;;
	-*) ;;
	*) url=$1 ;;
	esac
	shift
done
exec curl -sf --max-time "$t" -o "$out" "$url"
`

// busyboxLayer is Debian's static busybox with a link per applet in /bin,
// as the busybox image has.
func busyboxLayer(bin string) (v1.Layer, error) {
	out, err := exec.Command(bin, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list (apt-get install busybox-static): %w", bin, err)
	}
	files := []oci.File{{Path: "/bin/busybox", Src: bin, Mode: 0o755}}
	for _, a := range strings.Fields(string(out)) {
		if a != "busybox" {
			files = append(files, oci.File{Path: "/bin/" + a, Link: "busybox"})
		}
	}
	files = append(files, oci.File{Path: "/tmp/.keep", Src: "/dev/null", Mode: 0o644})
	return oci.FilesLayer(files)
}
