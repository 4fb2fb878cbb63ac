package broadcast

import "context"

// Shutdown stops the broadcaster. From its start, Publish, PublishContext,
// TryPublish, Watch and WatchWithPrefix return [ErrClosed]. A Publish still
// waiting for a full Block watcher may finish until ctx ends; then it gives
// up (its value is dropped, counted, for the watchers it had not reached).
// Every value whose Publish returned nil is then delivered: a watcher read
// through All() keeps it readable, and its loop ends after the last one; a
// watcher read through C() gets it in its channel, which is then closed.
// A C() channel buffers fewer than [ChannelBuffer] values, so Shutdown
// waits for C() readers to take the rest of their queues; if ctx ends
// first, the channels keep what they hold and the rest is dropped (counted
// in Dropped). Shutdown returns nil, or ctx.Err() if ctx ended first;
// either way every watcher is closed and every goroutine of the broadcaster
// has exited. Calls after the first wait for it to finish and return nil
// (or their own ctx.Err()). Shutdown(nil) returns an error and does
// nothing.
func (b *Broadcaster[T]) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	b.ready()
	b.lock() // publishers take mu from here, and see closed
	if b.shutDone != nil {
		done := b.shutDone
		b.unlock()
		return waitDone(ctx, done)
	}
	b.closed = true
	b.shutDone = make(chan struct{})
	close(b.closedCh) // publishers waiting for the turn give up

	// A publisher waiting for room may still commit; when ctx ends it gives
	// up (abort) and commits, dropping its value where there is no room.
	err := b.waitPublisherLocked(ctx)

	// No publisher is active and none will be: the ring is frozen. Every
	// watcher ends: readers take what is queued, then stop.
	var callbacks []*Watcher[T]
	for _, w := range b.watchers {
		w.mu.Lock()
		w.endLocked(ErrClosed)
		w.index = -1
		w.mu.Unlock()
		if w.ctxStop != nil {
			callbacks = append(callbacks, w)
		}
	}
	for w := range b.evictedCtx {
		callbacks = append(callbacks, w)
	}
	clear(b.evictedCtx)
	clear(b.watchers)
	b.watchers = nil
	b.nBlockFor.Store(0)
	b.unlock()
	b.wakeParked() // waiting readers see their watcher ended

	// No WithContext callback runs after Shutdown returns: unregister each,
	// or wait for one already running (it takes mu, so not before here).
	for _, w := range callbacks {
		if !w.ctxStop() {
			<-w.ctxAfter
		}
	}

	// Forwarders hand their queues to their readers, or drop them when
	// ctx ends (abort), then close their channels and exit.
	if err2 := b.waitForwarders(ctx, err == nil); err == nil {
		err = err2
	}
	// No watcher stays referenced from the parked list: starters leave
	// it, and a loop's waiter references none.
	b.wakeParked()
	close(b.shutDone)
	return err
}

// waitPublisherLocked waits, with mu held except while it blocks, until no
// publisher is waiting for room. If ctx ends first it aborts the wait and
// returns ctx.Err() once the publisher has given up.
func (b *Broadcaster[T]) waitPublisherLocked(ctx context.Context) error {
	var err error
	for b.busy {
		t := b.turnLocked()
		b.unlock()
		select {
		case <-t:
		case <-ctx.Done():
			err = ctx.Err()
			b.abortWaits()
			<-t
		}
		b.lock()
	}
	return err
}

// waitForwarders waits until every forwarder has exited. If ctx ends
// first, or already had (not patient: a publisher gave up), it aborts them;
// it returns ctx.Err() if it was patient and an aborted forwarder dropped
// values, nil otherwise.
func (b *Broadcaster[T]) waitForwarders(ctx context.Context, patient bool) error {
	drained := make(chan struct{})
	go func() {
		b.fwd.Wait()
		close(drained)
	}()
	if patient {
		select {
		case <-drained:
			return nil
		case <-ctx.Done():
		}
	}
	b.abortForwarders()
	<-drained
	if patient && b.abortLost.Load() {
		return ctx.Err()
	}
	return nil
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
