package broadcast

import "iter"

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
	b := w.b
	var batch []T
	defer func() { clear(batch) }()
	spins := 0
	for {
		w.mu.Lock()
		if w.stopped.Load() {
			w.mu.Unlock()
			return
		}
		if ch := w.ch; ch != nil {
			w.mu.Unlock()
			w.readChan(ch, yield)
			return
		}
		if it, ok := w.popPendLocked(); ok {
			w.mu.Unlock()
			spins = 0
			// Taking a value from pend makes room as taking one from the
			// ring does: a publisher may be waiting for it (a Block
			// watcher whose queue was set aside in pend).
			w.signalRoomIfWanted()
			if !yield(it.seq, it.v) {
				return
			}
			continue
		}
		if h, t := w.h.Load(), b.seq(); h < t {
			if batch == nil {
				batch = make([]T, 0, batchSize)
			}
			batch = w.copyBatchLocked(batch, h, t) // releases w.mu
			spins = 0
			if !w.claimBatch(batch, h, yield) {
				return
			}
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

// readChan yields the values of w's channel, for All and Seq after C().
func (w *Watcher[T]) readChan(ch <-chan T, yield func(uint64, T) bool) {
	for v := range ch {
		if w.stopped.Load() || !yield(0, v) {
			return
		}
	}
}

// copyBatchLocked copies up to batchSize values of w's ring segment [h, t)
// into batch, under w.mu (publishers change the segment only under it),
// and releases w.mu.
func (w *Watcher[T]) copyBatchLocked(batch []T, h, t uint64) []T {
	r := w.b.ring.Load()
	n := min(t-h, batchSize)
	batch = batch[:0]
	for i := range n {
		batch = append(batch, r.buf[(h+i)&r.mask])
	}
	w.mu.Unlock()
	return batch
}

// claimBatch yields the values of batch, copied from the ring at h, each
// claimed just before it is yielded by moving w.h past it with a CAS: until
// then it stays queued, visible to every other reader and to publishers. A
// failed CAS means someone else moved h (another reader, a publisher
// applying a policy, C), so the rest of the batch is stale: the caller
// starts over. It reports false when yield did.
func (w *Watcher[T]) claimBatch(batch []T, h uint64, yield func(uint64, T) bool) bool {
	defer clear(batch)
	for i, v := range batch {
		q := h + uint64(i)
		if w.stopped.Load() || !w.h.CompareAndSwap(q, q+1) {
			return true
		}
		w.signalRoomIfWanted()
		if !yield(q+1, v) {
			return false
		}
	}
	return true
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
