package broadcast

import (
	"context"
	"errors"
	"time"
)

// errWouldWait is the answer to TryPublish when publishing would wait.
var errWouldWait = errors.New("broadcast: would wait")

// The turn: only one publisher at a time waits for room, and it holds the
// turn (busy) from its first wait to its commit, so that commits stay in
// call order while mu is released. The others wait for the turn first.

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
		case <-b.closedCh:
		}
		b.mu.Lock()
	}
	if b.closed {
		return ErrClosed
	}
	return nil
}

// turnLocked returns the channel closed when the turn's holder commits.
// Called with mu held, while busy.
func (b *Broadcaster[T]) turnLocked() <-chan struct{} {
	if b.turn == nil {
		b.turn = make(chan struct{})
	}
	return b.turn
}

// waitRoomLocked returns once no Block or unexpired BlockFor watcher is full
// for s, with mu held except while it waits. Nothing of v is visible
// before the commit, except to a C() watcher that a wait sent it to. A
// wait cut short by ctx or Shutdown's deadline is returned as the error,
// and the commit then drops v for every watcher still full. For TryPublish
// it returns errWouldWait instead of waiting.
func (b *Broadcaster[T]) waitRoomLocked(ctx context.Context, s uint64, v T, try bool, start time.Time) error {
	for {
		w := b.fullWaiterLocked(s, start)
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

// fullWaiterLocked returns a Block or unexpired BlockFor watcher full for
// s, or nil. Called with mu held.
func (b *Broadcaster[T]) fullWaiterLocked(s uint64, start time.Time) *Watcher[T] {
	if s >= b.attn {
		for _, w := range b.readers {
			if w.policy.waits() && !expired(w.policy, start) && w.fullFor(s) {
				return w
			}
		}
	}
	for _, w := range b.chans {
		if w.policy.waits() && w.sentSeq != s && !expired(w.policy, start) && w.chanFullLocked() {
			return w
		}
	}
	return nil
}

// expired reports whether a BlockFor watcher has been waited for long
// enough.
func expired(p Policy, start time.Time) bool {
	return p.kind == kindBlockFor && time.Since(start) >= p.wait
}

// waitFor waits, with mu released, until full watcher w may have room, its
// BlockFor deadline passes, ctx ends or Shutdown's ctx ends (the error
// returned then). A C() watcher is waited for with v's send itself, which
// delivers v to it. Called with mu held and busy.
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
	case <-b.abort:
		err = ErrClosed
	}
	b.mu.Lock()
	if send != nil {
		b.endSendLocked(w, s, sent)
	}
	return err
}

// endSendLocked ends the wait that was sending to w's channel: it counts
// the send, and closes the channel if Stop left it open for the send.
// Called with mu held.
func (b *Broadcaster[T]) endSendLocked(w *Watcher[T], s uint64, sent bool) {
	b.sending = nil
	if sent {
		w.sent++
		w.sentSeq = s
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
