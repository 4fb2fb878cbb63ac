package broadcast

import (
	"sync"
	"sync/atomic"
)

// remove unregisters w. Called with b.mu held.
func (b *Broadcaster[T]) remove(w *Watcher[T]) {
	if !unlink(&b.watchers, w) {
		return
	}
	b.nWatchers--
	if b.nWatchers == 0 && !b.closed && !b.busy && b.cfg.history == 0 {
		// Publishes may count without the lock from here. Not while a
		// publisher holds the turn: it read the sequence number before
		// waiting, and its commit stores the tail from it, so nothing may
		// move the tail meanwhile; its commit clears the bit instead.
		b.tailw.And(^uint64(slowBit))
	}
	if w.policy.kind == kindBlockFor {
		b.nBlockFor.Add(-1)
	}
}

// unlink removes w from *list in O(1) by moving the last watcher into its
// place, and reports whether w was there. Called with b.mu held.
func unlink[T any](list *[]*Watcher[T], w *Watcher[T]) bool {
	l := *list
	i := w.index
	if i < 0 || i >= len(l) || l[i] != w {
		return false
	}
	last := len(l) - 1
	l[i] = l[last]
	l[i].index = i
	l[last] = nil
	*list = l[:last]
	w.index = -1
	return true
}

// A Watcher receives the values published after it registered, in order,
// under its policy. Read it through [Watcher.C] or [Watcher.All]; each value
// goes to exactly one reader. Stop it with [Watcher.Stop] when done: a
// watcher nobody reads and nobody stops holds its queue (and, under Block,
// makes publishers wait) until the broadcaster shuts down. Dropping the
// last reference to a watcher is not Stop: the broadcaster keeps it
// registered, and it is not garbage collected, until Stop or Shutdown.
type Watcher[T any] struct {
	// Set by Watch, never changed.
	b         *Broadcaster[T]
	queueLen  int
	policy    Policy
	prefixLen int // len(prefix) of WatchWithPrefix, or of the replay of WatchFrom

	// Atomics: read without mu by publishers deciding whether w needs
	// attention; h is moved by readers with a CAS, the others are written
	// under mu.
	h          atomic.Uint64 // next ring seq not yet taken: w's ring segment is [h, tail)
	pendLen    atomic.Int64  // len(pend)
	prefixLeft atomic.Int64  // prefix values still at the front of pend
	dropped    atomic.Uint64
	stopped    atomic.Bool
	roomWanted atomic.Bool  // a publisher waits for this watcher to make room
	waiting    atomic.Int32 // goroutines waiting on wake, or about to (see awaitValue)
	passes     atomic.Int32 // how many more the current wake-up token is to reach

	// mu guards the fields below. Lock order: b.mu before w.mu; w.mu is never
	// held while blocking (sends under it never block: they are select with
	// default, or into a channel known to have room).
	mu         sync.Mutex
	pend       deque[item[T]] // values taken out of the ring (or the prefix, or a replay), in order
	ended      bool           // Shutdown: readers drain what is queued, then end
	wake       chan struct{}
	done       chan struct{} // closed when w ends (stopped or shut down)
	doneClosed bool

	// Guarded by mu too. Channel mode, from the first call of C: a
	// forwarding goroutine moves the queue into ch, which is small
	// (ChannelBuffer). The queue is then
	// ch, plus the value the forwarder holds, plus pend and the ring
	// segment as before.
	ch             chan T
	chClosed       bool
	stopCh         chan struct{} // closed by Stop: releases a blocked send
	sendDone       chan struct{} // closed when a blocked send has resolved (Stop waits)
	sendDoneClosed bool
	directSending  bool // a publisher is blocked in sendDirect

	// Atomics of channel mode, written under mu, read without it by
	// publishers: the channel (nil before C), whether the forwarder holds a
	// claimed value, and how many non-prefix values it has claimed in all
	// (see chanQueued).
	chp        atomic.Pointer[chan T]
	held       atomic.Int32
	npClaimed  atomic.Uint64
	pinned     atomic.Uint64 // 1 + the first ring seq a forwarder batch reads; 0 if none
	fwdPending atomic.Bool   // C() was called, the forwarder is not started yet

	// Guarded by mu: why the watcher ended (Err), whether Evict ended it,
	// and, for WithContext, the AfterFunc's stop and a channel closed when
	// its call has returned.
	err      error
	evicted  bool
	ctxStop  func() bool
	ctxAfter chan struct{}

	// Guarded by the broadcaster's locks.
	index  int  // position in b.watchers; guarded by b.mu
	parked bool // on b.parked; guarded by b.pmu
}

