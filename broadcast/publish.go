package broadcast

import (
	"context"
	"math"
	"runtime"
	"time"
)

// Publish sends v to every watcher. It returns once v is queued for every
// watcher (or dropped for it, as its policy says); it waits only for full
// [Block] or [BlockFor] watchers. It returns [ErrClosed] once Shutdown has
// begun; a Publish that was waiting when Shutdown's ctx ended returns
// ErrClosed too, and v is then dropped (counted) for the watchers it had not
// reached.
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

// publish is the publish path. Its concepts (docs/design.md): the ring and
// its tail, each watcher's queue, the attention bound, the policies, the
// turn with its room signal, and the parked readers.
func (b *Broadcaster[T]) publish(ctx context.Context, v T, try bool) (bool, error) {
	for {
		x := b.tailw.Load()
		if x&watchedBit == 0 {
			// Nobody watches: no lock (idlePublish).
			if b.idlePublish(x, v) {
				return true, nil
			}
			continue
		}
		if x&(gateBit|writingBit) == 0 {
			// The gate is open: below the attention bound, no lock.
			if ok, done := b.fastPublish(x, v); ok {
				b.wakeParked()
				return true, nil
			} else if !done {
				continue
			}
		}
		var ws waitState
		if b.nBlockFor.Load() > 0 {
			ws.start = time.Now() // BlockFor waits count from the call
		}
		if err := b.lockTurn(ctx, try); err != nil {
			if err == errWouldWait {
				err = nil
			}
			return false, err
		}
		s := b.tail() + 1
		ok, err := b.waitForRoom(ctx, s, try, &ws)
		if !ok {
			b.unlock()
			return false, nil
		}
		b.commit(s, v)
		b.unlockAt(s) // stores the tail
		ws.stop()
		// After the tail store: a reader parks before it looks at the tail,
		// so either it sees s or this finds it parked.
		b.wakeParked()
		return true, err
	}
}

// turnLocked returns the channel closed when the publisher holding the
// turn commits (or gives up). Called with mu held, while busy.
func (b *Broadcaster[T]) turnLocked() <-chan struct{} {
	if b.turn == nil {
		b.turn = make(chan struct{})
	}
	return b.turn
}

// fastPublish commits v without mu, given the tail word x it loaded with
// the gate open, if the next sequence number s is below the attention
// bound: no watcher needs a visit, nobody waits for room, so the commit is
// the slot and the tail. The CAS that takes writingBit fails if the tail
// word moved; once it holds, mu's holder cannot close the gate until the
// store, and attnA is read again: the gate may have closed and opened
// since x was loaded (the same word, attn lower). With today's watchers
// that second look cannot turn a commit away (a watcher registered
// meanwhile has its bound at tail+2 or later); it keeps the commit right
// without relying on that. It reports ok when v is
// committed, and done when the caller must take mu instead (s is at the
// bound); neither, when it must look again.
func (b *Broadcaster[T]) fastPublish(x uint64, v T) (ok, done bool) {
	s := x>>seqShift + 1
	if s >= b.attnA.Load() {
		return false, true
	}
	if !b.tailw.CompareAndSwap(x, x|writingBit) {
		return false, false
	}
	if s >= b.attnA.Load() {
		b.tailw.Store(x)
		return false, true
	}
	r := b.ring.Load()
	r.buf[s&r.mask] = v
	// The tail store publishes the slot, as in commit.
	b.tailw.Store(s<<seqShift | watchedBit)
	return true, true
}

// idlePublish publishes v while nobody watches, given the tail word x it
// loaded: without history it only counts (a CAS); with history it takes
// writingBit with that CAS, writes the slot and stores the new tail, which
// releases it. watchedBit is set under mu, after any such write, before a
// watcher reads the tail (lock closes the gate), so the CAS fails if one
// registers.
// It reports false if the caller must look again.
func (b *Broadcaster[T]) idlePublish(x uint64, v T) bool {
	if b.cfg.history == 0 {
		return b.tailw.CompareAndSwap(x, x+1<<seqShift)
	}
	if x&writingBit != 0 {
		runtime.Gosched() // another idle publish is writing
		return false
	}
	if !b.tailw.CompareAndSwap(x, x|writingBit) {
		return false
	}
	s := x>>seqShift + 1
	r := b.ring.Load()
	r.buf[s&r.mask] = v
	b.tailw.Store(s << seqShift)
	return true
}

