package broadcast

import "runtime"

// ChannelBuffer bounds how many values a watcher read through [Watcher.C]
// has in flight beyond its queue: in its channel, plus the one a goroutine
// filling the channel may be handing over.
const ChannelBuffer = 64

// fwdState says who fills a watcher's channel after C().
type fwdState uint8

const (
	fwdNone    fwdState = iota // C() not called
	fwdIdle                    // no goroutine: publishers hand values over (pumpLocked)
	fwdRunning                 // the forwarder goroutine fills the channel
	fwdExited                  // ch is closed
)

// C returns the watcher's channel: values in order; closed when the watcher
// ends (Stop, or Shutdown after the queued values). Every call returns the
// same channel.
//
// While the channel is empty, a publisher puts the new values in it
// itself, so a reader that keeps up gets each value with no goroutine in
// between. When the reader lags, a goroutine of the watcher (started the
// first time, parked when idle) fills the channel in batches, holding the
// next value in a blocked send when the channel is full. The channel holds
// fewer than [ChannelBuffer] values and that goroutine one more, so a
// watcher read through C may hold up to min(ChannelBuffer, queue length)
// values beyond its queue length; they are never dropped, and
// [Watcher.Len] counts them. Because the queue must be handed over before
// the channel is closed, Shutdown waits for C readers to take what does
// not fit in the channel (see [Broadcaster.Shutdown]).
func (w *Watcher[T]) C() <-chan T {
	w.made()
	w.mu.Lock()
	if w.ch != nil {
		defer w.mu.Unlock()
		return w.ch
	}
	w.makeChanLocked()
	ch := w.ch
	w.mu.Unlock()
	w.b.wakeParked() // All loops waiting on w read the channel from now on
	return ch
}

// makeChanLocked makes w's channel for the first C(). Called with mu held.
func (w *Watcher[T]) makeChanLocked() {
	switch {
	case w.stopped.Load():
		w.ch = make(chan T)
		w.closeChLocked()
	case w.ended:
		// After Shutdown no goroutine may start: the channel is made big
		// enough for what is queued, filled and closed.
		w.ch = make(chan T, w.pend.len()+w.ringLenLocked())
		w.fwd = fwdIdle
		w.fillLocked(nil)
		w.closeChLocked()
	default:
		w.ch = make(chan T, min(ChannelBuffer, w.queueLen)-1)
		w.quit = make(chan struct{})
		w.starter = &waiter[T]{start: w}
		w.fwd = fwdIdle
		w.changedLocked()
		w.deliverLocked(nil)
	}
}

// ringLenLocked returns the length of w's ring segment.
func (w *Watcher[T]) ringLenLocked() int {
	if h, t := w.next.Load(), w.b.tail(); h <= t {
		return int(t + 1 - h)
	}
	return 0
}

// queuedLocked reports whether values wait for w outside its channel.
func (w *Watcher[T]) queuedLocked() bool {
	return w.pend.len() > 0 || w.next.Load() <= w.b.tail()
}

// deliver is a publish's wake-up of a C() watcher whose forwarder is idle:
// again is that wake-up's chain of starters to park again.
func (w *Watcher[T]) deliver(again *chain[T]) {
	w.mu.Lock()
	w.starter.parked = false // a waker took it off the list
	if w.fwd == fwdIdle && !w.ended {
		w.deliverLocked(again)
	}
	w.mu.Unlock()
}

// deliverLocked hands what is queued for w over to its channel
// (handOverLocked), and gives what remains to the forwarder, started or
// woken here. Called with mu held and fwd == fwdIdle.
func (w *Watcher[T]) deliverLocked(again *chain[T]) {
	if w.handOverLocked(again) {
		w.runForwarderLocked()
	}
}

// handOverLocked puts what is queued for w into its channel if the channel
// is empty (the reader keeps up), and reports whether values remain, which
// are then the forwarder's: a reader that lags gets them in batches
// instead of a wake-up per publish. With nothing left it parks w's starter
// again, so that the next publish calls deliver. Called with mu held and
// fwd == fwdIdle: nobody else sends on ch meanwhile.
//
// From a publish's wake-up the starter goes on that wake-up's chain
// (again), which wakeParked pushes and then looks after. Otherwise it is
// parked before the last look at the tail: a publisher stores the tail
// before it takes the parked list, so either this sees its value or it
// finds the starter.
func (w *Watcher[T]) handOverLocked(again *chain[T]) bool {
	for {
		if len(w.ch) == 0 {
			w.fillLocked(nil)
		}
		if w.queuedLocked() {
			return true
		}
		if again != nil {
			again.add(w.starter)
			return false
		}
		w.b.park(w.starter)
		if !w.queuedLocked() {
			return false
		}
	}
}