// mustBeMade panics on a Watcher that Watch did not return: every method of
// a zero Watcher panics with this message.
func (w *Watcher[T]) mustBeMade() *Broadcaster[T] {
	if w.b == nil {
		panic("broadcast: a Watcher must come from Watch or WatchWithPrefix")
	}
	return w.b
}

// Dropped returns how many values this watcher lost to its policy.
func (w *Watcher[T]) Dropped() uint64 {
	w.mustBeMade()
	return w.dropped.Load()
}

// drop counts a drop: the watcher's count first, then the total, as
// Broadcaster.Dropped documents (events' Recorders rely on it).
func (w *Watcher[T]) drop() {
	w.dropped.Add(1)
	w.b.dropped.Add(1)
}

// attnSeq returns a lower bound of the first sequence number whose publish
// must look at w: when w becomes full (assuming nobody reads) or when the
// ring would overwrite a value w has not taken. Both only grow as w's reader
// consumes, so a stale read is still a valid bound.
func (w *Watcher[T]) attnSeq(ringSize uint64) uint64 {
	// Order matters: a reader moving a value first counts it where it goes
	// (held, npClaimed, the channel), then takes it from where it was (h,
	// pend); reading in the opposite order can only see it twice, which
	// makes the bound lower, never higher.
	h := w.h.Load()
	lap := h
	if p := w.pinned.Load(); p != 0 && p-1 < lap {
		lap = p - 1 // the forwarder still reads the ring from there
	}
	pl := w.pendLen.Load()
	np := pl - w.prefixLeft.Load() + int64(w.chanQueued())
	fullAt := int64(h) + int64(w.queueLen) - np
	if fullAt < 0 {
		fullAt = 0
	}
	return min(uint64(fullAt), lap+ringSize)
}

// queuedLocked returns how many non-prefix values w holds just before seq s
// is committed. Ring mode; called with w.mu held.
func (w *Watcher[T]) queuedLocked(s uint64) int {
	pl := w.pendLen.Load()
	n := int(pl-w.prefixLeft.Load()) + w.chanQueued()
	if h := w.h.Load(); s > h {
		n += int(s - h)
	}
	return n
}

// chanQueued returns how many non-prefix values are in w's channel or in
// its forwarder's hands; 0 before C. The channel cannot say how many of its
// values are prefix ones, but the forwarder hands the prefix over first, so
// of the x values in flight the last npClaimed are not prefix values. While
// a blocked send completes, its value may be counted both in the channel
// and as held: the count is then one too high, never too low, until the
// forwarder relocks and signals room.
func (w *Watcher[T]) chanQueued() int {
	p := w.chp.Load()
	if p == nil {
		return 0
	}
	x := uint64(w.held.Load())
	np := w.npClaimed.Load()
	x += uint64(len(*p))
	return int(min(x, np))
}

// clearPendLocked empties w's private queue.
func (w *Watcher[T]) clearPendLocked() {
	w.pend = deque[item[T]]{}
	w.pendLen.Store(0)
	w.prefixLeft.Store(0)
}

