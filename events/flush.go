package events

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// ErrLost is wrapped by the error that [Broadcaster.Flush] and
// [Broadcaster.Shutdown] return when events were lost: see [LostError].
var ErrLost = errors.New("events: events lost")

// LostError is what [Broadcaster.Flush] and [Broadcaster.Shutdown] return,
// once they have done their work, when events were lost since the previous
// LostError that b returned (or since NewBroadcaster): the losses of
// [Stats] in that time. errors.Is(err, ErrLost) reports it; errors.As
// gives the counts. Each loss is reported once, to one caller. Events the
// spam filter skipped or folded into an aggregate are not losses.
type LostError struct {
	Invalid   uint64 // not recorded: invalid (see Event.Validate)
	Dropped   uint64 // a queue was full, or recorded after Shutdown began
	Failed    uint64 // not stored: rejected, out of tries, a panic, discarded by Stop
	Abandoned uint64 // not written when a Shutdown's ctx ended
}

func (e *LostError) Error() string {
	return fmt.Sprintf("events: events lost: %d invalid, %d dropped, %d failed, %d abandoned (see Stats and the logged reports)",
		e.Invalid, e.Dropped, e.Failed, e.Abandoned)
}

// Unwrap returns ErrLost.
func (e *LostError) Unwrap() error { return ErrLost }

// lossReport remembers the losses already returned in a LostError.
type lossReport struct {
	mu   sync.Mutex
	done LostError
}

// lost returns a LostError with the losses of st not yet returned, or nil.
func (b *Broadcaster) lost(st Stats) error {
	l := &b.losses
	l.mu.Lock()
	defer l.mu.Unlock()
	e := &LostError{
		Invalid:   st.Invalid - l.done.Invalid,
		Dropped:   st.Dropped - l.done.Dropped,
		Failed:    st.Failed - l.done.Failed,
		Abandoned: st.Abandoned - l.done.Abandoned,
	}
	if *e == (LostError{}) {
		return nil
	}
	l.done = LostError{st.Invalid, st.Dropped, st.Failed, st.Abandoned}
	return e
}

// Flush waits until every event recorded before it (accepted by a
// Recorder whose call returned before Flush was called) has been written,
// skipped, or given up by every sink started and not stopped, and handled
// by every watcher, then returns nil, or a [LostError] if events were lost
// since the last one b returned (see [LostError]). If ctx ends first it
// returns ctx.Err(). It stops nothing and holds up no Recorder: events
// recorded meanwhile are queued and written as usual. Once Shutdown has
// begun it returns at once (nil, or a LostError); Shutdown does the
// flushing then. A sink that is retrying an event holds Flush up until the
// event is written or given up (see [WithRetry]); a nil ctx means
// context.Background(). Calling Flush from a handler or sink waits for
// that handler or sink itself: it returns when ctx ends.
func (b *Broadcaster) Flush(ctx context.Context) error {
	b.mustBeMade("Flush")
	if ctx == nil {
		ctx = context.Background()
	}
	if b.closed.Load() {
		return b.lost(b.Stats())
	}
	// Under pubMu no event is being published: each worker's count of
	// the events published to it, less those its watcher dropped, is the
	// number of events it will take that were recorded before this call.
	type wait struct {
		wk   *worker
		upTo uint64
	}
	var waits []wait
	b.pubMu.Lock()
	rec := b.recorded.Load()
	for _, wk := range *b.live.Load() {
		if wk.stopped.Load() {
			continue
		}
		waits = append(waits, wait{wk, rec - wk.recordedAtStart - wk.w.Dropped()})
	}
	b.pubMu.Unlock()
	for _, w := range waits {
		var done <-chan struct{}
		if w.wk.conc != nil {
			done = w.wk.conc.await(w.upTo)
		} else {
			done = w.wk.flush.await(&w.wk.finished, w.upTo)
		}
		select {
		case <-done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return b.lost(b.Stats())
}

// flushWaiters are the Flush calls waiting for a worker that finishes its
// events in order (see worker.finished).
type flushWaiters struct {
	// want is the least count that a waiter waits for (MaxUint64 if none,
	// or 0 before the first await), read by the worker after each event.
	want atomic.Uint64
	mu   sync.Mutex
	ws   []flushWaiter
	gone bool // released for good: the worker stopped or exited
}

type flushWaiter struct {
	upTo uint64
	done chan struct{}
}

// await returns a channel closed once finished reaches upTo.
func (f *flushWaiters) await(finished *atomic.Uint64, upTo uint64) <-chan struct{} {
	done := make(chan struct{})
	f.mu.Lock()
	if f.gone {
		f.mu.Unlock()
		close(done)
		return done
	}
	f.ws = append(f.ws, flushWaiter{upTo, done})
	f.setWantLocked()
	f.mu.Unlock()
	// The worker reads want after each count: if it counted before want
	// was set, it did not look, and this does.
	f.release(finished.Load())
	return done
}

func (f *flushWaiters) setWantLocked() {
	want := uint64(math.MaxUint64)
	for _, w := range f.ws {
		want = min(want, w.upTo)
	}
	f.want.Store(want)
}

// release closes the waiters whose count finished has reached.
func (f *flushWaiters) release(finished uint64) {
	f.mu.Lock()
	kept := f.ws[:0]
	for _, w := range f.ws {
		if w.upTo <= finished {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	clear(f.ws[len(kept):])
	f.ws = kept
	f.setWantLocked()
	f.mu.Unlock()
}

// releaseAll closes every waiter, now and from now on.
func (f *flushWaiters) releaseAll() {
	f.mu.Lock()
	f.gone = true
	for _, w := range f.ws {
		close(w.done)
	}
	f.ws = nil
	f.want.Store(math.MaxUint64)
	f.mu.Unlock()
}
