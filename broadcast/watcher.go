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
//
// A Watcher's queue is its own queue pend (prefix values first, then values
// moved out of the shared ring) followed by its segment of the ring,
// sequence numbers next to the broadcaster's tail.
type Watcher[T any] struct {
	// Set by watch, never changed.
	b        *Broadcaster[T]
	queueLen int
	policy   Policy
	liveFrom uint64 // the first live sequence number; earlier ones are exempt

	// Atomics, read by publishers without mu. next is moved forward by a
	// reader with a CAS (it claims a value), and by a publisher holding mu.
	// pendN and pendAll change under mu.
	next       atomic.Uint64 // the next ring sequence number to read
	pendN      atomic.Int64  // values in pend that count against queueLen
	pendAll    atomic.Int64  // values in pend
	dropped    atomic.Uint64
	roomWanted atomic.Bool // the waiting publisher wants to hear when w has room
	stopped    atomic.Bool
	gen        atomic.Uint64 // moved under mu when waiters must look again (Stop, end, C)

	// mu guards these. Lock order: b.mu, then mu. mu is never
	// held while blocking.
	mu      sync.Mutex
	pend    deque[item[T]]
	ended   bool     // Shutdown: readers drain what is queued, then end
	fwd     fwdState // the C() forwarder (chan.go)
	ch      chan T
	quit    chan struct{} // closed by Stop or Shutdown's abort: releases the forwarder
	quitted bool          // quit is closed
	fwdDone chan struct{} // closed when the forwarder has exited; nil until it starts
	fwdWake chan struct{} // cap 1: the idle forwarder must run
	starter *waiter[T]    // on the parked list while the forwarder is pending
	held    atomic.Int32  // 1 while the forwarder holds a value it is sending

	// Guarded by mu: why the watcher ended (Err).
	err error

	// Guarded by b.mu: the position in b.watchers (-1 once removed) and,
	// for WithContext, the AfterFunc's stop and a channel closed when its
	// call has returned.
	index    int
	ctxStop  func() bool
	ctxAfter chan struct{}
}

// Dropped returns how many values this watcher lost to its policy.
func (w *Watcher[T]) Dropped() uint64 {
	w.made()
	return w.dropped.Load()
}

// drop counts a lost value: the watcher's count first, then the total, as
// Broadcaster.Dropped documents.
func (w *Watcher[T]) drop() { w.dropN(1) }

func (w *Watcher[T]) dropN(n uint64) {
	w.dropped.Add(n)
	w.b.dropped.Add(n)
}

// Len returns how many values are queued for this watcher and not yet
// received, those in the channel of [Watcher.C] included.
func (w *Watcher[T]) Len() int {
	b := w.made()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := int(w.pendAll.Load()) + int(w.held.Load())
	if t, h := b.tail(), w.next.Load(); h <= t && !w.stopped.Load() {
		n += int(t + 1 - h)
	}
	if w.ch != nil {
		n += len(w.ch)
	}
	return n
}

// made returns w's broadcaster, and panics on a Watcher that Watch did not
// return.
func (w *Watcher[T]) made() *Broadcaster[T] {
	if w.b == nil {
		panic("broadcast: a Watcher must come from Watch, WatchWithPrefix or WatchFrom")
	}
	return w.b
}

// attnSeq returns a lower bound of the first sequence number whose publish
// must visit w: when w would be full if nobody read, or when the ring
// would overwrite a value w has not taken. Both only grow as w's readers
// take values, so a stale bound is still a valid one.
func (w *Watcher[T]) attnSeq(ringSize uint64) uint64 {
	h := w.next.Load()
	full := int64(max(h, w.liveFrom)) + int64(w.queueLen) - w.pendN.Load()
	return min(uint64(max(full, 0)), h+ringSize)
}

// full reports whether w's queue is full just before s is committed: the
// values that count (not prefix or replay values) in pend and in the
// segment [next, s-1] fill its queue length.
func (w *Watcher[T]) full(s uint64) bool {
	n := w.pendN.Load()
	if live := max(w.next.Load(), w.liveFrom); s > live {
		n += int64(s - live)
	}
	return n >= int64(w.queueLen)
}

// claimTo moves next to t if it is behind, with a CAS since readers claim
// without mu, and returns where it was.
func (w *Watcher[T]) claimTo(t uint64) uint64 {
	h := w.next.Load()
	for h < t && !w.next.CompareAndSwap(h, t) {
		h = w.next.Load()
	}
	return min(h, t)
}

