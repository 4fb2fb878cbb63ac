package broadcast

import (
	"context"
	"math"
	"time"
)

// Publish sends v to every watcher. It returns once v is queued for every
// watcher (or dropped for it, as its policy says); it waits only for full
// [Block] or [BlockFor] watchers. It returns [ErrClosed] once Shutdown has
// begun; a Publish that was waiting when Shutdown's ctx ended returns ErrClosed
// too, and v is then dropped (counted) for the watchers it had not reached.
func (b *Broadcaster[T]) Publish(v T) error {
	_, err := b.publish(context.Background(), v, false)
	return err
}

// PublishContext is [Broadcaster.Publish] whose waits for full Block
// watchers end when ctx does. A ctx already done is reported first, also
// on a shut-down broadcaster. If ctx is already done, or ends while this
// call waits for another Publish to finish (values are committed one at a
// time, in order), nothing is published and ctx.Err() is returned. If ctx
// ends while v waits, v still goes to every watcher with room, is dropped
// (counted in Dropped) for each Block watcher that had none, as [BlockFor]
// would, and ctx.Err() is returned.
func (b *Broadcaster[T]) PublishContext(ctx context.Context, v T) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.publish(ctx, v, false)
	return err
}

// TryPublish publishes v only if that needs no waiting: it returns
// (false, nil) without publishing when a [Block] or [BlockFor] watcher is
// full or another publisher is waiting, (false, ErrClosed) once Shutdown
// has begun, and (true, nil) when v was published. It never blocks.
func (b *Broadcaster[T]) TryPublish(v T) (bool, error) {
	return b.publish(context.Background(), v, true)
}

// publish is the publish path (docs/design.md lists what it relies on):
// all under mu, released only while the turn's holder waits for room.
func (b *Broadcaster[T]) publish(ctx context.Context, v T, try bool) (bool, error) {
	var start time.Time
	b.mu.Lock()
	if b.nBlockFor > 0 {
		start = time.Now() // BlockFor waits count from the call
	}
	// Each call below is skipped when its first check would find nothing
	// to do (30 → 25 ns with no watchers: docs/design.md, "Publish").
	if b.busy || b.closed {
		if err := b.takeTurnLocked(ctx, try); err != nil {
			b.mu.Unlock()
			if err == errWouldWait {
				return false, nil
			}
			return false, err
		}
	}
	s := b.tail.Load() + 1 // ours: the tail moves only under mu, and others wait for the turn
	var err error
	if s >= b.attn || (try && len(b.chans) > 0) {
		err = b.waitRoomLocked(ctx, s, v, try, start)
		if err == errWouldWait {
			b.mu.Unlock()
			return false, nil
		}
	}
	owes := b.commitLocked(s, v)
	woken := b.parked
	b.parked = nil
	if owes {
		wakeAll(woken) // the ring's readers need not wait for a C() watcher
		woken = nil
		b.busy = true
		err = b.payLocked(ctx, s, v, start, err)
	}
	b.endTurnLocked()
	b.mu.Unlock()
	wakeAll(woken)
	return true, err
}

// endTurnLocked releases the turn if this publisher held it, with mu held.
func (b *Broadcaster[T]) endTurnLocked() {
	if b.busy {
		b.busy = false
		b.wakeTurnLocked()
	}
}

// wakeTurnLocked wakes whoever waits for the turn to end (mu held).
func (b *Broadcaster[T]) wakeTurnLocked() {
	if b.turn != nil {
		close(b.turn)
		b.turn = nil
	}
}

// commitLocked makes v the value with sequence number s for every watcher,
// under each one's policy; the caller wakes the read loops waiting for it.
// It reports whether a full channel watcher is owed v (payLocked). Called
// with mu held, after waitRoomLocked.
func (b *Broadcaster[T]) commitLocked(s uint64, v T) (owes bool) {
	r := b.ring.Load()
	if s >= b.attn {
		b.attend(s, r)
	}
	if r != nil && (len(b.readers) > 0 || b.cfg.history > 0) {
		r.buf[s&r.mask] = v
	}
	// The tail store publishes the slot: a reader loads the tail before it
	// copies slots up to it.
	b.tail.Store(s)
	for i := 0; i < len(b.chans); {
		w := b.chans[i]
		if !w.sendLocked(v) {
			b.evictedLocked(w) // moves the last watcher to i
			continue
		}
		owes = owes || w.owed
		i++
	}
	return owes
}

// attend visits, with mu held, every reader whose attention bound is s or less
// (attnSeqLocked): a full one gets its policy applied, one the ring is about to
// lap gets its segment moved to its own queue; b.attn is recomputed. So a slot
// is never overwritten while a reader copies it: readers copy under their
// watcher's mutex and only from [next, tail]; the commit of s overwrites the
// slot of s-R (R the ring size) only once every reader's next is past s-R, or
// after moving that reader's segment out of the ring under its mutex. Readers
// only raise a watcher's bound, so between visits no reader needs one.
func (b *Broadcaster[T]) attend(s uint64, r *ring[T]) {
	R := r.size()
	next := uint64(math.MaxUint64)
	for i := 0; i < len(b.readers); {
		w := b.readers[i]
		w.mu.Lock()
		if w.attnSeqLocked(R) <= s && w.attendLocked(s, r) {
			w.mu.Unlock()
			b.evictedLocked(w) // moves the last reader to i
			continue
		}
		next = min(next, w.attnSeqLocked(R))
		w.mu.Unlock()
		i++
	}
	b.attn = next
}

// wakeAll wakes the parked read loops of list (b.parked, taken whole under
// mu), after mu is released so that they do not park again behind it
// (docs/design.md). A loop is on one list at a time, signalled once by
// whoever took it off; next is read before the signal.
func wakeAll[T any](list *waiter[T]) {
	for n := list; n != nil; {
		next := n.next
		n.signal()
		n = next
	}
}

// wakeWatcherLocked wakes the read loops of w parked: w changed (Stop, an
// end, C()). Called with mu held.
func (b *Broadcaster[T]) wakeWatcherLocked(w *Watcher[T]) {
	p := &b.parked
	for n := *p; n != nil; n = *p {
		if n.w == w {
			*p = n.next
			n.signal()
		} else {
			p = &n.next
		}
	}
}
