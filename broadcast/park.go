package broadcast

import "runtime"

// park records that w's reader waits for a value.
func (b *Broadcaster[T]) park(w *Watcher[T]) {
	b.pmu.Lock()
	if !w.parked {
		w.parked = true
		b.parked = append(b.parked, w)
		b.nParked.Store(int32(len(b.parked)))
	}
	b.pmu.Unlock()
}

// unpark takes w off the parked list, so that a stopped watcher is not
// kept alive by it. Called with b.mu and w.mu held (lock order b.mu, w.mu,
// pmu). O(parked readers).
func (b *Broadcaster[T]) unpark(w *Watcher[T]) {
	b.pmu.Lock()
	if w.parked {
		w.parked = false
		for i, p := range b.parked {
			if p == w {
				last := len(b.parked) - 1
				b.parked[i] = b.parked[last]
				b.parked[last] = nil
				b.parked = b.parked[:last]
				break
			}
		}
		b.nParked.Store(int32(len(b.parked)))
	}
	b.pmu.Unlock()
}

// wakeParked wakes every parked reader. Publishers call it after each
// commit; it costs one atomic load when nobody is parked.
func (b *Broadcaster[T]) wakeParked() {
	if b.nParked.Load() == 0 {
		return
	}
	b.pmu.Lock()
	for i, w := range b.parked {
		w.parked = false
		if w.fwdPending.Load() && w.fwdPending.CompareAndSwap(true, false) {
			// A C() channel whose forwarder is not running yet: values
			// arrived, start it. Shutdown takes charge once noSpawn is set.
			if !b.noSpawn {
				b.fwd.Add(1)
				go w.forward()
			}
		} else {
			w.wakeLocked()
		}
		b.parked[i] = nil
	}
	b.parked = b.parked[:0]
	b.nParked.Store(0)
	b.pmu.Unlock()
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