// lockTurn locks mu once no other publisher is waiting for room: only the
// publisher that holds the turn may wait, so commits stay in call order.
// It returns with mu held, or with an error and mu released: ErrClosed,
// ctx.Err(), or errWouldWait for TryPublish.
func (b *Broadcaster[T]) lockTurn(ctx context.Context, try bool) error {
	b.lock()
	for b.busy && !b.closed {
		if try {
			b.unlock()
			return errWouldWait
		}
		t := b.turnLocked()
		b.unlock()
		select {
		case <-t:
		case <-ctx.Done():
			return ctx.Err()
		case <-b.closedCh:
			return ErrClosed
		}
		b.lock()
	}
	if b.closed {
		b.unlock()
		return ErrClosed
	}
	return nil
}

// waitForRoom returns once no Block or unexpired BlockFor watcher is full
// for sequence number s, with mu held throughout the checks and released
// only while waiting. Meanwhile v is invisible: nothing is written before
// the commit. It reports false for TryPublish when it would wait. A wait
// cut short by ctx or Shutdown's deadline is reported as err; the commit
// then drops v for the watchers still full.
func (b *Broadcaster[T]) waitForRoom(ctx context.Context, s uint64, try bool, ws *waitState) (bool, error) {
	var err error
	if !ws.start.IsZero() {
		ws.now = time.Now() // a wait for the turn counts against BlockFor
	}
	for spins := 0; ; spins++ {
		full, deadline := b.fullWaiters(s, ws)
		if !full {
			return true, err
		}
		if try {
			return false, nil
		}
		// The turn: publishers arriving now wait in lockTurn, and the tail
		// cannot move, so s stays ours.
		b.busy = true
		b.unlock() // busy: the gate stays closed
		stop, e := ws.wait(ctx, b.room, b.abort, deadline, spins)
		b.lock()
		if stop {
			ws.giveUp, err = true, e
		}
	}
}

// fullWaiters reports whether a Block or unexpired BlockFor watcher is full
// for s, and the earliest BlockFor deadline among them. It asks each such
// watcher's readers to signal room (roomWanted) before it checks, so that a
// value taken after the check is signaled: the reader takes, then loads
// roomWanted; this stores roomWanted, then loads what the reader took.
func (b *Broadcaster[T]) fullWaiters(s uint64, ws *waitState) (bool, time.Time) {
	if s < b.attn {
		return false, time.Time{}
	}
	full := false
	var deadline time.Time
	R := b.ring.Load().size()
	for _, w := range b.watchers {
		if !w.policy.waits() || w.attnSeq(R) > s {
			continue
		}
		w.roomWanted.Store(true)
		if !w.full(s) || ws.expired(w.policy) {
			w.roomWanted.Store(false)
			continue
		}
		full = true
		if ws.start.IsZero() {
			ws.start = time.Now()
		}
		if d := ws.deadline(w.policy); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
			deadline = d
		}
	}
	return full, deadline
}

// commit writes v as sequence number s; the caller publishes it with
// unlockAt(s). Called with mu held, after waitForRoom.
//
// A slot is never overwritten while a reader copies it: readers copy under
// their watcher's mutex and only from their segment [next, tail]; the
// publisher of s overwrites the slot of s-R (R the ring size) only once
// every watcher's next is past s-R. A watcher whose next is not is visited
// (attend), under its mutex, before the write, and its segment is moved to
// its own queue. b.attn is a lower bound of the first s that needs such a
// visit for any watcher (attnSeq); readers only raise a watcher's bound, so
// between visits no watcher needs one.
func (b *Broadcaster[T]) commit(s uint64, v T) {
	r := b.ring.Load()
	if s >= b.attn {
		b.attend(s, r)
	}
	if r != nil {
		r.buf[s&r.mask] = v
	}
	// The caller's unlockAt(s) stores the tail, which publishes the slot:
	// a reader loads the tail before it reads slots up to it.
	if b.busy {
		b.busy = false
		if b.turn != nil {
			close(b.turn)
			b.turn = nil
		}
	}
}

// attend visits every watcher whose bound is s or less: full ones get
// their policy applied, those about to be lapped get their segment moved
// to their own queue. It recomputes b.attn. Called with mu held.
func (b *Broadcaster[T]) attend(s uint64, r *ring[T]) {
	R := r.size()
	next := uint64(math.MaxUint64)
	for i := 0; i < len(b.watchers); i++ {
		w := b.watchers[i]
		if w.attnSeq(R) <= s {
			w.mu.Lock()
			evicted := w.attendLocked(s, r)
			w.mu.Unlock()
			if evicted {
				// A WithContext callback stays: when ctx ends it stops w,
				// which releases a forwarder blocked on a reader gone.
				// Shutdown still finds it there.
				if w.ctxStop != nil {
					b.evictedCtx[w] = struct{}{}
				}
				b.remove(w)
				i--
				continue
			}
		}
		next = min(next, w.attnSeq(R))
	}
	b.attn = next
}
