package broadcast

import (
	"iter"
	"runtime"
)

// batchSize is how many values a reader copies out of the ring per lock.
const batchSize = 64

// All returns an iterator over the watcher's values, in order. It ends when
// the watcher ends: at once after Stop, after the queued values after
// Shutdown. Breaking out of the loop leaves the watcher registered, with the
// values not yet yielded still queued; call Stop when done. A panic in the
// loop body leaves the watcher as breaking out does. Before [Watcher.C] is
// called, All reads the broadcaster's shared ring directly, in batches,
// which is the fastest way to read; after, it reads the channel. Several
// loops may run at once; each value goes to one of them.
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

// read yields w's values with their sequence numbers until yield returns
// false or w ends; once C() was called it reads w's channel.
//
// Each value is taken by exactly one reader: pend values are popped under
// mu; ring values are copied under mu, in a batch, and each is claimed just
// before it is yielded by moving next past it with a CAS. Until then it
// stays queued, counted by publishers and visible to every other reader; a
// failed CAS means someone else moved next (another reader, a publisher
// spilling or dropping, C()'s filler), and the rest of the batch is stale.
func (w *Watcher[T]) read(yield func(uint64, T) bool) {
	rd := reader[T]{w: w}
	defer func() { clear(rd.batch[:cap(rd.batch)]) }()
	for {
		if rd.idle() {
			rd.wait(rd.gen)
			continue
		}
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
		if it, ok := w.popLocked(); ok {
			w.mu.Unlock()
			w.took()
			if !yield(it.seq, it.v) {
				return
			}
			continue
		}
		if h, t := w.next.Load(), w.b.tail(); h <= t {
			if !rd.ringLocked(h, t, yield) {
				return
			}
			continue
		}
		if w.ended {
			w.mu.Unlock()
			return
		}
		rd.gen, rd.looked = w.gen.Load(), true
		w.mu.Unlock()
		rd.wait(rd.gen)
	}
}

// reader is the state of one read loop.
type reader[T any] struct {
	w      *Watcher[T]
	batch  []T        // values copied out of the ring, not yet claimed
	n      *waiter[T] // this loop's place on the parked list
	spun   bool       // yielded the processor once since it last read
	gen    uint64     // w.gen when this loop last found w caught up, under mu
	looked bool       // gen is set
}

// idle reports, from atomics alone, that w is as this loop last saw it
// caught up (gen unchanged: no Stop, end or C() since) and that nothing is
// queued: the loop may wait without taking mu. Anything else, and it looks
// under mu.
func (rd *reader[T]) idle() bool {
	w := rd.w
	return rd.looked && w.gen.Load() == rd.gen && w.pendAll.Load() == 0 && w.next.Load() > w.b.tail()
}

// ringLocked copies up to batchSize values of the segment [h, t] out of
// the ring under mu, releases mu, then claims and yields them one by one.
// It reports false if yield did. Called with mu held.
func (rd *reader[T]) ringLocked(h, t uint64, yield func(uint64, T) bool) bool {
	w := rd.w
	// The tail is loaded before the ring: the ring loaded holds every
	// value up to t that w may read (ensureRing).
	r := w.b.ring.Load()
	k := min(t+1-h, batchSize)
	if rd.batch == nil {
		rd.batch = make([]T, 0, batchSize)
	}
	rd.batch = r.appendTo(rd.batch[:0], h, k)
	w.mu.Unlock()
	// Yield once before parking only after a batch of several values: a
	// stream that busy is read in batches; one value at a time is a quiet
	// stream, whose next value is better waited for parked.
	rd.spun = k == 1
	for i, v := range rd.batch {
		q := h + uint64(i)
		if w.stopped.Load() || !w.next.CompareAndSwap(q, q+1) {
			return true // someone else moved next: look again
		}
		w.took()
		if !yield(q, v) {
			return false
		}
	}
	return true
}

// wait is what a caught-up reader does: yield the processor once (a busy
// stream has more values by then, and they are read in one batch instead
// of a wake-up per publish), then park until a publish or a change of w
// (gen, as seen under mu).
func (rd *reader[T]) wait(gen uint64) {
	if !rd.spun {
		rd.spun = true
		runtime.Gosched()
		return
	}
	rd.spun = false
	if rd.n == nil {
		rd.n = newWaiter[T]()
	}
	rd.w.await(rd.n, gen)
}

// readChan yields the values of w's channel, for All and Seq after C().
func (w *Watcher[T]) readChan(ch <-chan T, yield func(uint64, T) bool) {
	for v := range ch {
		if w.stopped.Load() || !yield(0, v) {
			return
		}
	}
}

// await waits until a publish, a change of w's state (Stop, Shutdown, C:
// gen moves) or, if it finds one, a value already queued. Called without
// locks; gen is what the caller saw under mu.
func (w *Watcher[T]) await(n *waiter[T], gen uint64) {
	b := w.b
	b.arm(n)
	// Armed before looking: a publisher stores the tail before it takes
	// the parked list, and whoever changes gen wakes the parked list after,
	// so either this sees the change or a waker takes n, armed, and leaves
	// a token. (n may be on a waker's chain, not yet pushed: that waker
	// looks at the tail after the push and wakes the list again if it
	// moved; see wakeParked.)
	if w.pendAll.Load() > 0 || w.next.Load() <= b.tail() || w.gen.Load() != gen {
		return // n stays armed: its next token is one more look
	}
	<-n.wake
}
