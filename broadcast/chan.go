package broadcast

import "math"

// ChannelBuffer was the bound on the values a watcher read through
// [Watcher.C] held beyond its queue.
//
// Deprecated: C()'s channel is the watcher's queue: it holds exactly the
// watcher's queue length of values (plus its prefix or replay), as All does,
// and this constant changes nothing.
const ChannelBuffer = 64

// C returns the watcher's channel: values in order; closed when the watcher
// ends (Stop, or Shutdown and eviction after the values it holds). Every
// call returns the same channel.
//
// The channel is the watcher's queue: from the first call on, publishers send
// to it, and it holds what the watcher holds read through All, under the same
// policy. Its capacity is the queue length plus what is left of a prefix or
// replay at the first call; the room of the prefix values read goes to live
// values. So a watcher read through C needs no goroutine, and after Shutdown or
// eviction every value it holds stays in the channel, which is then closed,
// whether or not anything read meanwhile. The first call allocates it.
//
// One difference from All: a full [DropOldest] watcher whose prefix or
// replay is not all received yet drops the new value (counted), as [Drop]
// would, because the oldest value that counts sits behind the prefix in
// the channel, and a reader may receive at any time; once the prefix is
// received it discards the oldest value, as through All.
func (w *Watcher[T]) C() <-chan T {
	b := w.made()
	b.mu.Lock()
	defer b.mu.Unlock()
	w.mu.Lock()
	if w.ch == nil {
		w.makeChanLocked()
	}
	ch := w.ch
	w.mu.Unlock()
	b.wakeWatcherLocked(w) // its All loops read the channel from now on
	w.signalRoom()         // a publisher waiting for w looks again: it pays w after the commit
	return ch
}

// makeChanLocked makes w's channel and moves what w holds into it, in
// order. Called with b.mu and mu held: no commit runs meanwhile.
func (w *Watcher[T]) makeChanLocked() {
	b := w.b
	if w.isStopped() {
		w.ch = make(chan T)
		w.closeChLocked()
		return
	}
	held, exempt := w.takeAllLocked()
	size := len(held)
	if w.state.phase == running {
		size = exempt + w.queueLen
	}
	w.ch = make(chan T, size)
	for _, v := range held {
		w.ch <- v
	}
	w.sent, w.exemptTo = uint64(len(held)), uint64(exempt)
	if w.state.phase != running {
		w.closeChLocked() // Shutdown or eviction: nothing more comes
		return
	}
	b.removeLocked(w)
	if w.policy.kind == kindBlockFor {
		b.nBlockFor++ // removeLocked counted it out
	}
	w.inChans, w.index = true, len(b.chans)
	b.chans = append(b.chans, w)
}

// takeAllLocked takes everything w holds, pend then its ring segment, and
// says how many of those values are exempt. Called with b.mu and mu held.
func (w *Watcher[T]) takeAllLocked() ([]T, int) {
	held := make([]T, 0, w.pend.len())
	exempt := w.pend.len() - w.pendN
	for w.pend.len() > 0 {
		it, _ := w.popLocked()
		held = append(held, it.v)
	}
	h := w.next.Load()
	for !w.next.CompareAndSwap(h, math.MaxUint64) { // All loops claim with a CAS
		h = w.next.Load()
	}
	r := w.b.ring.Load()
	for s := h; s <= w.b.tail.Load(); s++ {
		held = append(held, r.at(s))
		if s < w.liveFrom {
			exempt++
		}
	}
	return held, exempt
}

// sendLocked queues v for w, read through C, under its policy. A full
// Block or BlockFor watcher is owed v instead: the publisher sends it after
// the commit (payLocked). It reports false if w was evicted. The send never
// blocks: mu's holder is the channel's only sender. Called with b.mu held.
func (w *Watcher[T]) sendLocked(v T) bool {
	if w.trySendLocked(v) {
		return true
	}
	switch w.policy.kind {
	case kindBlock, kindBlockFor:
		w.owed = true
	case kindDropOldest:
		w.replaceOldestLocked(v)
	case kindEvict:
		w.drop()
		w.mu.Lock()
		w.state = endState{ended, ErrEvicted}
		w.mu.Unlock()
		w.closeChLocked()
		return false
	default:
		w.drop()
	}
	return true
}

func (w *Watcher[T]) trySendLocked(v T) bool {
	select {
	case w.ch <- v:
		w.sent++
		return true
	default:
		return false
	}
}

// replaceOldestLocked discards the oldest value of w's channel that counts
// and queues v, with b.mu held. That value must be first in the channel (a
// reader receives from the front at any time); while part of a prefix or
// replay is still in front, v is dropped instead (counted), as under Drop.
func (w *Watcher[T]) replaceOldestLocked(v T) {
	if w.exemptTo > w.sent-uint64(len(w.ch)) {
		w.drop() // an exempt value may still be first
		return
	}
	select {
	case <-w.ch:
		w.drop()
	default: // the reader took it: there is room
	}
	w.trySendLocked(v)
}

// discardLocked empties w's channel: Stop discards what w holds, as on the
// All path. Called with b.mu held, never while a send to it is in flight.
func (w *Watcher[T]) discardLocked() {
	for len(w.ch) > 0 {
		select {
		case <-w.ch:
		default: // a reader took the last one
		}
	}
}

// closeChLocked closes w's channel once. Called with b.mu held, never while
// a send to it is in flight (b.sending).
func (w *Watcher[T]) closeChLocked() {
	if !w.chClosed {
		w.chClosed = true
		close(w.ch)
	}
}