// signalRoomIfWanted wakes a publisher waiting for w to make room.
func (w *Watcher[T]) signalRoomIfWanted() {
	if w.roomWanted.Load() && w.roomWanted.CompareAndSwap(true, false) {
		w.b.signalRoom()
	}
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Stop unregisters the watcher. It is idempotent and safe from any
// goroutine, including from inside a loop over C() or All(), and while a
// Publish waits for this watcher (that Publish goes on at once). When Stop
// returns nothing more is queued: C() is closed, keeping as many of the
// queued values as its buffer holds ([ChannelBuffer]), and All() ends;
// values not received otherwise are discarded, and not counted as dropped;
// so after Shutdown, read a watcher before stopping it. Stop does not
// change [Watcher.Err].
func (w *Watcher[T]) Stop() {
	w.stopWith(nil)
	w.mu.Lock()
	stop := w.ctxStop
	w.mu.Unlock()
	if stop != nil {
		stop() // WithContext: nothing left to do when ctx ends
	}
}

// stopWith is Stop; cause, if not nil, is why the watcher ended (its
// WithContext ctx), unless something ended it before.
func (w *Watcher[T]) stopWith(cause error) {
	b := w.mustBeMade()
	b.mu.Lock()
	w.mu.Lock()
	if w.stopped.Load() {
		wait := w.sendDone
		w.mu.Unlock()
		b.mu.Unlock()
		if wait != nil {
			<-wait
		}
		return
	}
	if w.err == nil && !w.ended {
		w.err = cause
	}
	w.stopped.Store(true)
	b.unpark(w)
	w.closeDone()
	w.fwdPending.Store(false)
	var wait chan struct{}
	if w.ch != nil && !w.chClosed {
		close(w.stopCh)
		if w.held.Load() != 0 || w.directSending {
			// The forwarder (or a publisher) is blocked sending; the
			// forwarder's non-blocking sends happen under w.mu. The sender
			// closes ch when its send resolves, which the stop channel
			// makes immediate.
			w.sendDone = make(chan struct{})
			wait = w.sendDone
		} else {
			// What fits in the channel stays readable, as if the forwarder
			// had kept up.
			w.fillLocked(false)
			close(w.ch)
			w.chClosed = true
		}
	}
	// Unregistered only now: removing the last watcher lets publishes
	// count without the lock and without writing the ring, so the fill
	// above, which reads the ring up to the tail, must come first, or it
	// could take slots never written in this lap.
	if w.index >= 0 {
		b.remove(w)
	}
	w.clearPendLocked()
	w.roomWanted.Store(false)
	w.mu.Unlock()
	b.mu.Unlock()
	b.signalRoom()
	if wait != nil {
		<-wait
	}
}

// Err returns why the watcher ended: nil while it runs and after Stop;
// [ErrClosed] after Shutdown; [ErrEvicted] once [Evict] ended it;
// context.Cause(ctx) once the ctx of [WithContext] ended it. The first
// cause that ends the watcher is the one Err keeps. After eviction and
// Shutdown the values the watcher holds stay readable.
func (w *Watcher[T]) Err() error {
	w.mustBeMade()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Len returns how many values are queued for the watcher and not yet
// received, those in the channel of [Watcher.C] included (a value the
// channel's sender is handing over may be counted twice for a moment).
func (w *Watcher[T]) Len() int {
	b := w.mustBeMade()
	w.mu.Lock()
	defer w.mu.Unlock()
	n := w.pend.len() + int(w.held.Load())
	if h, t := w.h.Load(), b.seq(); h < t && !w.stopped.Load() {
		n += int(t - h)
	}
	if w.ch != nil {
		n += len(w.ch)
	}
	return n
}

// end marks w ended by Shutdown (or by Evict, see evictLocked). No publisher is active. A C() channel is
// closed now if nothing is queued outside it; otherwise its forwarder
// (started here if need be) closes it after handing everything over, and
// end reports true: Shutdown has to wait for that. Called with b.mu and
// w.mu held.
func (w *Watcher[T]) end() bool {
	if w.err == nil && !w.stopped.Load() {
		w.err = ErrClosed
	}
	w.ended = true
	w.closeDone()
	if w.ch == nil || w.chClosed {
		return false
	}
	pending := w.fwdPending.CompareAndSwap(true, false)
	if w.held.Load() == 0 && w.pend.len() == 0 && w.h.Load() >= w.b.seq() {
		// A parked forwarder sends nothing without w.mu; it wakes (done is
		// closed), finds ch closed and exits.
		w.closeChLocked()
		return false
	}
	if pending {
		w.b.fwd.Add(1)
		go w.forward()
	}
	return true
}

func (w *Watcher[T]) closeDone() {
	if w.done != nil && !w.doneClosed {
		close(w.done)
	}
	w.doneClosed = true
}