// spillLocked moves w's ring segment [next, s-1] into pend, so that the
// ring may overwrite it or s may be skipped. Called with mu held.
func (w *Watcher[T]) spillLocked(s uint64, r *ring[T]) {
	h := w.claimTo(s)
	for q := h; q < s; q++ {
		w.pend.push(item[T]{seq: q, v: r.at(q)})
		if q >= w.liveFrom {
			w.pendN.Add(1)
		}
	}
	w.pendAll.Add(int64(s - h))
}

// attendLocked applies w's policy if w is full for s, and moves its segment
// out of the ring if s would overwrite it. It reports whether w was
// evicted. Called by the committing publisher with b.mu and mu held.
func (w *Watcher[T]) attendLocked(s uint64, r *ring[T]) bool {
	if !w.full(s) {
		if R := r.size(); s >= R && w.next.Load() <= s-R {
			w.spillLocked(s, r)
		}
		return false
	}
	// Move the segment into pend first: readers claim ring values without
	// mu, but take pend values only with it, so from here w's fullness
	// cannot change under us. A reader may have taken values since full.
	w.spillLocked(s, r)
	if w.pendN.Load() < int64(w.queueLen) {
		return false
	}
	w.drop()
	switch w.policy.kind {
	case kindDropOldest:
		// The oldest value that counts: exempt values (prefix, replay)
		// come first in pend, and are never dropped.
		w.pend.removeAt(int(w.pendAll.Load() - w.pendN.Load()))
		w.pendN.Add(-1)
		w.pendAll.Add(-1)
		return false
	case kindEvict:
		// s is not queued; w keeps what it holds and ends: its readers
		// drain that, then C() closes / All() ends.
		w.next.Store(math.MaxUint64)
		w.endLocked(ErrEvicted)
		return true
	default:
		// Drop, or a Block/BlockFor watcher whose wait expired or was
		// given up: s is not queued for w.
		w.next.Store(s + 1)
		return false
	}
}

// popLocked takes w's next value from pend. Called with mu held.
func (w *Watcher[T]) popLocked() (item[T], bool) {
	if w.pend.len() == 0 {
		return item[T]{}, false
	}
	it := w.pend.pop()
	if it.seq >= w.liveFrom {
		w.pendN.Add(-1)
	}
	w.pendAll.Add(-1)
	return it, true
}

// took is called by a reader after it took a value: it tells the waiting
// publisher, if that one waits for w, that w has room.
func (w *Watcher[T]) took() {
	if w.roomWanted.Load() && w.roomWanted.CompareAndSwap(true, false) {
		w.b.signalRoom()
	}
}

// Stop unregisters the watcher. It is idempotent and safe from any
// goroutine, including from inside a loop over C() or All(), and while a
// Publish waits for this watcher (that Publish goes on at once). When Stop
// returns nothing more is queued: C() is closed, keeping the values already
// in its buffer, and All() ends; values not received otherwise are
// discarded, and not counted as dropped; so after Shutdown, read a watcher
// before stopping it. Stop does not change [Watcher.Err].
func (w *Watcher[T]) Stop() {
	if stop := w.stopWith(nil); stop != nil {
		stop() // WithContext: nothing left to do when ctx ends
	}
}

// stopWith is Stop; cause, if not nil, is why the watcher ended (its
// WithContext ctx), unless something ended it before. It returns the
// AfterFunc's stop, if any.
func (w *Watcher[T]) stopWith(cause error) func() bool {
	b := w.made()
	var done chan struct{}
	b.lock()
	w.mu.Lock()
	if !w.stopped.Load() {
		if w.err == nil {
			w.err = cause
		}
		w.stopped.Store(true)
		b.remove(w)
		delete(b.evictedCtx, w)
		w.pend = deque[item[T]]{}
		w.pendN.Store(0)
		w.pendAll.Store(0)
		w.roomWanted.Store(false)
		w.changedLocked()
		done = w.fwdDone
		w.stopForwarderLocked()
	}
	stop := w.ctxStop
	w.mu.Unlock()
	b.unlock()
	b.signalRoom()
	b.wakeParked() // no reference to w stays on the parked list
	if done != nil {
		<-done
	}
	return stop
}

// endLocked ends w for cause (Shutdown, eviction): its readers take what is
// queued, then C() closes and All() ends. Called with b.mu and mu held.
func (w *Watcher[T]) endLocked(cause error) {
	if w.err == nil && !w.stopped.Load() {
		w.err = cause
	}
	w.ended = true
	w.changedLocked()
	w.endForwarderLocked()
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
	return w.err
}

// changedLocked tells w's waiters to look at w again: Stop, an end, C().
// The caller wakes the parked list once it has released its locks.
// Called with mu held.
func (w *Watcher[T]) changedLocked() { w.gen.Add(1) }
