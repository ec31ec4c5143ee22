// Package oci builds container images as OCI layout tarballs without a
// container engine: socklb's own image (`make image`) and the images of the
// real-node tests. Every layer and file is written with fixed times and
// sorted entries, so the same inputs give the same bytes.
package oci

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// File is one entry of an image layer.
type File struct {
	Path string // inside the image, absolute
	Src  string // a host file to copy; empty for a symlink or directory
	Link string // symlink target
	Mode int64
}

// epoch: layers are reproducible, whatever the files' times on this host.
var epoch = time.Unix(0, 0)

// FilesLayer is a layer holding files.
func FilesLayer(files []File) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		for d := filepath.Dir(f.Path); d != "/" && !dirs[d]; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range sortedKeys(dirs) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	for _, f := range files {
		h := &tar.Header{Name: strings.TrimPrefix(f.Path, "/"), Mode: f.Mode, ModTime: epoch}
		switch {
		case f.Link != "":
			h.Typeflag, h.Linkname, h.Mode = tar.TypeSymlink, f.Link, 0o777
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
		default:
			b, err := os.ReadFile(f.Src)
			if err != nil {
				return nil, err
			}
			h.Typeflag, h.Size = tar.TypeReg, int64(len(b))
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			if _, err := tw.Write(b); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

// DirLayer is a layer holding a root filesystem directory (debootstrap's
// output), without the contents of /dev, /proc and /sys, which the runtime
// provides. The uncompressed layer is kept in tmpDir.
func DirLayer(root, tmpDir string) (v1.Layer, error) {
	tmp, err := os.CreateTemp(tmpDir, "layer-*.tar")
	if err != nil {
		return nil, err
	}
	defer tmp.Close()
	tw := tar.NewWriter(tmp)
	err = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		for _, skip := range []string{"dev/", "proc/", "sys/"} {
			if strings.HasPrefix(rel+"/", skip) && rel+"/" != skip {
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		link := ""
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsDir(), fi.Mode().IsRegular():
		default:
			return nil // devices, sockets, fifos: not in an image
		}
		h, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		h.Name = rel
		if fi.IsDir() {
			h.Name += "/"
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			h.Uid, h.Gid = int(st.Uid), int(st.Gid)
		}
		h.Uname, h.Gname = "", ""
		h.ModTime, h.AccessTime, h.ChangeTime = epoch, time.Time{}, time.Time{}
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if fi.Mode().IsRegular() {
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			f.Close()
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		os.Remove(tmp.Name())
		return nil, fmt.Errorf("packing %s: %w", root, err)
	}
	path := tmp.Name()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return os.Open(path) })
}

// Image assembles a Linux image for arch (GOARCH) from layers.
func Image(arch string, entrypoint, cmd []string, layers ...v1.Layer) (v1.Image, error) {
	img, err := mutate.AppendLayers(empty.Image, layers...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", arch
	cf.Created = v1.Time{Time: epoch}
	cf.Config.Entrypoint, cf.Config.Cmd = entrypoint, cmd
	cf.Config.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return mutate.ConfigFile(img, cf)
}

// WriteOCI writes img as an OCI layout tarball whose index names it ref,
// in the annotation `ctr images import` reads.
func WriteOCI(path, ref string, img v1.Image) error {
	return write(path, ref, func(p layout.Path, ann layout.Option) error { return p.AppendImage(img, ann) })
}

// WriteOCIIndex writes a multi-platform index (one image per platform) as
// an OCI layout tarball named ref.
func WriteOCIIndex(path, ref string, idx v1.ImageIndex) error {
	return write(path, ref, func(p layout.Path, ann layout.Option) error { return p.AppendIndex(idx, ann) })
}

// Index is a multi-platform index of images, keyed by GOARCH.
func Index(images map[string]v1.Image) v1.ImageIndex {
	var adds []mutate.IndexAddendum
	for _, arch := range sortedKeys(boolSet(images)) {
		adds = append(adds, mutate.IndexAddendum{Add: images[arch], Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return mutate.AppendManifests(empty.Index, adds...)
}

func boolSet[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func write(path, ref string, add func(layout.Path, layout.Option) error) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "socklb-oci-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := add(p, layout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	})); err != nil {
		return fmt.Errorf("writing %s: %w", ref, err)
	}
	return tarDir(dir, path)
}

// tarDir writes the files of dir into a tarball at path, sorted, with
// fixed times and owners.
func tarDir(dir, path string) error {
	var files []string
	if err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && p != dir {
			files = append(files, p)
		}
		return err
	}); err != nil {
		return err
	}
	sort.Strings(files)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	for _, p := range files {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: rel, Mode: 0o644, ModTime: epoch, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = rel+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out) // parents before children
	return out
}
