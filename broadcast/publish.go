package broadcast

import (
	"context"
	"errors"
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
// time, in order), nothing is published and ctx.Err() is returned. If ctx ends while v waits, v still goes to every
// watcher with room, is dropped (counted in Dropped) for each Block watcher
// that had none, as [BlockFor] would, and ctx.Err() is returned.
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

// slowBit is tailw's bit: watchers exist or Shutdown began.
const slowBit = 1

// seq returns the next sequence number: the count of values published.
func (b *Broadcaster[T]) seq() uint64 { return b.tailw.Load() >> 1 }

// publishIdle publishes when nobody watches: it only counts. It reports
// false if the broadcaster has watchers or is shut down.
func (b *Broadcaster[T]) publishIdle() bool {
	for {
		x := b.tailw.Load()
		if x&slowBit != 0 {
			return false
		}
		if b.tailw.CompareAndSwap(x, x+2) {
			return true
		}
	}
}

func (b *Broadcaster[T]) publish(ctx context.Context, v T, try bool) (bool, error) {
	if b.publishIdle() {
		return true, nil
	}
	var w8 waitState
	if b.nBlockFor.Load() > 0 {
		// BlockFor waits are measured from the call, also when this publish
		// first waits for its turn behind another one.
		w8.start = time.Now()
	}
	if err := b.lockTurn(ctx, try); err != nil {
		if err == errWouldWait {
			err = nil
		}
		return false, err
	}
	if b.tailw.Load()&slowBit == 0 {
		// The last watcher left meanwhile.
		b.mu.Unlock()
		if b.publishIdle() {
			return true, nil
		}
		return b.publish(ctx, v, try)
	}
	s := b.seq()
	if !w8.start.IsZero() {
		w8.now = time.Now()
	}
	ok, result := b.waitForRoom(ctx, v, s, try, &w8)
	if !ok {
		return false, nil // TryPublish would have waited; mu is released
	}
	b.commit(s, v, &w8)
	b.mu.Unlock()
	w8.stop()
	b.wakeParked()
	return true, result
}

// errWouldWait is lockTurn's answer to TryPublish when it would wait.
var errWouldWait = errors.New("broadcast: would wait")

// lockTurn locks b.mu once no other publisher holds the turn: only one
// publisher waits at a time, so the order of commits is the order every
// watcher sees. It returns with b.mu held, or with an error (ErrClosed,
// ctx.Err(), or errWouldWait for TryPublish) and b.mu released.
func (b *Broadcaster[T]) lockTurn(ctx context.Context, try bool) error {
	b.mu.Lock()
	for b.busy {
		if b.closed {
			b.mu.Unlock()
			return ErrClosed
		}
		if try {
			b.mu.Unlock()
			return errWouldWait
		}
		if b.turn == nil {
			b.turn = make(chan struct{})
		}
		t := b.turn
		b.mu.Unlock()
		select {
		case <-t:
		case <-ctx.Done():
			return ctx.Err()
		case <-b.closedCh:
			return ErrClosed
		}
		b.mu.Lock()
	}
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// waitForRoom is phase 1, before the commit of v as seq s: a full Block
// watcher gets nothing until it has room, so v stays invisible while the
// publisher waits (holding the turn: busy). Called and returning with b.mu
// held, except for TryPublish when it would wait: then it returns false
// with b.mu released. result is the error that cut a wait short (ctx, or
// Shutdown's deadline); the commit then drops v where there is no room.
func (b *Broadcaster[T]) waitForRoom(ctx context.Context, v T, s uint64, try bool, w8 *waitState) (ok bool, result error) {
	for spins := 0; ; {
		full, deadline := b.fullBlockers(s, w8)
		direct := b.direct
		if !full && len(direct) == 0 {
			return true, result
		}
		if try {
			clear(direct)
			b.direct = direct[:0]
			b.mu.Unlock()
			return false, nil
		}
		b.busy = true
		b.mu.Unlock()
		if full {
			clear(direct)
			b.direct = direct[:0]
			if spins < publisherSpins {
				// Readers usually make room within a scheduling round;
				// yielding is much cheaper than parking on roomCh.
				spins++
				runtime.Gosched()
				b.mu.Lock()
				continue
			}
			stop, err := w8.wait(ctx, b.roomCh, b.abort, deadline)
			b.mu.Lock()
			if stop {
				w8.giveUp = true
				result = err
			}
			continue
		}
		// Every full watcher left holds its whole queue in its channel:
		// hand v to each directly, which waits for its reader (see
		// sendDirect). b.direct is ours while busy.
		for _, w := range direct {
			if err := w.sendDirect(ctx, v, s, w8); err != nil && result == nil {
				result = err
			}
		}
		clear(direct)
		b.mu.Lock()
		b.direct = direct[:0]
	}
}

// commit is phase 2: v becomes seq s. Watchers at or past their attention
// bound are visited first; the tail store publishes the slot (readers load
// the tail before they read slots up to it). Called with b.mu held.
func (b *Broadcaster[T]) commit(s uint64, v T, w8 *waitState) {
	if s >= b.attn {
		b.attend(s, w8)
	}
	if r := b.ring.Load(); r != nil {
		r.buf[s&r.mask] = v
	}
	bit := uint64(slowBit)
	if b.nWatchers == 0 && !b.closed && b.cfg.history == 0 {
		bit = 0 // the last watcher left while we waited (see remove)
	}
	b.tailw.Store((s+1)<<1 | bit)
	if b.busy {
		b.busy = false
		if b.turn != nil {
			close(b.turn)
			b.turn = nil
		}
	}
}

// waitState is a publisher's view of its own waiting: when it started (for
// BlockFor), whether it gave up (ctx ended or Shutdown aborted), and a timer
// reused across waits. It lives on the publisher's stack.
type waitState struct {
	start  time.Time
	now    time.Time
	giveUp bool
	timer  *time.Timer
}

func (ws *waitState) stop() {
	if ws.timer != nil {
		ws.timer.Stop()
	}
}

// expired reports whether a BlockFor watcher with policy p has been waited
// for long enough. Watchers only count as expired once waiting has started.
func (ws *waitState) expired(p Policy) bool {
	if ws.giveUp {
		return true
	}
	return p.kind == kindBlockFor && !ws.start.IsZero() && ws.now.Sub(ws.start) >= p.wait
}

func (ws *waitState) deadline(p Policy) time.Time {
	if p.kind != kindBlockFor {
		return time.Time{}
	}
	return ws.start.Add(p.wait)
}

// wait blocks until a consumer makes room (roomCh), the earliest BlockFor
// deadline passes, ctx ends or Shutdown aborts. It reports whether the
// publisher must give up and with which error.
func (ws *waitState) wait(ctx context.Context, room, abort <-chan struct{}, deadline time.Time) (bool, error) {
	var tc <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if ws.timer == nil {
			ws.timer = time.NewTimer(d)
		} else {
			ws.timer.Reset(d)
		}
		tc = ws.timer.C
	}
	var give bool
	var err error
	select {
	case <-room:
	case <-tc:
	case <-ctx.Done():
		give, err = true, ctx.Err()
	case <-abort:
		give, err = true, ErrClosed
	}
	if ws.timer != nil {
		ws.timer.Stop()
	}
	ws.now = time.Now()
	return give, err
}

// sendDirect sends seq s, v, to w, which holds its whole queue in its
// channel, waiting for its reader to make room, unless w is stopped, its
// BlockFor deadline passes, ctx ends or Shutdown aborts; then v is left for
// the commit, which drops it for w (counted) if w is still full. On success
// w's cursor moves past s, so the commit does not queue v again. Called by
// the publisher holding the turn, without locks: no value can be committed
// meanwhile, and w's forwarder has nothing to send, so only we send to ch.
func (w *Watcher[T]) sendDirect(ctx context.Context, v T, s uint64, ws *waitState) error {
	w.mu.Lock()
	if w.chClosed || w.stopped.Load() || ws.giveUp || ws.expired(w.policy) {
		w.mu.Unlock()
		return nil
	}
	w.directSending = true
	ch, stop := w.ch, w.stopCh
	w.mu.Unlock()

	var tc <-chan time.Time
	if d := ws.deadline(w.policy); !d.IsZero() {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		tc = t.C
	}
	sent := false
	var err error
	select {
	case ch <- v:
		sent = true
	case <-stop:
	case <-tc:
	case <-ctx.Done():
		err = ctx.Err()
		ws.giveUp = true
	case <-w.b.abort:
		err = ErrClosed
		ws.giveUp = true
	}
	ws.now = time.Now()

	w.mu.Lock()
	w.directSending = false
	if sent {
		w.npClaimed.Add(1)
		w.h.Store(s + 1)
	}
	w.sendResolvedLocked()
	w.mu.Unlock()
	return err
}