// fillLocked moves w's queued values into its channel, in order, as long
// as it has room, and reports how many. Sends cannot block: only the
// filler adds to ch, and readers only make room. Called with mu held, by
// whoever fills ch (fwd == fwdIdle, or the running forwarder). With buf,
// ring values are claimed a batch at a time, one CAS for what fits;
// without, one at a time (takeLocked).
//
// A batch is copied, then claimed, then sent: an All loop that began
// before C() may still claim ring values. While next is at a value and mu
// is held, its slot is not overwritten (a publisher would first have to
// visit w, under mu), and the tail is loaded before the ring (ensureRing).
func (w *Watcher[T]) fillLocked(buf *[]T) int {
	b := w.b
	moved := 0
	for room := cap(w.ch) - len(w.ch); room > 0; room = cap(w.ch) - len(w.ch) {
		if buf == nil || w.pend.len() > 0 {
			v, ok := w.takeLocked()
			if !ok {
				break
			}
			w.ch <- v
			moved++
			continue
		}
		t, h := b.tail(), w.next.Load()
		if h > t {
			break
		}
		r := b.ring.Load()
		k := min(t+1-h, uint64(room))
		*buf = r.appendTo((*buf)[:0], h, k)
		if w.next.CompareAndSwap(h, h+k) {
			for _, v := range *buf {
				w.ch <- v
			}
			moved += int(k)
		}
	}
	if moved > 0 {
		w.took()
	}
	return moved
}

// takeLocked claims w's next queued value: from pend, else from the ring
// with a CAS on next, retried when an All loop that began before C() took
// it first. It reports false when nothing is queued. Called with mu held.
func (w *Watcher[T]) takeLocked() (T, bool) {
	for {
		if it, ok := w.popLocked(); ok {
			return it.v, true
		}
		h := w.next.Load()
		if h > w.b.tail() {
			var zero T
			return zero, false
		}
		if v := w.b.ring.Load().at(h); w.next.CompareAndSwap(h, h+1) {
			return v, true
		}
	}
}

// runForwarderLocked sets the forwarder to fill the channel: it wakes the
// goroutine, or starts it the first time. Called with mu held.
func (w *Watcher[T]) runForwarderLocked() {
	w.fwd = fwdRunning
	if w.fwdDone != nil {
		select {
		case w.fwdWake <- struct{}{}:
		default:
		}
		return
	}
	w.fwdDone = make(chan struct{})
	w.fwdWake = make(chan struct{}, 1)
	b := w.b
	b.fwd.Add(1)
	b.fwdMu.Lock()
	b.fwdRun[w] = struct{}{}
	aborted := b.fwdAborted
	b.fwdMu.Unlock()
	if aborted {
		w.closeQuitLocked()
	}
	go w.forward()
}

// closeQuitLocked closes quit once: Stop, or Shutdown's abort (then w is
// not stopped). Called with mu held.
func (w *Watcher[T]) closeQuitLocked() {
	if w.quit != nil && !w.quitted {
		w.quitted = true
		close(w.quit)
	}
}

// forward is the goroutine behind C while the reader lags: it fills ch in
// batches (fillLocked) and, once ch is full, takes the next value and
// holds it (counted in held) while its send blocks. Once caught up it
// gives the channel back to the publishers (fwdIdle) and waits for
// runForwarderLocked. It exits when w is stopped, once w has ended and its
// queue is handed over (closing ch), or when Shutdown's ctx ends: then it
// drops the rest, counted. While it runs only it sends on ch, and it
// closes ch under mu: there is no send on a closed channel.
func (w *Watcher[T]) forward() {
	b := w.b
	defer b.fwd.Done()
	defer func() {
		b.fwdMu.Lock()
		delete(b.fwdRun, w)
		b.fwdMu.Unlock()
	}()
	defer close(w.fwdDone)
	var batch []T // kept across runs: no allocation per wake-up
	for spun := false; ; {
		if v, full := w.fillOrTake(&batch); full {
			sent, aborted := w.sendHeld(v)
			if aborted {
				w.idle(true) // the value in hand is dropped, counted, with the rest
				return
			}
			if sent {
				// The reader took a value from a full channel: let it
				// take more before refilling, or every receive wakes this
				// goroutine for one value, and the two contend for the
				// channel's lock.
				runtime.Gosched()
				spun = false
				continue
			}
		}
		if !spun && !w.stopped.Load() {
			// Caught up: give the publisher one turn before handing the
			// channel back, so that a busy stream stays with this
			// goroutine, in batches.
			spun = true
			runtime.Gosched()
			continue
		}
		spun = false
		if w.idle(false) {
			return
		}
		select {
		case <-w.fwdWake:
		case <-w.quit:
		}
	}
}

