package broadcast

import (
	"context"
	"iter"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// A Watcher receives the values published after it registered, in order,
// under its policy. Read it through [Watcher.C] or [Watcher.All]; each value
// goes to exactly one reader. Stop it with [Watcher.Stop] when done: a
// watcher nobody reads and nobody stops holds its queue (and, under Block,
// makes publishers wait) until the broadcaster shuts down. Dropping the
// last reference to a watcher is not Stop: the broadcaster keeps it
// registered, and it is not garbage collected, until Stop or Shutdown.
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
	pend       deque[item[T]] // values taken out of the ring (or the prefix, or a replay), in order
	ended      bool           // Shutdown: readers drain what is queued, then end
	wake       chan struct{}
	waiting    atomic.Int32  // goroutines waiting on wake, or about to (see awaitValue)
	passes     atomic.Int32  // how many more the current wake-up token is to reach
	done       chan struct{} // closed when w ends (stopped or shut down)
	doneClosed bool

	// Channel mode, from the first call of C: a forwarding goroutine moves
	// the queue into ch, which is small (see chanCap). The queue is then
	// ch, plus the value the forwarder holds, plus pend and the ring
	// segment as before.
	ch             chan T
	chClosed       bool
	stopCh         chan struct{} // closed by Stop: releases a blocked send
	sendDone       chan struct{} // closed when a blocked send has resolved (Stop waits)
	sendDoneClosed bool
	directSending  bool // a publisher is blocked in sendDirect

	// Read without mu by publishers: the channel (nil before C), whether the
	// forwarder holds a claimed value, and how many non-prefix values it
	// has claimed in all. See chanQueued.
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

// claimToLocked moves h to seq t (if it is behind), with a CAS, since All
// loops claim values without w.mu, and returns where h was: w has taken
// [returned, t) out of the ring.
func (w *Watcher[T]) claimToLocked(t uint64) uint64 {
	h := w.h.Load()
	for h < t && !w.h.CompareAndSwap(h, t) {
		h = w.h.Load()
	}
	return min(h, t)
}

// clearPendLocked empties w's private queue.
func (w *Watcher[T]) clearPendLocked() {
	w.pend = deque[item[T]]{}
	w.pendLen.Store(0)
	w.prefixLeft.Store(0)
}

// settleLocked copies w's ring segment [h, s) into pend, so that the ring
// may overwrite it or so that seq s can be skipped.
func (w *Watcher[T]) settleLocked(s uint64, r *ring[T]) {
	// All loops claim values with a CAS on h without w.mu: move h first,
	// then copy what we took.
	for h := w.claimToLocked(s); h < s; h++ {
		w.pend.push(item[T]{seq: h + 1, v: r.buf[h&r.mask]})
	}
	w.pendLen.Store(int64(w.pend.len()))
}

// attendLocked applies w's policy if w is full for seq s, and copies its
// segment out of the ring if seq s would overwrite it. Called by the
// committing publisher with b.mu and w.mu held.
func (w *Watcher[T]) attendLocked(s uint64, r *ring[T], ws *waitState) {
	if w.h.Load() > s {
		return // the publisher already sent s to w directly (sendDirect)
	}
	if w.queuedLocked(s) >= w.queueLen {
		switch {
		case w.policy.kind == kindDropOldest:
			if w.discardOldestLocked(s) {
				w.drop()
				break
			}
			// Nothing older can be taken (it is in the forwarder's hands):
			// seq s is not queued for w, as under Drop.
			w.settleLocked(s, r)
			w.h.Store(s + 1)
			w.drop()
			return
		case w.policy.kind == kindEvict:
			w.evictLocked(s, r)
			return
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

// evictLocked ends w, full for seq s under Evict: s is dropped (counted),
// w keeps what it holds, moved out of the ring into pend (its cursor goes
// past every sequence number, so that it reads nothing more from the ring),
// and ends as at Shutdown: its readers take what it holds, then its loops
// end and its channel closes. The caller unregisters it. Called by the
// committing publisher with b.mu and w.mu held.
func (w *Watcher[T]) evictLocked(s uint64, r *ring[T]) {
	w.drop()
	w.settleLocked(s, r)
	w.h.Store(math.MaxUint64)
	w.evicted = true
	if w.err == nil {
		w.err = ErrEvicted
	}
	w.end()
	w.b.unpark(w)
}

// discardOldestLocked removes w's oldest non-prefix value for DropOldest:
// from the front of its channel if that is where it is, else from pend or
// the head of the ring segment. It reports false if it found none it could
// take: the oldest is the one a forwarder holds in a blocked send, with
// nothing behind it outside the channel.
func (w *Watcher[T]) discardOldestLocked(s uint64) bool {
	if p := w.chp.Load(); p != nil && !w.chClosed {
		ch := *p
		held := w.held.Load()
		x := uint64(len(ch)) + uint64(held)
		np := w.npClaimed.Load()
		switch {
		case x > 0 && np >= x:
			// Everything in flight is non-prefix: the front is the oldest.
			// A blocked forwarder's value moves into the freed slot.
			select {
			case <-ch:
				return true
			default: // the channel is empty: a reader, or discards, emptied it
			}
			if held > 0 {
				// Then the oldest may be the value the forwarder holds, not
				// one in pend or the ring, which are newer: it is on its
				// way into the channel, which has room, and the send
				// completes as soon as the forwarder runs, which then
				// clears held before it takes w.mu. (Or the send completed
				// already and the value went the way of the channel's
				// others; held is cleared as soon as the forwarder runs.)
				// Wait for that, and take the value from the channel if it
				// is there; else the oldest is in pend or the ring. If Stop
				// or Shutdown's deadline calls the send off, the new value
				// is dropped instead (attendLocked).
				for w.held.Load() > 0 {
					select {
					case <-w.stopCh:
						return false
					case <-w.b.abort:
						return false
					default:
						runtime.Gosched()
					}
				}
				select {
				case <-ch:
					return true
				default:
				}
			}
		}
	}
	if np := int(w.pendLen.Load() - w.prefixLeft.Load()); np > 0 {
		w.pend.removeAt(int(w.prefixLeft.Load()))
		w.pendLen.Add(-1)
		return true
	}
	if h := w.h.Load(); h < s && w.h.CompareAndSwap(h, h+1) {
		return true // the oldest is the head of the ring segment
	}
	return false
}

// C returns the watcher's channel: values in order; closed when the watcher
// ends (Stop, or Shutdown after the queued values). Every call returns the
// same channel.
//
// The first call switches the watcher to channel mode. The channel is small
// (up to [ChannelBuffer] values) and a goroutine, started when the first
// value arrives, forwards the queue into it in batches; the rest of the
// queue stays in the broadcaster's shared ring, so an idle watcher costs a
// few kilobytes after C, not its whole queue. Queue length and policy are
// kept exactly as for [Watcher.All]: values in the channel count against
// the queue length. Because the forwarder must hand the queue over before
// the channel is closed, Shutdown waits for C readers to take what does not
// fit in the channel (see [Broadcaster.Shutdown]).
//
// Two approximations, both only while a reader is receiving: under [Block]
// and [BlockFor] after WatchWithPrefix, when queue length plus prefix fit
// in the channel, the channel may hold up to len(prefix) values beyond the
// queue length once the prefix has been read (a channel cannot tell its
// sender when a value was received); and under [DropOldest], when the
// oldest value is the one the forwarder is handing over as Stop or
// Shutdown's deadline calls the hand-over off, the new value is dropped
// instead. A watcher that does not read holds exactly its queue: the last
// values published.
func (w *Watcher[T]) C() <-chan T {
	w.mustBeMade()
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
		w.chp.Store(&w.ch)
		return w.ch
	}
	if w.ended {
		// After Shutdown no goroutine may start: the channel holds what is
		// queued (values All loops hold included), and is closed.
		w.ch = make(chan T, w.pend.len()+w.queuedLocked(b.seq()))
		for w.pend.len() > 0 {
			w.ch <- w.pend.pop().v
		}
		t, r := b.seq(), b.ring.Load()
		for h := w.claimToLocked(t); h < t; h++ {
			w.ch <- r.buf[h&r.mask]
		}
		w.clearPendLocked()
		close(w.ch)
		w.chClosed = true
		w.chp.Store(&w.ch)
		return w.ch
	}
	w.ch = make(chan T, min(ChannelBuffer, w.queueLen+w.prefixLen))
	w.stopCh = make(chan struct{})
	w.chp.Store(&w.ch)
	if w.wake == nil {
		w.wake = make(chan struct{}, 1)
		w.done = make(chan struct{})
	} else {
		// All loops parked on w: they read the channel from now on.
		w.wakeLocked()
	}
	if w.pend.len() > 0 || w.h.Load() < b.seq() {
		w.startForwarderLocked()
	} else {
		// Start the forwarder when the first value arrives: the publisher's
		// wake-up of parked readers does it.
		w.fwdPending.Store(true)
		b.park(w)
	}
	return w.ch
}

// How often a DropOldest forwarder looks whether its reader has taken the
// prefix (prefixGateLocked): from 50µs, doubling up to 10ms while it has not.
const (
	minPrefixPoll = 50 * time.Microsecond
	maxPrefixPoll = 10 * time.Millisecond
)

// ChannelBuffer is the most values a [Watcher.C] channel buffers; the rest
// of a watcher's queue waits in the broadcaster. 64 values per hand-over
// amortize the reader's wake-up (BenchmarkFanout/read=C) while keeping an
// idle watcher's channel at 64 values (BenchmarkIdleWatcher in bench/).
const ChannelBuffer = 64

// startForwarderLocked starts w's forwarder. Called with w.mu held, before
// Shutdown has ended w.
func (w *Watcher[T]) startForwarderLocked() {
	w.fwdPending.Store(false)
	w.b.fwd.Add(1)
	go w.forward()
}

// forward is the goroutine behind C: it moves w's queue (pend first, then
// the ring segment) into the channel, without blocking under w.mu while
// the channel has room, and parks when caught up, as an All loop does.
// When the channel is full it claims the next value and blocks sending it,
// outside every lock; the reader's receive completes that send, which is
// how a waiting Block publisher learns that there is room. It exits when w
// is stopped, or, after Shutdown ended w, once it has handed everything
// over (or dropped it, counted, when Shutdown's ctx ends), closing ch.
func (w *Watcher[T]) forward() {
	b := w.b
	defer b.fwd.Done()
	spins := 0
	var poll *time.Timer
	pollWait := minPrefixPoll
	for {
		w.mu.Lock()
		if w.stopped.Load() {
			if !w.directSending {
				// Else the publisher blocked in sendDirect closes ch
				// when its send resolves (Stop handed it the close).
				w.closeChLocked()
			}
			w.mu.Unlock()
			return
		}
		if w.ended && isClosed(b.abort) {
			w.dropQueuedLocked()
			w.closeChLocked()
			w.mu.Unlock()
			return
		}
		v, full, moved := w.fillLocked(true)
		if moved {
			spins = 0
			w.signalRoomIfWanted()
		}
		if full {
			// v is claimed and counted as held.
			ch, stop := w.ch, w.stopCh
			w.mu.Unlock()
			if testHookHeld != nil {
				testHookHeld()
			}
			sent, aborted := false, false
			select {
			case ch <- v:
				sent = true
				// Counted in the channel now (or received); clear held
				// before taking w.mu, which a DropOldest publisher may
				// hold while it waits for this send (discardOldestLocked).
				w.held.Store(0)
			case <-stop:
			case <-b.abort:
				aborted = true
			}
			w.mu.Lock()
			w.held.Store(0)
			if aborted && !w.stopped.Load() {
				w.drop()
			}
			w.sendResolvedLocked()
			w.mu.Unlock()
			if sent {
				spins = 0
				w.signalRoomIfWanted()
				// The reader's first receive completed that send; let it
				// take more before refilling, or every receive would wake
				// us for one value (a hand-over per value instead of per
				// batch; docs/design.md has the figures).
				runtime.Gosched()
			}
			continue
		}
		if w.prefixGateLocked() {
			// Poll until the reader has taken the prefix: nothing signals
			// a receive from a channel that is not full. Only DropOldest
			// watchers with an unread prefix in C() do this.
			stop, done := w.stopCh, w.done
			w.mu.Unlock()
			if poll == nil {
				poll = time.NewTimer(pollWait)
				defer poll.Stop()
			} else {
				poll.Reset(pollWait)
			}
			select {
			case <-poll.C:
			case <-stop:
			case <-done:
			}
			pollWait = min(2*pollWait, maxPrefixPoll)
			continue
		}
		pollWait = minPrefixPoll
		if w.ended {
			w.closeChLocked()
			w.mu.Unlock()
			return
		}
		wake, done := w.wake, w.done
		w.mu.Unlock()
		w.awaitValue(wake, done, &spins)
	}
}

// awaitValue is what a caught-up reader (an All loop or a forwarder) does
// before it looks again, without w.mu: it yields the processor readerSpins
// times, then parks until a publish, Stop or Shutdown.
func (w *Watcher[T]) awaitValue(wake chan struct{}, done <-chan struct{}, spins *int) {
	if *spins < readerSpins {
		*spins++
		runtime.Gosched()
		return
	}
	// Counted as waiting before parking, so that a wake-up that takes w
	// off the parked list counts us among those it must reach (see
	// wakeLocked).
	w.waiting.Add(1)
	w.b.park(w)
	// Re-check after parking: a publisher stores the tail before it looks
	// for parked readers, and we park before loading the tail, so one of us
	// sees the other.
	if w.pendLen.Load() > 0 || w.h.Load() < w.b.seq() {
		w.waiting.Add(-1)
		return
	}
	select {
	case <-wake:
		// A wake-up puts one token in wake, and w is on the parked list
		// once, but several goroutines may wait here (two All loops, All
		// loops and the forwarder after C()): hand the token on until it
		// has reached as many as were waiting when it was given (passes),
		// not those that came back to wait since, or idle waiters would
		// pass it round and round.
		w.waiting.Add(-1)
		if w.passes.Add(-1) > 0 {
			select {
			case wake <- struct{}{}:
			default:
			}
		}
	case <-done:
		w.waiting.Add(-1)
	}
}

// wakeLocked gives w's waiters a wake-up token, to be handed on to all of
// those waiting now (see awaitValue). Called with b.pmu or w.mu held.
func (w *Watcher[T]) wakeLocked() {
	w.passes.Store(w.waiting.Load())
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// fillLocked sends w's queued values into its channel while it has room.
// When it is full, it claims the next value, counts it as held and returns
// it with full set, for the caller to send blocking; unless claim is false
// (Stop), then it just returns. moved reports whether any
// value went into the channel. Called by the forwarder with w.mu held.
//
// Each value is first counted where it goes (held, npClaimed), then taken
// from where it was (pend, h), then sent; see attnSeq for why.
func (w *Watcher[T]) fillLocked(claim bool) (v T, full, moved bool) {
	b := w.b
	for {
		if !claim && len(w.ch) == cap(w.ch) {
			return v, false, moved
		}
		if w.prefixGateLocked() {
			return v, false, moved
		}
		if w.pend.len() > 0 {
			prefix := w.prefixLeft.Load() > 0
			w.held.Store(1)
			if !prefix {
				w.npClaimed.Add(1)
			}
			v = w.pend.pop().v
			if prefix {
				w.prefixLeft.Add(-1)
			}
			w.pendLen.Add(-1)
		} else {
			h, t := w.h.Load(), b.seq()
			if h >= t {
				var zero T
				return zero, false, moved
			}
			r := b.ring.Load()
			if room := uint64(cap(w.ch) - len(w.ch)); room > 1 {
				// Room for several: claim a batch with one CAS and send it.
				// Only we send to ch (under w.mu) and the reader only takes,
				// so every send succeeds.
				// The batch is read from the ring after the CAS, so pin its
				// first slot: a publisher about to overwrite it must attend
				// to w, which takes w.mu and so waits for this batch (a
				// batch read unpinned got values a lap newer: the soak).
				n := min(room, t-h)
				w.pinned.Store(h + 1)
				w.held.Store(int32(n))
				w.npClaimed.Add(n)
				if !w.h.CompareAndSwap(h, h+n) {
					w.npClaimed.Add(^(n - 1))
					w.held.Store(0)
					w.pinned.Store(0)
					continue
				}
				if testHookBatch != nil {
					testHookBatch(h, n)
				}
				for i := range n {
					w.ch <- r.buf[(h+i)&r.mask]
				}
				w.held.Store(0)
				w.pinned.Store(0)
				moved = true
				continue
			}
			v = r.buf[h&r.mask]
			w.held.Store(1)
			w.npClaimed.Add(1)
			if !w.h.CompareAndSwap(h, h+1) {
				// An All loop from before C claimed it.
				w.npClaimed.Add(^uint64(0))
				w.held.Store(0)
				continue
			}
		}
		select {
		case w.ch <- v:
			w.held.Store(0)
			moved = true
		default:
			return v, true, moved
		}
	}
}

// directLocked reports whether w, full for seq s, holds its whole queue in
// its channel, with its forwarder idle: then nobody but the publisher can
// learn that the reader made room, by a blocked send. Called with w.mu held.
func (w *Watcher[T]) directLocked(s uint64) bool {
	return w.chp.Load() != nil && !w.chClosed && w.held.Load() == 0 &&
		w.pend.len() == 0 && w.h.Load() == s
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

// sendResolvedLocked ends a blocked send into ch (the forwarder's or
// sendDirect's): if Stop came meanwhile, it handed the close of ch to this
// sender, and waits on sendDone.
func (w *Watcher[T]) sendResolvedLocked() {
	if w.stopped.Load() {
		w.closeChLocked()
	}
	if w.sendDone != nil && !w.sendDoneClosed {
		close(w.sendDone)
		w.sendDoneClosed = true
	}
}

// prefixGateLocked reports whether the forwarder must hold the non-prefix
// values back: under DropOldest, while prefix values are unread in the
// channel. DropOldest discards the oldest non-prefix value, and a value in
// a channel behind others cannot be taken out while a reader receives from
// the front; kept outside the channel until the prefix is read, it can.
// The forwarder polls for that (see forward); after Shutdown there is
// nothing more to discard, so it does not wait.
func (w *Watcher[T]) prefixGateLocked() bool {
	return w.policy.kind == kindDropOldest && w.prefixLen > 0 && !w.ended &&
		w.prefixLeft.Load() == 0 && w.npClaimed.Load() == 0 && len(w.ch) > 0 &&
		(w.pend.len() > 0 || w.h.Load() < w.b.seq())
}

// testHookBatch, if set (by tests only), runs when a forwarder has claimed
// a batch of n ring values from seq h and before it reads them.
var testHookBatch func(h, n uint64)

// testHookHeld, if set (by tests only), runs when a forwarder has claimed
// a value as held and let go of w.mu, before its blocking send.
var testHookHeld func()

// signalRoomIfWanted wakes a publisher waiting for w to make room.
func (w *Watcher[T]) signalRoomIfWanted() {
	if w.roomWanted.Load() && w.roomWanted.CompareAndSwap(true, false) {
		w.b.signalRoom()
	}
}

// dropQueuedLocked drops (counted) everything still queued outside w's
// channel: Shutdown's ctx ended before the reader took it.
func (w *Watcher[T]) dropQueuedLocked() {
	t := w.b.seq()
	n := uint64(w.pend.len()) + t - w.claimToLocked(t)
	w.clearPendLocked()
	w.dropped.Add(n)
	w.b.dropped.Add(n)
}

// closeChLocked closes w's channel once.
func (w *Watcher[T]) closeChLocked() {
	if w.ch != nil && !w.chClosed {
		close(w.ch)
		w.chClosed = true
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

// All returns an iterator over the watcher's values, in order. It ends when
// the watcher ends: at once after Stop, after the queued values after
// Shutdown. Breaking out of the loop leaves the watcher registered, with the
// values not yet yielded still queued; call Stop when done. A panic in the
// loop body leaves the watcher as breaking out does. Before
// [Watcher.C] is called, All reads the broadcaster's shared ring directly,
// in batches, which is the fastest way to read; after, it reads the channel.
// Several loops may run at once; each value goes to one of them.
func (w *Watcher[T]) All() iter.Seq[T] {
	w.mustBeMade()
	return func(yield func(T) bool) {
		w.read(func(_ uint64, v T) bool { return yield(v) })
	}
}

// Seq returns the same stream as [Watcher.All], each value with its
// sequence number: the n-th value the broadcaster accepted has number n,
// prefix values have 0. When a watcher receives s1 and then s2, it lost
// exactly s2-s1-1 values in between (see [Watcher.Dropped]); a reader that
// resumes with [Broadcaster.WatchFrom](last+1) misses nothing still kept.
// A channel carries no numbers: once [Watcher.C] has been called, Seq reads
// the channel, as All does, and yields 0 for each value.
func (w *Watcher[T]) Seq() iter.Seq2[uint64, T] {
	w.mustBeMade()
	return func(yield func(uint64, T) bool) { w.read(yield) }
}

// read is All and Seq: it yields w's values with their sequence numbers.
func (w *Watcher[T]) read(yield func(uint64, T) bool) {
	{
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
					if w.stopped.Load() || !yield(0, v) {
						return
					}
				}
				return
			}
			if it, ok := w.popPendLocked(); ok {
				w.mu.Unlock()
				spins = 0
				// Taking a value from pend makes room as taking one from
				// the ring does: a publisher may be waiting for it (a
				// Block watcher whose queue was set aside in pend).
				w.signalRoomIfWanted()
				if !yield(it.seq, it.v) {
					return
				}
				continue
			}
			if h, t := w.h.Load(), b.seq(); h < t {
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
					w.signalRoomIfWanted()
					if !yield(h+uint64(i)+1, v) {
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
			w.awaitValue(wake, done, &spins)
		}
	}
}

// batchSize is how many values an All loop takes from the watcher per lock.
const batchSize = 64

// popPendLocked takes w's next value from pend (the prefix, or values
// copied out of the ring when w fell behind), which come before the ring.
func (w *Watcher[T]) popPendLocked() (item[T], bool) {
	if w.pend.len() == 0 {
		return item[T]{}, false
	}
	v := w.pend.pop()
	// prefixLeft first: attnSeq reads pendLen first (see there).
	if w.prefixLeft.Load() > 0 {
		w.prefixLeft.Add(-1)
	}
	w.pendLen.Add(-1)
	return v, true
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
