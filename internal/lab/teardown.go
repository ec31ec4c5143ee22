package lab

import (
	"errors"
	"sync"
)

// teardown is the undo stack of a lab: every step that creates something
// pushes the step that removes it, and close runs them in reverse. Once
// closed it refuses new steps, so nothing can be created after (or while)
// the lab is torn down and then leak.
type teardown struct {
	mu     sync.Mutex
	steps  []func() error
	closed bool

	once sync.Once
	err  error
}

// push registers an undo step.
func (t *teardown) push(f func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("lab: closed")
	}
	t.steps = append(t.steps, f)
	return nil
}

// isClosed reports whether close has begun.
func (t *teardown) isClosed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.closed
}

// close runs the steps in reverse order of push, once; every later call
// returns the first call's result. It returns every error met: one failed
// step does not stop the others.
func (t *teardown) close() error {
	t.once.Do(func() {
		t.mu.Lock()
		t.closed = true
		steps := t.steps
		t.steps = nil
		t.mu.Unlock()
		var errs []error
		for i := len(steps) - 1; i >= 0; i-- {
			if err := steps[i](); err != nil {
				errs = append(errs, err)
			}
		}
		t.err = errors.Join(errs...)
	})
	return t.err
}