// sendHeld sends v, claimed and counted in held, blocking until the
// reader makes room, Stop, or Shutdown's abort (quit closed while w is
// not stopped).
func (w *Watcher[T]) sendHeld(v T) (sent, aborted bool) {
	defer w.held.Store(0)
	select {
	case w.ch <- v:
		return true, false
	case <-w.quit:
		return false, !w.stopped.Load()
	}
}

// fillOrTake fills w's channel (fillLocked, a batch at a time through
// buf) and, if values remain once it is full, claims the next one, counted
// in held, for the forwarder to send blocking, outside the lock. It
// reports false once w is stopped or nothing remains.
func (w *Watcher[T]) fillOrTake(buf *[]T) (T, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer func() { clear((*buf)[:cap(*buf)]) }() // no reference to a value stays behind
	if w.stopped.Load() {
		var zero T
		return zero, false
	}
	w.fillLocked(buf)
	v, ok := w.takeLocked()
	if ok {
		w.held.Store(1)
		w.took()
	}
	return v, ok
}

// idle is the forwarder's step once caught up: it reports true when the
// forwarder must exit (w stopped or ended, or Shutdown's ctx ended: the
// value in hand and the rest are dropped, counted), and otherwise hands
// the channel back to the publishers; it reports false then, or when
// values came in meanwhile, and the forwarder goes on.
func (w *Watcher[T]) idle(aborted bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.stopped.Load():
		w.closeChLocked()
		return true
	case aborted:
		n := 1 + w.pend.len() + w.ringLenLocked()
		w.pend = deque[item[T]]{}
		w.pendN.Store(0)
		w.pendAll.Store(0)
		w.claimTo(w.b.tail() + 1)
		w.dropN(uint64(n))
		w.b.abortLost.Store(true)
		w.closeChLocked()
		return true
	case w.ended && !w.queuedLocked():
		w.closeChLocked() // everything is handed over
		return true
	case w.queuedLocked():
		// Values came in after read looked: go on.
		w.runForwarderLocked() // leaves a token for the wait that follows
		return false
	}
	w.fwd = fwdIdle
	if w.handOverLocked(nil) {
		w.runForwarderLocked() // leaves a token for the wait that follows
	}
	return false
}

// stopForwarderLocked ends the filling of ch for Stop: with no goroutine
// sending, ch is closed now (keeping its buffer); a running forwarder is
// released from its send by quit and closes ch itself. Called with mu
// held.
func (w *Watcher[T]) stopForwarderLocked() {
	switch w.fwd {
	case fwdIdle:
		// The starter stays on the parked list until the next wake-up,
		// which finds the channel closed; a parked forwarder sees quit.
		w.closeChLocked()
		w.closeQuitLocked()
	case fwdRunning:
		w.closeQuitLocked()
	}
}

// endForwarderLocked is Shutdown's part for C(): with the forwarder idle,
// what fits goes into the channel now; the forwarder takes the rest (it
// closes ch once it is handed over), or ch is closed now. A parked
// forwarder is woken to exit. Called with mu held.
func (w *Watcher[T]) endForwarderLocked() {
	if w.fwd != fwdIdle {
		return
	}
	w.fillLocked(nil)
	if w.queuedLocked() || w.fwdDone != nil {
		w.runForwarderLocked()
		return
	}
	w.closeChLocked()
}

// closeChLocked closes ch once.
func (w *Watcher[T]) closeChLocked() {
	if w.fwd != fwdExited && w.ch != nil {
		close(w.ch)
	}
	w.fwd = fwdExited
}
