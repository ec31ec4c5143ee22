package main

import (
	"context"
	"sync"
)

// inParallel calls fn on [lo, hi) ranges of at most step covering
// [from, to), from workers goroutines, and returns the first error (or
// the context's): the fillers are written this way, through the API server
// or into etcd.
func inParallel(ctx context.Context, workers, from, to, step int, fn func(lo, hi int) error) error {
	jobs := make(chan [2]int)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range jobs {
				if err := fn(r[0], r[1]); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
feed:
	for i := from; i < to; i += step {
		select {
		case jobs <- [2]int{i, min(i+step, to)}:
		case err := <-errs:
			errs <- err
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	return ctx.Err()
}
