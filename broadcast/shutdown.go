package broadcast

import "context"

// Shutdown stops the broadcaster. From its start, Publish, PublishContext,
// TryPublish, Watch and WatchWithPrefix return [ErrClosed]. A Publish still
// waiting for a full Block watcher may finish until ctx ends; then it gives
// up (its value is dropped, counted, for the watchers it had not reached).
// Every value whose Publish returned nil is then delivered: a watcher read
// through All() keeps it readable, and its loop ends after the last one; a
// watcher read through C() gets it in its channel, which is then closed.
// A C() channel buffers at most [ChannelBuffer] values, so Shutdown waits
// for C() readers to take the rest of their queues; if ctx ends first, the
// channels keep what they hold and the rest is dropped (counted in
// Dropped). Shutdown returns nil, or ctx.Err() if ctx ended first; either
// way every watcher is closed and every goroutine of the broadcaster has
// exited. Calls after the first wait for it to finish and return nil (or
// their own ctx.Err()). Shutdown(nil) returns an error and does nothing.
func (b *Broadcaster[T]) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	b.ready()
	b.mu.Lock()
	if b.shutting {
		done := b.shutDone
		b.mu.Unlock()
		return waitDone(ctx, done)
	}
	b.shutting, b.closed = true, true
	b.tailw.Or(slowBit)
	b.shutDone = make(chan struct{})
	close(b.closedCh)
	err := b.waitPublisherLocked(ctx)
	handing, ctxWatchers := b.endWatchersLocked()
	b.mu.Unlock()

	// WithContext watchers: no callback may run after Shutdown returns, so
	// unregister each, or wait for the one already running.
	for _, w := range ctxWatchers {
		if !w.ctxStop() {
			<-w.ctxAfter
		}
	}

	// From here no forwarder is started by a publisher's wake-up: end took
	// charge of every C() channel (closed it, or made sure a forwarder
	// drains it). Wait for the forwarders to hand their values to readers,
	// or for ctx: then they drop what is left (counted), close and exit.
	b.clearParked()
	if err == nil && handing {
		err = b.waitForwarders(ctx)
	} else {
		// Nothing left to hand over (or already aborted): the forwarders
		// of closed channels exit at once.
		b.fwd.Wait()
	}

	b.mu.Lock()
	close(b.shutDone)
	b.mu.Unlock()
	return err
}

// waitDone waits for done, or for ctx; done first if both are.
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

// waitPublisherLocked waits, with b.mu held except while it blocks, until
// no publisher holds the turn. If ctx ends first it aborts that publisher's
// wait, waits for it to give up, and returns ctx.Err().
func (b *Broadcaster[T]) waitPublisherLocked(ctx context.Context) error {
	var err error
	for b.busy {
		if b.turn == nil {
			b.turn = make(chan struct{})
		}
		t := b.turn
		b.mu.Unlock()
		if err == nil {
			select {
			case <-t:
			case <-ctx.Done():
				err = ctx.Err()
				b.abortWaits()
				<-t
			}
		} else {
			<-t
		}
		b.mu.Lock()
	}
	return err
}

// endWatchersLocked ends and unregisters every watcher. It reports whether
// a C() forwarder still has values to hand over, and returns the watchers
// bound to a context. Called with b.mu held, no publisher active.
func (b *Broadcaster[T]) endWatchersLocked() (handing bool, ctxWatchers []*Watcher[T]) {
	for _, w := range b.watchers {
		w.mu.Lock()
		if w.end() {
			handing = true
		}
		if w.ctxStop != nil {
			ctxWatchers = append(ctxWatchers, w)
		}
		w.index = -1
		w.mu.Unlock()
	}
	clear(b.watchers)
	b.watchers, b.nWatchers = nil, 0
	b.nBlockFor.Store(0)
	return handing, ctxWatchers
}

// clearParked empties the parked list for good: every watcher has ended
// (its done channel is closed), nobody needs waking, and no forwarder may
// start from here.
func (b *Broadcaster[T]) clearParked() {
	b.pmu.Lock()
	b.noSpawn = true
	for _, w := range b.parked {
		w.parked = false
	}
	clear(b.parked)
	b.parked = nil
	b.nParked.Store(0)
	b.pmu.Unlock()
}

// waitForwarders waits for the forwarders to hand their queues over; if
// ctx ends first, it aborts them (they drop the rest, counted), waits for
// them to exit and returns ctx.Err().
func (b *Broadcaster[T]) waitForwarders(ctx context.Context) error {
	drained := make(chan struct{})
	go func() {
		b.fwd.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-drained: // it finished after all
		return nil
	default:
	}
	b.abortWaits()
	<-drained
	return ctx.Err()
}
