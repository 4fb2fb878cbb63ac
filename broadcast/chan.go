package broadcast

import "runtime"

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
		w.closedChanLocked()
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
	defer w.b.fwd.Done()
	spins := 0
	var poll prefixPoll
	defer poll.stop()
	for {
		w.mu.Lock()
		if w.exitLocked() {
			w.mu.Unlock()
			return
		}
		v, full, moved := w.fillLocked(true)
		if moved {
			spins = 0
			w.signalRoomIfWanted()
		}
		if full {
			if w.sendHeld(v) { // releases w.mu
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
			poll.wait(stop, done)
			continue
		}
		poll.reset()
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

// exitLocked reports whether the forwarder must exit, closing ch if it is
// its to close: w is stopped, or Shutdown's ctx ended (then what is still
// queued outside the channel is dropped, counted). Called with w.mu held.
func (w *Watcher[T]) exitLocked() bool {
	if w.stopped.Load() {
		if !w.directSending {
			// Else the publisher blocked in sendDirect closes ch when its
			// send resolves (Stop handed it the close).
			w.closeChLocked()
		}
		return true
	}
	if w.ended && isClosed(w.b.abort) {
		w.dropQueuedLocked()
		w.closeChLocked()
		return true
	}
	return false
}

// sendHeld sends v, claimed and counted as held, blocking outside every
// lock until the reader takes it, Stop, or Shutdown's deadline (then v is
// dropped, counted). Called with w.mu held; returns with it released, and
// whether v was sent.
func (w *Watcher[T]) sendHeld(v T) bool {
	b := w.b
	ch, stop := w.ch, w.stopCh
	w.mu.Unlock()
	if testHookHeld != nil {
		testHookHeld()
	}
	sent, aborted := false, false
	select {
	case ch <- v:
		sent = true
		// Counted in the channel now (or received); clear held before
		// taking w.mu, which a DropOldest publisher may hold while it waits
		// for this send (discardOldestLocked).
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
	return sent
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
				if w.sendBatchLocked(r, h, min(room, t-h)) {
					moved = true
				}
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

// sendBatchLocked claims the n ring values from h with one CAS and sends
// them into ch, which has room for them: only the forwarder sends to ch
// (under w.mu) and the reader only takes, so every send succeeds. It
// reports false if the CAS failed (another reader moved h). The batch is
// read from the ring after the CAS, so its first slot is pinned first: a
// publisher about to overwrite it must attend to w, which takes w.mu and
// so waits for this batch (an unpinned batch got values a lap newer).
// Called by the forwarder with w.mu held.
func (w *Watcher[T]) sendBatchLocked(r *ring[T], h, n uint64) bool {
	w.pinned.Store(h + 1)
	w.held.Store(int32(n))
	w.npClaimed.Add(n)
	if !w.h.CompareAndSwap(h, h+n) {
		w.npClaimed.Add(^(n - 1))
		w.held.Store(0)
		w.pinned.Store(0)
		return false
	}
	if testHookBatch != nil {
		testHookBatch(h, n)
	}
	for i := range n {
		w.ch <- r.buf[(h+i)&r.mask]
	}
	w.held.Store(0)
	w.pinned.Store(0)
	return true
}

// directLocked reports whether w, full for seq s, holds its whole queue in
// its channel, with its forwarder idle: then nobody but the publisher can
// learn that the reader made room, by a blocked send. Called with w.mu held.
func (w *Watcher[T]) directLocked(s uint64) bool {
	return w.chp.Load() != nil && !w.chClosed && w.held.Load() == 0 &&
		w.pend.len() == 0 && w.h.Load() == s
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

// testHookBatch, if set (by tests only), runs when a forwarder has claimed
// a batch of n ring values from seq h and before it reads them.
var testHookBatch func(h, n uint64)

// testHookHeld, if set (by tests only), runs when a forwarder has claimed
// a value as held and let go of w.mu, before its blocking send.
var testHookHeld func()

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

// closedChanLocked makes C()'s channel after Shutdown, when no goroutine
// may start: the channel holds what is queued (values All loops hold
// included), and is closed. Called with b.mu and w.mu held.
func (w *Watcher[T]) closedChanLocked() {
	b := w.b
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
}
