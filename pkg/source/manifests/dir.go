package manifests

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/socklb/socklb/pkg/model"
)

// maxFileSize bounds what one file can make the agent hold in memory. Real
// manifests are far smaller; a runaway file must not take the node down.
const maxFileSize = 16 << 20

// dirState remembers what the directory held at its last reads, file by
// file, so a bad file can fall back to its last good objects.
type dirState struct {
	dir    string
	report func(model.Problem)
	files  map[string]fileState // by base name
}

type fileState struct {
	sum  [sha256.Size]byte // of the contents last read, good or bad
	objs Objects           // of the last good contents
}

func newDirState(dir string, report func(model.Problem)) *dirState {
	if report == nil {
		report = func(model.Problem) {}
	}
	return &dirState{dir: dir, report: report, files: map[string]fileState{}}
}

// reload reads the directory again and reports whether any file appeared,
// disappeared or changed contents. Unchanged files are not decoded again, so
// their problems are not reported again either.
func (d *dirState) reload() (changed bool) {
	entries, err := os.ReadDir(d.dir)
	if err != nil {
		// Keep everything: a directory that vanished for a moment (a volume
		// being remounted) must not withdraw every Service.
		d.fileProblem(d.dir, fmt.Errorf("reading manifests directory (keeping the last objects): %w", err))
		return false
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		name := e.Name()
		if !isManifest(name) {
			continue
		}
		path := filepath.Join(d.dir, name)
		data, err := readManifest(path)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, errNotRegular):
			continue // removed meanwhile, a dangling symlink, or a directory
		case err != nil:
			seen[name] = true // keep its last good objects
			d.fileProblem(path, fmt.Errorf("reading (keeping its last good objects): %w", err))
			continue
		}
		seen[name] = true
		if d.update(name, path, data) {
			changed = true
		}
	}
	for name := range d.files {
		if !seen[name] {
			delete(d.files, name)
			changed = true
		}
	}
	return changed
}

// update decodes a file whose contents differ from the last read.
func (d *dirState) update(name, path string, data []byte) (changed bool) {
	sum := sha256.Sum256(data)
	old, known := d.files[name]
	if known && old.sum == sum {
		return false
	}
	objs, errs := Decode(data)
	fatal := Fatal(errs)
	for _, e := range errs {
		if fatal && e.Fatal {
			d.fileProblem(path, fmt.Errorf("%w; keeping this file's last good objects (%d)", e, old.objs.Len()))
		} else {
			d.fileProblem(path, e)
		}
	}
	if fatal {
		objs = old.objs
	}
	d.files[name] = fileState{sum: sum, objs: objs}
	return true
}

func (d *dirState) fileProblem(path string, err error) {
	d.report(model.Problem{Kind: model.KindFile, Object: types.NamespacedName{Name: path}, Reason: err.Error()})
}

// isManifest says which directory entries are read; see the package comment.
func isManifest(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

var errNotRegular = errors.New("not a regular file")

// readManifest reads a file through symlinks, refusing anything but a
// regular file: opening a FIFO would block the watch loop forever.
func readManifest(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxFileSize)
	}
	return data, nil
}
