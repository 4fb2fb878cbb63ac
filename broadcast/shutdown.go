package broadcast

import "context"

// Shutdown stops the broadcaster. From its start, Publish, PublishContext,
// TryPublish and the Watch methods return [ErrClosed]. A Publish still waiting
// for a full Block watcher may finish until ctx ends; then it gives up (its
// value is dropped, counted, for the watchers it had not reached) and Shutdown
// returns ctx.Err(). Then every watcher ends: every value queued for it stays
// readable, through All (which ends after them) or through C (closed after
// them), whether or not anything reads while Shutdown runs; Shutdown never
// waits for a reader. When it returns, no goroutine of the broadcaster remains.
// Calls after the first wait for it to finish and return nil (or their own
// ctx.Err()). Shutdown(nil) returns an error and does nothing.
func (b *Broadcaster[T]) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	b.mu.Lock()
	if b.shutDone != nil {
		done := b.shutDone
		b.mu.Unlock()
		return waitDone(ctx, done)
	}
	b.closed = true
	b.shutDone = make(chan struct{})
	b.wakeTurnLocked() // publishers waiting for the turn give up
	err := b.waitTurnLocked(ctx)
	callbacks := b.endAllLocked()
	b.mu.Unlock()
	// No WithContext callback runs after Shutdown returns: unregister each,
	// or wait for one already running.
	for _, w := range callbacks {
		w.stopCtx()
		<-w.ctxAfter
	}
	close(b.shutDone)
	return err
}

// waitTurnLocked waits, with mu held except while it blocks, until no
// publisher holds the turn. If ctx ends first it makes that publisher give
// up (abort) and returns ctx.Err() once it has committed.
func (b *Broadcaster[T]) waitTurnLocked(ctx context.Context) error {
	var err error
	for b.busy {
		t, abort := b.turnLocked(), b.abortLocked()
		b.mu.Unlock()
		select {
		case <-t:
		case <-ctx.Done():
			if err == nil {
				err = ctx.Err()
				close(abort)
			}
			<-t
		}
		b.mu.Lock()
	}
	return err
}

// endAllLocked ends every watcher, with mu held and no publish running or
// to come: readers take what is queued, then end; C() channels are closed
// after what they hold. It returns those with a WithContext callback.
func (b *Broadcaster[T]) endAllLocked() []*Watcher[T] {
	var callbacks []*Watcher[T]
	for _, list := range [][]*Watcher[T]{b.readers, b.chans} {
		for _, w := range list {
			w.mu.Lock()
			w.state = endState{ended, ErrClosed}
			w.mu.Unlock()
			if w.ch != nil {
				w.closeChLocked()
			}
			w.index = -1
			if w.ctxStop != nil {
				callbacks = append(callbacks, w)
			}
		}
		clear(list)
	}
	for w := range b.evictedCtx {
		callbacks = append(callbacks, w)
	}
	clear(b.evictedCtx)
	b.readers, b.chans, b.nBlockFor = nil, nil, 0
	wakeAll(b.parked)
	b.parked = nil
	return callbacks
}

func waitDone(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
