package broadcast

import (
	"math"
	"sync"
	"sync/atomic"
)

// A Watcher receives the values published after it registered, in order,
// under its policy. Read it through [Watcher.C] or [Watcher.All]; each value
// goes to exactly one reader. Stop it with [Watcher.Stop] when done: a
// watcher nobody reads and nobody stops holds its queue (and, under Block,
// makes publishers wait) until the broadcaster shuts down. Dropping the
// last reference to a watcher is not Stop: the broadcaster keeps it
// registered, and it is not garbage collected, until Stop or Shutdown.
type Watcher[T any] struct {
	// Set by watch, never changed.
	b        *Broadcaster[T]
	queueLen int
	policy   Policy
	liveFrom uint64        // the first live sequence number; earlier ones are exempt
	room     chan struct{} // cap 1: the publisher waiting for w should look again

	// next is the next ring sequence number to read: a reader claims the
	// value there by moving it on with a CAS, a publisher under mu;
	// math.MaxUint64 once w reads no more from the ring (Stop, Evict, C).
	next       atomic.Uint64
	dropped    atomic.Uint64
	roomWanted atomic.Bool // the publisher waiting for w wants to hear when a reader takes

	// mu guards these. state and ch are written with b.mu held as well, so
	// either lock reads them. mu is never held while blocking.
	mu    sync.Mutex
	pend  deque[item[T]] // w's own queue, read before the ring: prefix, replay, values moved out of the ring
	pendN int            // values in pend that count against queueLen
	state endState
	ch    chan T // C(): from then on the whole queue (chan.go)

	// Guarded by b.mu: C()'s channel, whose only sender is mu's holder.
	inChans  bool   // in b.chans rather than b.readers
	chClosed bool   // ch is closed
	sent     uint64 // values sent on ch
	exemptTo uint64 // the first sent values, before this count, are exempt (prefix, replay)
	owed     bool   // the commit found ch full: the publisher sends the value after it (payLocked)

	// Guarded by b.mu: the position in b.readers or b.chans (-1 once
	// removed); WithContext's AfterFunc stop, and a channel closed after it.
	index    int
	ctxStop  func() bool
	ctxAfter chan struct{}
}

// endState is how far a watcher is from its end, and why it ended.
type endState struct {
	phase phase
	err   error // Err: the first cause that ended the watcher
}

type phase uint8

const (
	running phase = iota
	ended         // Shutdown or Evict: readers take what it holds, then end
	stopped       // Stop: nothing more is read
)

func (w *Watcher[T]) isStopped() bool { return w.state.phase == stopped }

// Dropped returns how many values this watcher lost to its policy.
func (w *Watcher[T]) Dropped() uint64 {
	w.made()
	return w.dropped.Load()
}

// Policy returns the watcher's policy: the one given to Watch with
// [WithPolicy], or the one given to [New], or [Drop].
func (w *Watcher[T]) Policy() Policy {
	w.made()
	return w.policy
}

// drop counts a lost value: the watcher's count first, then the total, as
// Broadcaster.Dropped documents.
func (w *Watcher[T]) drop() {
	w.dropped.Add(1)
	w.b.dropped.Add(1)
}

// Len returns how many values are queued for this watcher and not yet
// received, on either read path.
func (w *Watcher[T]) Len() int {
	b := w.made()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		return len(w.ch)
	}
	n := w.pend.len()
	if h, t := w.next.Load(), b.tail.Load(); h <= t {
		n += int(t + 1 - h)
	}
	return n
}

// made returns w's broadcaster, and panics on a Watcher that no Watch
// method returned.
func (w *Watcher[T]) made() *Broadcaster[T] {
	if w.b == nil {
		panic("broadcast: a Watcher must come from Watch, WatchWithPrefix or WatchFrom")
	}
	return w.b
}

// attnSeqLocked returns w's attention bound: the first sequence number
// whose commit must visit w, when w would be full if nobody read or when
// the ring would lap a value w has not taken. Readers only raise it, so a
// stale bound is a valid one. Called with mu held.
func (w *Watcher[T]) attnSeqLocked(ringSize uint64) uint64 {
	h := w.next.Load()
	full := int64(max(h, w.liveFrom)) + int64(w.queueLen) - int64(w.pendN)
	return min(uint64(max(full, 0)), h+ringSize)
}

// fullLocked reports whether the values that count (not prefix or replay)
// in pend and in [next, s-1] fill w's queue length. Called with mu held.
func (w *Watcher[T]) fullLocked(s uint64) bool {
	n := int64(w.pendN)
	if live := max(w.next.Load(), w.liveFrom); s > live {
		n += int64(s - live)
	}
	return n >= int64(w.queueLen)
}

func (w *Watcher[T]) fullFor(s uint64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fullLocked(s)
}

