package quorum

import (
	"context"
	"errors"
	"sync"

	"github.com/hashlock/locker"
	"github.com/hashlock/locker/internal/display"
)

// Subscribe implements locker.Locker: it subscribes on every node that has release notices and
// merges them: a notice from any node wakes the subscriber. It fails only when no node could
// subscribe (with errors.ErrUnsupported when none has notices); a node that failed leaves the
// subscriber to its timers for that node's releases.
func (b *Backend) Subscribe(ctx context.Context, key string) (<-chan struct{}, func(), error) {
	if b.err != nil {
		return nil, nil, b.err
	}
	type sub struct {
		ch     <-chan struct{}
		cancel func()
	}
	res := all(ctx, b, b.timeout, func(ctx context.Context, _ int, n locker.Locker) (sub, error) {
		ch, cancel, err := n.Subscribe(ctx, key)
		return sub{ch, cancel}, err
	})
	var (
		subs []sub
		errs []error
	)
	for _, r := range res {
		if r.err != nil {
			errs = append(errs, r.err)
		} else {
			subs = append(subs, r.v)
		}
	}
	if len(subs) == 0 {
		err := errors.Join(errs...)
		if errors.Is(err, errors.ErrUnsupported) {
			return nil, nil, display.Errorf("quorum: subscribe: %w", errors.ErrUnsupported)
		}
		return nil, nil, display.Errorf("quorum: subscribe: %w", err)
	}
	notices := make(chan struct{}, 1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range subs {
		wg.Go(func() {
			for {
				select {
				case <-s.ch:
					select {
					case notices <- struct{}{}:
					default: // one is pending: merged
					}
				case <-done:
					return
				}
			}
		})
	}
	var once sync.Once
	cancel := func() {
		once.Do(func() {
			close(done)
			wg.Wait()
			for _, s := range subs {
				s.cancel()
			}
		})
	}
	return notices, cancel, nil
}
