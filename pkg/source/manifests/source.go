package manifests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/socklb/socklb/pkg/model"
	"github.com/socklb/socklb/pkg/source"
)

const (
	// debounce lets a multi-write save (truncate, write, write, chmod) or a
	// ConfigMap symlink swap settle into one reload.
	debounce = 50 * time.Millisecond
	// maxDelay bounds how long a stream of events can postpone a reload, so
	// a directory that never stops changing is still followed.
	maxDelay = 250 * time.Millisecond
	// resync re-reads the directory and re-adds the watch now and then, a
	// safety net for lost inotify events or a directory that was replaced.
	// Reads of unchanged files cost a hash and change nothing.
	resync = 30 * time.Second
)

// Config configures a manifests Source.
type Config struct {
	Dir      string           // the directory to read and watch
	NodeName string           // copied into every Snapshot
	Report   model.ReportFunc // receives problems; nil drops them
}

// Source reads a directory of manifests and follows its changes.
type Source struct {
	cfg   Config
	state *dirState                   // owned by Run's goroutine
	snap  atomic.Pointer[model.Input] // replaced, never modified
}

var _ source.Source = (*Source)(nil)

// New checks that cfg.Dir is a directory; reading starts with Run.
func New(cfg Config) (*Source, error) {
	if err := CheckDir(cfg.Dir); err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, state: newDirState(cfg.Dir, cfg.Report)}
	s.snap.Store(&model.Input{NodeName: cfg.NodeName})
	return s, nil
}

// Snapshot returns the objects of the last directory read.
func (s *Source) Snapshot() model.Input { return *s.snap.Load() }

// Run watches the directory itself, not its files: editors replace files by
// renaming a temporary one over them, and ConfigMap volumes swap a "..data"
// symlink, and both only show up as events on the directory.
func (s *Source) Run(ctx context.Context, changed func()) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watching manifests directory %s: %w", s.cfg.Dir, err)
	}
	defer w.Close()
	// Watch before the first read so a change made during it is not missed.
	if err := w.Add(s.cfg.Dir); err != nil {
		return fmt.Errorf("watching manifests directory %s: %w", s.cfg.Dir, err)
	}
	s.state.reload()
	s.publish()
	changed()

	timer := time.NewTimer(time.Hour)
	timer.Stop()
	ticker := time.NewTicker(resync)
	defer ticker.Stop()
	var pendingSince time.Time // zero when no reload is pending

	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-w.Events:
			if !ok {
				return errors.New("manifests directory watch closed")
			}
			pendingSince = schedule(timer, pendingSince)
		case err, ok := <-w.Errors:
			if !ok {
				return errors.New("manifests directory watch closed")
			}
			// An overflow means events were lost: reload to catch up.
			s.state.fileProblem(s.cfg.Dir, fmt.Errorf("watching (reloading): %w", err))
			pendingSince = schedule(timer, pendingSince)
		case <-timer.C:
			pendingSince = time.Time{}
			s.reload(changed)
		case <-ticker.C:
			if err := w.Add(s.cfg.Dir); err != nil {
				s.state.fileProblem(s.cfg.Dir, fmt.Errorf("watching again: %w", err))
			}
			s.reload(changed)
		}
	}
}

// schedule (re)arms the debounce timer and returns when the pending reload
// was first asked for.
func schedule(timer *time.Timer, pendingSince time.Time) time.Time {
	now := time.Now()
	if pendingSince.IsZero() {
		pendingSince = now
	}
	timer.Reset(max(0, min(debounce, maxDelay-now.Sub(pendingSince))))
	return pendingSince
}

func (s *Source) reload(changed func()) {
	if s.state.reload() {
		s.publish()
		changed()
	}
}

func (s *Source) publish() {
	in := s.state.input(s.cfg.NodeName)
	s.snap.Store(&in)
}

// CheckDir says whether dir can be a manifests directory, so the agent can
// refuse a wrong --manifests before it touches the kernel.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("manifests directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("manifests directory %s: not a directory", dir)
	}
	return nil
}