// spillLocked moves w's ring segment [next, s-1] into pend (next moves with
// a CAS: readers claim without mu). Called with b.mu and mu held.
func (w *Watcher[T]) spillLocked(s uint64, r *ring[T]) {
	h := w.next.Load()
	for h < s && !w.next.CompareAndSwap(h, s) {
		h = w.next.Load()
	}
	for q := h; q < s; q++ {
		w.pend.push(item[T]{seq: q, v: r.at(q)})
		if q >= w.liveFrom {
			w.pendN++
		}
	}
}

// attendLocked applies w's policy if w is full for s, and moves its segment
// out of the ring if s would overwrite it. It reports whether w was
// evicted. Called by the committing publisher with b.mu and mu held.
func (w *Watcher[T]) attendLocked(s uint64, r *ring[T]) bool {
	if !w.fullLocked(s) {
		if R := r.size(); s >= R && w.next.Load() <= s-R {
			w.spillLocked(s, r)
		}
		return false
	}
	// The segment goes into pend first: readers take pend values only
	// under mu, so from here w's fullness cannot change under us.
	w.spillLocked(s, r)
	if w.pendN < w.queueLen {
		return false // a reader took values since fullLocked
	}
	w.drop()
	switch w.policy.kind {
	case kindDropOldest:
		// The oldest value that counts: exempt ones come first in pend.
		w.pend.removeAt(w.pend.len() - w.pendN)
		w.pendN--
	case kindEvict:
		// s is not queued; w keeps what it holds and ends.
		w.next.Store(math.MaxUint64)
		w.state = endState{ended, ErrEvicted}
		return true
	default:
		// Drop, or a Block/BlockFor watcher whose wait expired or was
		// given up: s is not queued for w.
		w.next.Store(s + 1)
	}
	return false
}

// popLocked takes w's next value from pend. Called with mu held.
func (w *Watcher[T]) popLocked() (item[T], bool) {
	if w.pend.len() == 0 {
		return item[T]{}, false
	}
	it := w.pend.pop()
	if it.seq >= w.liveFrom {
		w.pendN--
	}
	return it, true
}

// took tells the publisher waiting for w, if any, that a reader took a value.
func (w *Watcher[T]) took() {
	if w.roomWanted.Load() && w.roomWanted.CompareAndSwap(true, false) {
		w.signalRoom()
	}
}

func (w *Watcher[T]) signalRoom() {
	select {
	case w.room <- struct{}{}:
	default:
	}
}

// Stop unregisters the watcher. It is idempotent and safe from any
// goroutine, including from inside a loop over C() or All(), and while a
// Publish waits for this watcher (that Publish goes on at once). When Stop
// returns nothing more is queued: C() is closed and All() ends, on both
// paths at once: the values not received are discarded, and not counted as
// dropped; so after Shutdown or eviction, read a watcher before stopping
// it. Stop does not change [Watcher.Err].
func (w *Watcher[T]) Stop() {
	w.stopWith(nil)
	w.stopCtx() // WithContext: nothing left to do when ctx ends
}

// stopCtx unregisters w's WithContext callback, if any. ctxAfter is closed
// once it has run or never will: by it, or here if this call stopped it
// (Stop and Shutdown may both try; one succeeds).
func (w *Watcher[T]) stopCtx() {
	if w.ctxStop != nil && w.ctxStop() {
		close(w.ctxAfter)
	}
}

// stopWith is Stop; cause, if not nil, is why the watcher ended (its
// WithContext ctx) unless it had ended before.
func (w *Watcher[T]) stopWith(cause error) {
	b := w.made()
	b.mu.Lock()
	if w.isStopped() {
		b.mu.Unlock()
		return
	}
	w.mu.Lock()
	if w.state.phase == running {
		w.state.err = cause
	}
	w.state.phase = stopped
	w.pend = deque[item[T]]{}
	w.pendN = 0
	w.next.Store(math.MaxUint64)
	w.mu.Unlock()
	b.removeLocked(w)
	delete(b.evictedCtx, w)
	b.wakeWatcherLocked(w)
	w.signalRoom() // a publisher waiting for w goes on
	var sending chan struct{}
	if b.sending == w {
		// The publisher sending to ch closes it when the send ends.
		if b.sendEnd == nil {
			b.sendEnd = make(chan struct{})
		}
		sending = b.sendEnd
	} else if w.ch != nil {
		w.discardLocked()
		w.closeChLocked()
	}
	b.mu.Unlock()
	if sending != nil {
		<-sending
	}
}

// Err returns why the watcher ended: nil while it runs and after Stop;
// [ErrClosed] after Shutdown; [ErrEvicted] once [Evict] ended it;
// context.Cause(ctx) once the ctx of [WithContext] ended it. The first
// cause that ends the watcher is the one Err keeps. After eviction and
// Shutdown the values the watcher holds stay readable.
func (w *Watcher[T]) Err() error {
	w.made()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state.err
}
