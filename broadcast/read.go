package broadcast

import "iter"

// batchSize is how many values a reader copies out of the ring per lock.
const batchSize = 64

// All returns an iterator over the watcher's values, in order. It ends when
// the watcher ends: at once after Stop, after the values it holds after
// Shutdown or eviction. Breaking out of the loop leaves the watcher
// registered, with the values not yet yielded still queued; call Stop when
// done. A panic in the loop body leaves the watcher as breaking out does.
// Several loops may run at once; each value goes to one of them. Once
// [Watcher.C] was called, All reads the channel.
func (w *Watcher[T]) All() iter.Seq[T] {
	w.made()
	return func(yield func(T) bool) {
		w.read(func(_ uint64, v T) bool { return yield(v) })
	}
}

// Seq returns an iterator over the watcher's values with their sequence
// numbers (see [Broadcaster.Stats]): the same stream as [Watcher.All].
// When a reader receives s1 then s2, the watcher lost exactly s2-s1-1
// values between them (counted in [Watcher.Dropped]); prefix values have
// number 0. Values that went through the channel of [Watcher.C] carry no
// number: after C() was called, Seq yields 0 for them.
func (w *Watcher[T]) Seq() iter.Seq2[uint64, T] {
	w.made()
	return func(yield func(uint64, T) bool) {
		w.read(yield)
	}
}

// read yields w's values with their sequence numbers until yield returns false
// or w ends; once C() was called it reads w's channel. Each value is taken by
// one reader: pend values are popped under mu; ring values are copied under mu,
// in a batch, and each is claimed just before it is yielded by moving next past
// it with a CAS. Until then it stays queued, counted by publishers; a failed
// CAS means someone else moved next (another reader, a publisher spilling or
// dropping, Stop, C()), and the rest of the batch is stale.
func (w *Watcher[T]) read(yield func(uint64, T) bool) {
	var batch []T
	defer func() { clear(batch) }()
	var n *waiter[T]
	for {
		w.mu.Lock()
		if w.isStopped() {
			w.mu.Unlock()
			return
		}
		if ch := w.ch; ch != nil {
			w.mu.Unlock()
			w.readChan(ch, yield)
			return
		}
		if it, ok := w.popLocked(); ok {
			w.mu.Unlock()
			w.took()
			if !yield(it.seq, it.v) {
				return
			}
			continue
		}
		h, t := w.next.Load(), w.b.tail.Load()
		if h <= t {
			batch = w.copyLocked(batch, h, t)
			w.mu.Unlock()
			if !w.yieldBatch(batch, h, yield) {
				return
			}
			// Caught up with t and nothing committed since: park at once,
			// without looking again under mu (see park). These two loads
			// keep the fast stream's path as it was: it looks again.
			if w.next.Load() <= t || w.b.tail.Load() != t {
				continue
			}
		} else {
			done := w.state.phase == ended
			w.mu.Unlock()
			if done {
				return
			}
		}
		w.b.park(&n, w, t)
	}
}

// copyLocked copies up to batchSize values of w's segment [h, t] into
// batch, with mu held: attend does not overwrite the segment meanwhile.
func (w *Watcher[T]) copyLocked(batch []T, h, t uint64) []T {
	if batch == nil {
		batch = make([]T, 0, batchSize)
	}
	return w.b.ring.Load().appendTo(batch[:0], h, min(t+1-h, batchSize))
}

// yieldBatch claims and yields the values of batch, the first numbered h,
// one by one. It reports false if yield did.
func (w *Watcher[T]) yieldBatch(batch []T, h uint64, yield func(uint64, T) bool) bool {
	for i, v := range batch {
		q := h + uint64(i)
		if !w.next.CompareAndSwap(q, q+1) {
			return true // someone else moved next: look again
		}
		w.took()
		if !yield(q, v) {
			return false
		}
	}
	return true
}

// readChan yields the values of w's channel, for All and Seq after C().
func (w *Watcher[T]) readChan(ch <-chan T, yield func(uint64, T) bool) {
	for v := range ch {
		w.mu.Lock()
		stopped := w.isStopped()
		w.mu.Unlock()
		if stopped || !yield(0, v) {
			return
		}
	}
}

// A waiter is a read loop's place among the parked ones.
type waiter[T any] struct {
	w    *Watcher[T]
	wake chan struct{} // cap 1
	next *waiter[T]    // the next parked loop; b.mu guards it while n is parked
}

func (n *waiter[T]) signal() {
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// park waits until a commit or a change of w, unless one came since the loop
// found nothing after tail t (*n: the loop's place in b.parked). Whoever
// commits or changes a watcher (Stop, an end, C()) does it with b.mu held and
// takes the parked loops concerned off b.parked before releasing it; park looks
// and parks with b.mu held: so either it sees the change or it is woken.
// Looking needs no w.mu: w's state and channel are written with b.mu held, and
// nothing is queued for w without a commit (a spill or a policy moves values
// into pend only in the commit that moves the tail), so if the tail is still t,
// w holds nothing the loop has not seen.
func (b *Broadcaster[T]) park(n **waiter[T], w *Watcher[T], t uint64) {
	if *n == nil {
		*n = &waiter[T]{w: w, wake: make(chan struct{}, 1)}
	}
	b.mu.Lock()
	idle := b.tail.Load() == t && w.state.phase == running && w.ch == nil
	if idle {
		(*n).next = b.parked
		b.parked = *n
	}
	b.mu.Unlock()
	if idle {
		<-(*n).wake
	}
}
