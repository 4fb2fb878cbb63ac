package broadcast

// ChannelBuffer bounds how many values a watcher read through [Watcher.C]
// has in flight beyond its queue: in its channel, plus the one the
// goroutine filling the channel is handing over.
const ChannelBuffer = 64

// fwdState is the life of a watcher's forwarder: the goroutine behind C().
type fwdState uint8

const (
	fwdNone    fwdState = iota // C() not called
	fwdPending                 // C() called, nothing to forward yet: starts on the next publish
	fwdRunning                 // running; it closes ch when it exits
	fwdExited                  // ch is closed
)

// C returns the watcher's channel: values in order; closed when the watcher
// ends (Stop, or Shutdown after the queued values). Every call returns the
// same channel.
//
// The first call gives the watcher a goroutine, started when its first
// value arrives, that reads the watcher as [Watcher.All] does and sends
// each value into the channel. The channel holds fewer than [ChannelBuffer]
// values and the goroutine one more, so a watcher read through C may hold
// up to min(ChannelBuffer, queue length) values beyond its queue length;
// they are never dropped, and [Watcher.Len] counts them. Because that
// goroutine must hand the queue over before the channel is closed,
// Shutdown waits for C readers to take what does not fit in the channel
// (see [Broadcaster.Shutdown]).
func (w *Watcher[T]) C() <-chan T {
	w.made()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		return w.ch
	}
	switch {
	case w.stopped.Load():
		w.ch = make(chan T)
		w.closeChLocked()
	case w.ended:
		// After Shutdown no goroutine may start: the channel is made big
		// enough for what is queued, filled and closed.
		w.ch = make(chan T, w.pend.len()+w.ringLenLocked())
		for w.pend.len() > 0 {
			it, _ := w.popLocked()
			w.ch <- it.v
		}
		r, t := w.b.ring.Load(), w.b.tail()
		for q := w.claimTo(t + 1); q <= t; q++ {
			w.ch <- r.at(q)
		}
		w.closeChLocked()
	default:
		w.ch = make(chan T, min(ChannelBuffer, w.queueLen)-1)
		w.stopCh = make(chan struct{})
		w.fwdDone = make(chan struct{})
		w.kickLocked(false) // All loops parked on w read the channel from now on
		if w.pend.len() > 0 || w.next.Load() <= w.b.tail() {
			w.runForwarderLocked()
		} else {
			w.fwd = fwdPending
			w.starter = &waiter[T]{start: w}
			w.b.park(w.starter)
		}
	}
	return w.ch
}

// ringLenLocked returns the length of w's ring segment.
func (w *Watcher[T]) ringLenLocked() int {
	if h, t := w.next.Load(), w.b.tail(); h <= t {
		return int(t + 1 - h)
	}
	return 0
}

// startForwarder starts w's forwarder if it is pending: a publish woke it.
func (w *Watcher[T]) startForwarder() {
	w.mu.Lock()
	if w.fwd == fwdPending {
		w.runForwarderLocked()
	}
	w.mu.Unlock()
}

// runForwarderLocked starts the forwarder. Called with mu held, before
// Shutdown ended w (which then waits for it through b.fwd).
func (w *Watcher[T]) runForwarderLocked() {
	w.fwd = fwdRunning
	w.b.fwd.Add(1)
	go w.forward()
}

// forward is the goroutine behind C: it reads w as an All loop does and
// sends each value into ch, holding it (counted in held) while the send
// blocks. It exits when w is stopped, or once w has ended and its queue is
// handed over, or when Shutdown's ctx ends: then it drops the rest,
// counted. Only it sends on ch and it closes ch as it exits, under mu:
// there is no send on a closed channel.
func (w *Watcher[T]) forward() {
	b := w.b
	defer b.fwd.Done()
	defer close(w.fwdDone)
	aborted := false
	w.read(false, func(_ uint64, v T) bool {
		select {
		case w.ch <- v:
			return true
		default:
		}
		w.held.Store(1)
		defer w.held.Store(0)
		select {
		case w.ch <- v:
			return true
		case <-w.stopCh:
			return false
		case <-b.abort:
			aborted = true
			return false
		}
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if aborted && !w.stopped.Load() {
		// Shutdown's ctx ended: the value in hand and the rest are lost.
		n := 1 + w.pend.len() + w.ringLenLocked()
		w.pend = deque[item[T]]{}
		w.pendN.Store(0)
		w.pendAll.Store(0)
		w.claimTo(b.tail() + 1)
		w.dropN(uint64(n))
	}
	w.closeChLocked()
}

// stopForwarderLocked ends the forwarder for Stop: a pending one never
// starts, a running one is released from its send by stopCh and exits.
// Called with mu held.
func (w *Watcher[T]) stopForwarderLocked() {
	switch w.fwd {
	case fwdPending:
		// Its starter stays on the parked list until the next wake-up,
		// which finds it no longer pending.
		w.closeChLocked()
		close(w.fwdDone)
	case fwdRunning:
		close(w.stopCh)
	}
}

// endForwarderLocked is Shutdown's part for the forwarder: a pending one
// starts if values are queued (it exits once they are handed over), else
// the channel is closed now. Called with mu held.
func (w *Watcher[T]) endForwarderLocked() {
	if w.fwd != fwdPending {
		return
	}
	if w.pend.len() > 0 || w.ringLenLocked() > 0 {
		w.runForwarderLocked()
		return
	}
	w.closeChLocked()
	close(w.fwdDone)
}

// closeChLocked closes ch once.
func (w *Watcher[T]) closeChLocked() {
	if w.fwd != fwdExited && w.ch != nil {
		close(w.ch)
	}
	w.fwd = fwdExited
}
