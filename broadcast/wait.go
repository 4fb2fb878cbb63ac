package broadcast

import (
	"context"
	"errors"
	"time"
)

// errWouldWait is the answer to TryPublish when publishing would wait.
var errWouldWait = errors.New("broadcast: would wait")

// The turn: only one publisher at a time waits for room, and it holds the
// turn (busy) from its first wait to the end of its Publish, so that values
// stay in call order while mu is released. The others wait for the turn.

// takeTurnLocked returns, with mu held, once no other publisher holds the
// turn: nil, or ErrClosed, ctx.Err(), or errWouldWait for TryPublish.
func (b *Broadcaster[T]) takeTurnLocked(ctx context.Context, try bool) error {
	for b.busy && !b.closed {
		if try {
			return errWouldWait
		}
		t := b.turnLocked()
		b.mu.Unlock()
		select {
		case <-t:
		case <-ctx.Done():
			b.mu.Lock()
			return ctx.Err()
		}
		b.mu.Lock()
	}
	if b.closed {
		return ErrClosed
	}
	return nil
}

// turnLocked returns the channel closed when the turn ends (mu held, busy).
func (b *Broadcaster[T]) turnLocked() <-chan struct{} {
	if b.turn == nil {
		b.turn = make(chan struct{})
	}
	return b.turn
}

// abortLocked returns the channel closed when Shutdown's ctx ends (mu held).
func (b *Broadcaster[T]) abortLocked() chan struct{} {
	if b.abort == nil {
		b.abort = make(chan struct{})
	}
	return b.abort
}

// waitRoomLocked returns once no Block or unexpired BlockFor ring reader
// is full for s, with mu held except while it waits (channel watchers are
// waited for after the commit: payLocked). A wait cut short by ctx or
// Shutdown's deadline is returned as the error; v is then dropped for
// every watcher still full. For TryPublish it returns errWouldWait instead
// of waiting, for a full channel watcher too (then the commit owes none).
func (b *Broadcaster[T]) waitRoomLocked(ctx context.Context, s uint64, v T, try bool, start time.Time) error {
	for {
		w := b.fullWaiterLocked(s, start, try)
		if w == nil {
			return nil
		}
		if try {
			return errWouldWait
		}
		b.busy = true
		if err := b.waitFor(ctx, w, s, v, start); err != nil {
			return err
		}
	}
}

// fullWaiterLocked returns a Block or unexpired BlockFor ring reader full
// for s, or, if chans, such a channel watcher, or nil. Called with mu held.
func (b *Broadcaster[T]) fullWaiterLocked(s uint64, start time.Time, chans bool) *Watcher[T] {
	if s >= b.attn {
		for _, w := range b.readers {
			if w.policy.waits() && !expired(w.policy, start) && w.fullFor(s) {
				return w
			}
		}
	}
	for i := 0; chans && i < len(b.chans); i++ {
		if w := b.chans[i]; w.policy.waits() && !expired(w.policy, start) && len(w.ch) == cap(w.ch) {
			return w
		}
	}
	return nil
}

// payLocked sends v, committed as s, to the full channel watchers the
// commit owed it to, waiting for each with the turn held, so that no later
// value overtakes it; it drops v (counted) for one whose BlockFor wait
// expired, and for every one left once a wait was cut short (err, which it
// returns). It looks for them again after each wait: Stop may reorder
// b.chans meanwhile. Waiting after the commit keeps a scan of every
// channel off each Publish (docs/design.md). Called with mu held and busy.
func (b *Broadcaster[T]) payLocked(ctx context.Context, s uint64, v T, start time.Time, err error) error {
	for w := b.owedLocked(); w != nil; w = b.owedLocked() {
		switch {
		case w.trySendLocked(v):
			w.owed = false
		case err != nil || expired(w.policy, start):
			w.owed = false
			w.drop()
		default:
			err = b.waitFor(ctx, w, s, v, start) // mu released meanwhile
		}
	}
	return err
}

// owedLocked returns a channel watcher still owed the value, or nil.
func (b *Broadcaster[T]) owedLocked() *Watcher[T] {
	for _, w := range b.chans {
		if w.owed {
			return w
		}
	}
	return nil
}

// expired reports whether a BlockFor watcher was waited for long enough.
func expired(p Policy, start time.Time) bool {
	return p.kind == kindBlockFor && time.Since(start) >= p.wait
}

// waitFor waits, with mu released, until full watcher w may have room, its
// BlockFor deadline passes, or ctx or Shutdown's ctx ends (the error then);
// for a C() watcher, by sending v. Called with mu held and busy.
func (b *Broadcaster[T]) waitFor(ctx context.Context, w *Watcher[T], s uint64, v T, start time.Time) error {
	var timeout <-chan time.Time
	if w.policy.kind == kindBlockFor {
		t := time.NewTimer(time.Until(start.Add(w.policy.wait)))
		defer t.Stop()
		timeout = t.C
	}
	var send chan<- T // nil: no send
	if w.ch != nil {
		send, b.sending = w.ch, w // w's channel has no other sender: Stop leaves it open
	} else {
		// The reader takes, then loads roomWanted (took); this stores
		// roomWanted, then looks at what the reader took (fullFor): either
		// this sees the room or the reader signals it.
		w.roomWanted.Store(true)
		if !w.fullFor(s) {
			w.roomWanted.Store(false)
			return nil
		}
	}
	abort := b.abortLocked()
	b.mu.Unlock()
	var err error
	sent := false
	select {
	case send <- v:
		sent = true
	case <-w.room: // a reader took a value, or w stopped or changed to C()
	case <-timeout:
	case <-ctx.Done():
		err = ctx.Err()
	case <-abort:
		err = ErrClosed
	}
	b.mu.Lock()
	if send != nil {
		b.endSendLocked(w, sent)
	}
	return err
}

// endSendLocked ends a wait that was sending to w's channel, with mu held:
// it counts the send, and closes the channel if Stop left it open for it.
func (b *Broadcaster[T]) endSendLocked(w *Watcher[T], sent bool) {
	b.sending = nil
	if sent {
		w.sent++
		w.owed = false
	}
	if w.isStopped() {
		w.discardLocked()
		w.closeChLocked()
	}
	if b.sendEnd != nil {
		close(b.sendEnd)
		b.sendEnd = nil
	}
}
