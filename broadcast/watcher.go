package broadcast

import (
	"context"
	"iter"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A Watcher receives the values published after it registered, in order,
// under its policy. Read it through [Watcher.C] or [Watcher.All]; each value
// goes to exactly one reader. Stop it with [Watcher.Stop] when done: a
// watcher nobody reads and nobody stops holds its queue (and, under Block,
// makes publishers wait) until the broadcaster shuts down.
type Watcher[T any] struct {
	b         *Broadcaster[T]
	queueLen  int
	policy    Policy
	prefixLen int // len(prefix) of WatchWithPrefix

	// Read without mu by publishers deciding whether w needs attention;
	// written under mu.
	h          atomic.Uint64 // next ring seq not yet taken: w's ring segment is [h, tail)
	pendLen    atomic.Int64  // len(pend)
	prefixLeft atomic.Int64  // prefix values still at the front of pend
	dropped    atomic.Uint64
	stopped    atomic.Bool
	roomWanted atomic.Bool // a publisher waits for this watcher to make room

	// mu guards the fields below. Lock order: b.mu before w.mu; w.mu is never
	// held while blocking (sends under it never block: they are select with
	// default, or into a channel known to have room).
	mu         sync.Mutex
	pend       deque[T] // values taken out of the ring (or the prefix), in order
	ended      bool     // Shutdown: readers drain what is queued, then end
	wake       chan struct{}
	done       chan struct{} // closed when w ends (stopped or shut down)
	doneClosed bool

	// Channel mode, from the first call of C: the channel is the queue and
	// publishers send into it. chPrefix prefix values were at its front.
	ch             chan T
	chClosed       bool
	chPrefix       uint64
	sent           uint64        // values sent into ch and not discarded by DropOldest
	stopCh         chan struct{} // closed by Stop: releases a blocked send
	sending        bool          // a publisher is blocked sending into ch
	sendDone       chan struct{} // closed when that send has resolved (Stop waits)
	sendDoneClosed bool

	index  int  // position in b.ringW or b.chanW; guarded by b.mu
	parked bool // on b.parked; guarded by b.pmu
}

// Dropped returns how many values this watcher lost to its policy.
func (w *Watcher[T]) Dropped() uint64 { return w.dropped.Load() }

func (w *Watcher[T]) drop() {
	w.dropped.Add(1)
	w.b.dropped.Add(1)
}

// attnSeq returns a lower bound of the first sequence number whose publish
// must look at w: when w becomes full (assuming nobody reads) or when the
// ring would overwrite a value w has not taken. Both only grow as w's reader
// consumes, so a stale read is still a valid bound.
func (w *Watcher[T]) attnSeq(ringSize uint64) uint64 {
	h := w.h.Load()
	np := w.pendLen.Load() - w.prefixLeft.Load()
	fullAt := int64(h) + int64(w.queueLen) - np
	if fullAt < 0 {
		fullAt = 0
	}
	return min(uint64(fullAt), h+ringSize)
}

// queuedLocked returns how many non-prefix values w holds just before seq s
// is committed. Ring mode; called with w.mu held.
func (w *Watcher[T]) queuedLocked(s uint64) int {
	n := int(w.pendLen.Load() - w.prefixLeft.Load())
	if h := w.h.Load(); s > h {
		n += int(s - h)
	}
	return n
}

// chanPrefixLocked returns how many prefix values are still in ch.
func (w *Watcher[T]) chanPrefixLocked() int {
	received := w.sent - uint64(len(w.ch))
	if received >= w.chPrefix {
		return 0
	}
	return int(w.chPrefix - received)
}

// chanQueuedLocked returns how many non-prefix values ch holds.
func (w *Watcher[T]) chanQueuedLocked() int {
	return len(w.ch) - w.chanPrefixLocked()
}

// settleLocked copies w's ring segment [h, s) into pend, so that the ring
// may overwrite it or so that seq s can be skipped.
func (w *Watcher[T]) settleLocked(s uint64, r *ring[T]) {
	// All loops claim values with a CAS on h without w.mu: move h first,
	// then copy what we took.
	h := w.h.Load()
	for h < s && !w.h.CompareAndSwap(h, s) {
		h = w.h.Load()
	}
	for ; h < s; h++ {
		w.pend.push(r.buf[h&r.mask])
	}
	w.pendLen.Store(int64(w.pend.len()))
}

// attendLocked applies w's policy if w is full for seq s, and copies its
// segment out of the ring if seq s would overwrite it. Called by the
// committing publisher with b.mu and w.mu held.
func (w *Watcher[T]) attendLocked(s uint64, r *ring[T], ws *waitState) {
	if w.queuedLocked(s) >= w.queueLen {
		switch {
		case w.policy.kind == kindDropOldest:
			if np := int(w.pendLen.Load() - w.prefixLeft.Load()); np > 0 {
				w.pend.removeAt(int(w.prefixLeft.Load()))
				w.pendLen.Add(-1)
			} else {
				w.h.Add(1) // the oldest is the head of the ring segment
			}
			w.drop()
		default:
			// Drop, or a Block/BlockFor watcher whose wait expired or was
			// given up: seq s is not queued for w.
			w.settleLocked(s, r)
			w.h.Store(s + 1)
			w.drop()
			return
		}
	}
	if R := uint64(len(r.buf)); s >= R && w.h.Load() <= s-R {
		w.settleLocked(s, r)
	}
}

// offer queues v for a channel watcher at commit time, applying its policy
// if it is full. It reports whether the publisher must wait for w (Block or
// unexpired BlockFor). Called with b.mu held and without w.mu: everything
// else that touches a channel watcher's send state (C, Stop, Shutdown) holds
// b.mu too, and sendBlocking runs only while this publisher holds the turn.
// Skipping w.mu here saves a lock per watcher per value.
func (w *Watcher[T]) offer(v T, ws *waitState) bool {
	if w.chClosed {
		return false
	}
	if w.chanQueuedLocked() < w.queueLen {
		w.sendLocked(v)
		return false
	}
	switch w.policy.kind {
	case kindDrop:
		w.drop()
	case kindDropOldest:
		w.discardOldestLocked()
		w.sendLocked(v)
	default:
		if ws.expired(w.policy) {
			w.drop()
			return false
		}
		if ws.start.IsZero() {
			ws.start = time.Now()
			ws.now = ws.start
		}
		return true
	}
	return false
}

// sendLocked puts v into ch, which has room: w holds fewer values than its
// queue length plus prefix, and cap(ch) is exactly that.
func (w *Watcher[T]) sendLocked(v T) {
	select {
	case w.ch <- v:
		w.sent++
	default:
		// Unreachable by construction; never block under w.mu.
		w.drop()
	}
}

// takeAllLocked empties ch without blocking and returns its values in
// order, as not sent: the caller sends back those it keeps. The reader may
// take values meanwhile; it only takes from the front, so order holds.
func (w *Watcher[T]) takeAllLocked() []T {
	var tmp []T
	for {
		select {
		case v := <-w.ch:
			tmp = append(tmp, v)
			continue
		default:
		}
		break
	}
	w.sent -= uint64(len(tmp))
	return tmp
}

// discardOldestLocked drops w's oldest non-prefix value from ch.
func (w *Watcher[T]) discardOldestLocked() {
	if w.chanPrefixLocked() == 0 {
		select {
		case <-w.ch:
			w.sent--
			w.drop()
		default: // the reader emptied ch meanwhile: there is room now
		}
		return
	}
	// Prefix values are still in front: take everything out, remove the
	// first non-prefix value, put the rest back in order. The reader may take
	// values meanwhile; it only ever takes from the front, so order holds.
	// Rare: DropOldest, a prefix not yet read, and a full queue.
	tmp := w.takeAllLocked()
	pin := 0
	if received := w.sent; received < w.chPrefix {
		pin = int(w.chPrefix - received)
	}
	// Values the reader took while we drained no longer count as prefix in ch.
	w.chPrefix = w.sent + uint64(pin)
	if pin < len(tmp) {
		tmp = append(tmp[:pin], tmp[pin+1:]...)
		w.drop()
	}
	for _, v := range tmp {
		w.sendLocked(v)
	}
}

// sendBlocking waits for room in a full Block/BlockFor channel watcher and
// sends v, unless w is stopped, its BlockFor deadline passes, ctx ends or
// Shutdown aborts; then v is dropped for w (counted unless w was stopped).
// Called without b.mu; no lock is held while it waits.
func (w *Watcher[T]) sendBlocking(ctx context.Context, b *Broadcaster[T], v T, ws *waitState) error {
	w.mu.Lock()
	if w.chClosed || w.stopped.Load() {
		w.mu.Unlock()
		return nil
	}
	if ws.giveUp || ws.expired(w.policy) {
		w.drop()
		w.mu.Unlock()
		return nil
	}
	if w.chanQueuedLocked() < w.queueLen {
		w.sendLocked(v)
		w.mu.Unlock()
		return nil
	}
	w.sending = true
	ch, stop := w.ch, w.stopCh
	w.mu.Unlock()

	var tc <-chan time.Time
	if d := ws.deadline(w.policy); !d.IsZero() {
		t := time.NewTimer(time.Until(d))
		defer t.Stop()
		tc = t.C
	}
	sent, stopped := false, false
	var err error
	select {
	case ch <- v:
		sent = true
	case <-stop:
		stopped = true
	case <-tc:
	case <-ctx.Done():
		err = ctx.Err()
		ws.giveUp = true
	case <-b.abort:
		err = ErrClosed
		ws.giveUp = true
	}
	ws.now = time.Now()

	w.mu.Lock()
	w.sending = false
	if sent {
		w.sent++
	}
	if w.stopped.Load() && !w.chClosed {
		close(w.ch)
		w.chClosed = true
	}
	if w.sendDone != nil && !w.sendDoneClosed {
		close(w.sendDone)
		w.sendDoneClosed = true
	}
	if !sent && !stopped && !w.stopped.Load() {
		w.drop()
	}
	w.mu.Unlock()
	return err
}

// C returns the watcher's channel: values in order; closed when the watcher
// ends (Stop, or Shutdown after the queued values). Every call returns the
// same channel.
//
// The first call switches the watcher to channel mode: the channel is made
// with room for the whole queue (queue length plus unread prefix), because
// after Shutdown a closed channel must still hold every queued value and no
// goroutine may remain to feed it; publishers then send into it directly.
// So an idle watcher costs a few hundred bytes until C is called and one
// queue-sized channel after. [Watcher.All] does not need the channel.
//
// One approximation: under [Block] and [BlockFor] after WatchWithPrefix, once
// the prefix has been read the channel may hold up to len(prefix) values
// beyond the queue length before publishers wait (a channel cannot tell its
// sender when a value was received). Every other case is exact.
func (w *Watcher[T]) C() <-chan T {
	w.mu.Lock()
	if ch := w.ch; ch != nil {
		w.mu.Unlock()
		return ch
	}
	w.mu.Unlock()

	b := w.b
	b.mu.Lock()
	w.mu.Lock()
	defer b.mu.Unlock()
	defer w.mu.Unlock()
	if w.ch != nil {
		return w.ch
	}
	if w.stopped.Load() {
		w.ch = make(chan T)
		close(w.ch)
		w.chClosed = true
		return w.ch
	}
	prefix := int(w.prefixLeft.Load())
	if w.ended {
		// Room for what is queued, values All loops hold included.
		w.ch = make(chan T, w.prefixLen+w.queuedLocked(b.tail.Load()))
	} else {
		// Room for the whole queue plus the whole prefix: an All loop may
		// hold prefix values and give them back.
		w.ch = make(chan T, w.prefixLen+w.queueLen)
		w.stopCh = make(chan struct{})
	}
	w.chPrefix = uint64(prefix)
	// Move the queue into the channel, in order; it fits by construction.
	r := b.ring.Load()
	for w.pend.len() > 0 {
		w.sendLocked(w.pend.pop())
	}
	t := b.tail.Load()
	h := w.h.Load()
	for h < t && !w.h.CompareAndSwap(h, t) {
		h = w.h.Load()
	}
	for ; h < t; h++ {
		w.sendLocked(r.buf[h&r.mask])
	}
	w.pend = deque[T]{}
	w.pendLen.Store(0)
	w.prefixLeft.Store(0)
	if w.ended {
		close(w.ch)
		w.chClosed = true
		return w.ch
	}
	// Move w from the ring list to the channel list.
	unlink(&b.ringW, w)
	w.index = len(b.chanW)
	b.chanW = append(b.chanW, w)
	if w.roomWanted.Swap(false) {
		b.signalRoom()
	}
	if w.wake != nil {
		select {
		case w.wake <- struct{}{}:
		default:
		}
	}
	return w.ch
}

// All returns an iterator over the watcher's values, in order. It ends when
// the watcher ends: at once after Stop, after the queued values after
// Shutdown. Breaking out of the loop leaves the watcher registered, with the
// values not yet yielded still queued; call Stop when done. Before
// [Watcher.C] is called, All reads the broadcaster's shared ring directly,
// in batches, which is the fastest way to read; after, it reads the channel.
// Several loops may run at once; each value goes to one of them.
func (w *Watcher[T]) All() iter.Seq[T] {
	return func(yield func(T) bool) {
		b := w.b
		var batch []T
		spins := 0
		for {
			w.mu.Lock()
			if w.stopped.Load() {
				w.mu.Unlock()
				return
			}
			if ch := w.ch; ch != nil {
				w.mu.Unlock()
				for v := range ch {
					if w.stopped.Load() || !yield(v) {
						return
					}
				}
				return
			}
			if v, ok := w.popPendLocked(); ok {
				w.mu.Unlock()
				spins = 0
				if !yield(v) {
					return
				}
				continue
			}
			if h, t := w.h.Load(), b.tail.Load(); h < t {
				// Copy a batch out of the ring under the lock (publishers
				// change the ring segment only under it), then claim each
				// value by moving h past it with a CAS just before yielding
				// it: until then it stays queued, visible to every other
				// reader and to publishers. A failed CAS means someone else
				// moved h (another reader, a publisher applying a policy, C),
				// so the rest of the batch is stale: start over.
				if batch == nil {
					batch = make([]T, 0, batchSize)
				}
				r := b.ring.Load()
				n := min(t-h, batchSize)
				batch = batch[:0]
				for i := range n {
					batch = append(batch, r.buf[(h+i)&r.mask])
				}
				w.mu.Unlock()
				spins = 0
				for i, v := range batch {
					if w.stopped.Load() || !w.h.CompareAndSwap(h+uint64(i), h+uint64(i)+1) {
						break
					}
					if w.roomWanted.Load() && w.roomWanted.CompareAndSwap(true, false) {
						b.signalRoom()
					}
					if !yield(v) {
						clear(batch)
						return
					}
				}
				clear(batch)
				continue
			}
			if w.ended {
				w.mu.Unlock()
				return
			}
			if w.wake == nil {
				w.wake = make(chan struct{}, 1)
				w.done = make(chan struct{})
			}
			wake, done := w.wake, w.done
			w.mu.Unlock()
			if spins < readerSpins {
				spins++
				runtime.Gosched()
				continue
			}
			b.park(w)
			// Re-check after parking: a publisher stores the tail before it
			// looks for parked readers, and we park before loading the tail,
			// so one of us sees the other.
			if w.pendLen.Load() > 0 || w.h.Load() < b.tail.Load() {
				continue
			}
			select {
			case <-wake:
			case <-done:
			}
		}
	}
}

// batchSize is how many values an All loop takes from the watcher per lock.
const batchSize = 64

// popPendLocked takes w's next value from pend (the prefix, or values
// copied out of the ring when w fell behind), which come before the ring.
func (w *Watcher[T]) popPendLocked() (T, bool) {
	if w.pend.len() == 0 {
		var zero T
		return zero, false
	}
	v := w.pend.pop()
	w.pendLen.Add(-1)
	if w.prefixLeft.Load() > 0 {
		w.prefixLeft.Add(-1)
	}
	return v, true
}

// Stop unregisters the watcher. It is idempotent and safe from any
// goroutine, including from inside a loop over C() or All(), and while a
// Publish waits for this watcher (that Publish goes on at once). When Stop
// returns nothing more is queued: C() is closed (values already in its
// buffer stay readable) and All() ends; values not yet received otherwise
// are discarded, and not counted as dropped.
func (w *Watcher[T]) Stop() {
	b := w.b
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
	w.stopped.Store(true)
	if w.index >= 0 {
		b.remove(w)
	}
	w.pend = deque[T]{}
	w.pendLen.Store(0)
	w.prefixLeft.Store(0)
	w.closeDone()
	var wait chan struct{}
	if w.ch != nil && !w.chClosed {
		close(w.stopCh)
		if w.sending {
			w.sendDone = make(chan struct{})
			wait = w.sendDone
		} else {
			close(w.ch)
			w.chClosed = true
		}
	}
	w.roomWanted.Store(false)
	w.mu.Unlock()
	b.mu.Unlock()
	b.signalRoom()
	if wait != nil {
		<-wait
	}
}

// end marks w ended by Shutdown. No publisher is active. Called with w.mu
// held.
func (w *Watcher[T]) end() {
	w.ended = true
	if w.ch != nil && !w.chClosed {
		close(w.ch)
		w.chClosed = true
	}
	w.closeDone()
}

func (w *Watcher[T]) closeDone() {
	if w.done != nil && !w.doneClosed {
		close(w.done)
	}
	w.doneClosed = true
}
