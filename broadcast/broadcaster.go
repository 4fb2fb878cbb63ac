package broadcast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by Publish, PublishContext, TryPublish, Watch and
// WatchWithPrefix once [Broadcaster.Shutdown] has begun.
var ErrClosed = errors.New("broadcast: broadcaster is shut down")

// ErrOutOfRange is wrapped by the error of [Broadcaster.WatchFrom] when the
// sequence number asked for is not kept: older than the oldest kept value,
// or beyond the next one.
var ErrOutOfRange = errors.New("broadcast: sequence number out of range")

// ErrEvicted is what [Watcher.Err] returns once the [Evict] policy ended the
// watcher.
var ErrEvicted = errors.New("broadcast: watcher evicted: its queue was full")

var errNilContext = errors.New("broadcast: nil Context")

// Stats is a snapshot of a broadcaster's counters.
//
// Published counts every value committed to the total order, including one
// whose PublishContext returned ctx.Err() or whose Publish returned
// ErrClosed after waiting (it reached the watchers that had room); it
// equals the nil-error publishes plus the true TryPublishes when no wait
// was cut short. It is also the sequence number of the last value.
type Stats struct {
	Published uint64 // values accepted by Publish/PublishContext/TryPublish
	Dropped   uint64 // deliveries lost to policies, all watchers, stopped ones included
	Watchers  int    // watchers currently registered
}

// A Broadcaster fans every published value out to every registered watcher,
// in one total order, under each watcher's [Policy]. Create one with [New];
// the zero value is ready to use with the default options. All methods are
// safe for concurrent use. A Broadcaster must not be copied after first use.
type Broadcaster[T any] struct {
	// Set once, by New or by the first use of a zero Broadcaster (initOnce).
	initOnce sync.Once
	cfg      config
	closedCh chan struct{} // closed when Shutdown begins: wakes turn waiters
	abort    chan struct{} // closed when Shutdown's ctx ends: waiting publishers give up
	room     chan struct{} // cap 1: the waiting publisher should look again
	fwd      sync.WaitGroup

	// Atomics, read without locks. tailw packs the sequence number of the
	// last value (tailw >> seqShift, also Stats().Published) with
	// watchedBit, gateBit and writingBit (see their constants): mu's
	// holder writes it with the gate closed; otherwise publishes do, with
	// a CAS. attnA is attn as of the last time mu's holder opened the
	// gate. ring and nBlockFor are written under mu.
	tailw     atomic.Uint64
	attnA     atomic.Uint64
	ring      atomic.Pointer[ring[T]]
	dropped   atomic.Uint64
	nBlockFor atomic.Int32

	// mu guards these and serializes commits, so that every watcher sees one
	// order. It is never held while waiting.
	mu       sync.Mutex
	watchers []*Watcher[T]
	// evictedCtx: evicted watchers whose WithContext callback may still
	// run, until Stop or Shutdown unregisters it.
	evictedCtx map[*Watcher[T]]struct{}
	attn       uint64        // no watcher needs a visit before this sequence number
	closed     bool          // Shutdown began
	busy       bool          // a publisher is waiting for room: the others wait for turn
	turn       chan struct{} // closed when busy clears; nil if nobody waits for it
	shutDone   chan struct{} // closed when the first Shutdown has finished
	abortOnce  sync.Once
	abortLost  atomic.Bool // a forwarder dropped values when Shutdown aborted it

	// fwdMu guards these: the watchers whose C() forwarder goroutine has
	// started and not exited, and whether Shutdown aborted forwarders.
	// Lock order: a watcher's mu, then fwdMu. A forwarder blocks on its
	// watcher's channels only (quit): a channel shared by every forwarder
	// would have its lock taken by each of their selects.
	fwdMu      sync.Mutex
	fwdRun     map[*Watcher[T]]struct{}
	fwdAborted bool

	// The parked list (park.go): a lock-free stack of waiting readers.
	parked atomic.Pointer[waiter[T]]
}

// The tail word's bits.
//
//   - watchedBit: watchers exist, Shutdown began, a publisher waits for
//     room, or mu's holder closed the gate. With it clear a publish only
//     counts (a CAS), or, with history, takes writingBit for the slot write
//     (idlePublish).
//   - gateBit: the gate is closed: every publish takes mu. Set with
//     watchedBit by mu's holder (lock) while it needs the tail to
//     stay still, and kept while a publisher waits for room or after
//     Shutdown began. With watchedBit set and gateBit clear, a publish
//     below the attention bound commits without mu (fastPublish).
//   - writingBit: a publish without mu is writing its slot; the tail word
//     is then the lock. lock waits for it.
const (
	watchedBit = 1
	gateBit    = 2
	writingBit = 4
	seqShift   = 3
)

// New returns a broadcaster. opts set the defaults for its watchers: queue
// length [DefaultQueueLength] and policy [Drop] unless given.
func New[T any](opts ...Option) *Broadcaster[T] {
	cfg := defaultConfig()
	cfg.inNew = true
	cfg.apply(opts)
	cfg.inNew = false
	b := &Broadcaster[T]{cfg: cfg}
	b.initOnce.Do(b.init)
	return b
}

// init makes what New makes; a zero Broadcaster gets it on first use.
func (b *Broadcaster[T]) init() {
	if b.cfg.queueLen == 0 {
		b.cfg = defaultConfig()
	}
	b.closedCh = make(chan struct{})
	b.abort = make(chan struct{})
	b.fwdRun = make(map[*Watcher[T]]struct{})
	b.evictedCtx = make(map[*Watcher[T]]struct{})
	b.room = make(chan struct{}, 1)
	b.attn = math.MaxUint64
	if b.cfg.history > 0 {
		// History lives in the ring, which every publish then writes,
		// watched or not (idlePublish).
		b.ring.Store(newRing[T](ringSize(0, b.cfg.history)))
	}
}

func (b *Broadcaster[T]) ready() { b.initOnce.Do(b.init) }

// tail returns the sequence number of the last value published.
func (b *Broadcaster[T]) tail() uint64 { return b.tailw.Load() >> seqShift }

// lock locks mu and closes the gate: until unlock, no publish runs without
// mu, so the tail, the ring and the tail word's bits are its holder's.
func (b *Broadcaster[T]) lock() {
	b.mu.Lock()
	for {
		x := b.tailw.Load()
		if x&writingBit != 0 {
			runtime.Gosched() // a publish is between its CAS and its store
			continue
		}
		const closed = watchedBit | gateBit
		if x&closed == closed || b.tailw.CompareAndSwap(x, x|closed) {
			return
		}
	}
}

// unlock opens the gate as far as the state allows, then unlocks mu:
// without watchers (and no Shutdown or waiting publisher) publishes only
// count; with watchers they commit without mu below the attention bound,
// unless a publisher waits for room (the turn) or Shutdown began. attn is
// published in attnA before the tail word, which a publish without mu
// loads (a CAS) before it reads attnA again.
func (b *Broadcaster[T]) unlock() { b.unlockAt(b.tail()) }

// unlockAt is unlock that stores tail t: a commit's tail store and the
// gate's opening are one store.
func (b *Broadcaster[T]) unlockAt(t uint64) {
	bits := uint64(0)
	switch {
	case b.closed || b.busy || b.attn <= t+1:
		// Shutdown, the turn, or the next publish is at the bound anyway:
		// the gate stays closed (and the next lock finds it so).
		bits = watchedBit | gateBit
	case len(b.watchers) > 0:
		bits = watchedBit
		if b.attnA.Load() != b.attn {
			b.attnA.Store(b.attn) // only mu's holder stores it
		}
	}
	b.tailw.Store(t<<seqShift | bits)
	b.mu.Unlock()
}

// Watch registers a watcher. It receives every value whose Publish is called
// after Watch returns, and none whose Publish returned before Watch was
// called. opts override the broadcaster's defaults for this watcher. It
// returns [ErrClosed] once Shutdown has begun. Watch never waits for
// publishers or other watchers.
func (b *Broadcaster[T]) Watch(opts ...Option) (*Watcher[T], error) {
	return b.watch(nil, nil, opts)
}

// WatchWithPrefix is [Broadcaster.Watch] whose watcher first receives the
// values of prefix, in order, and then behaves as Watch. The prefix is
// copied, and never dropped: the watcher holds the prefix plus its queue
// length. Typical use: the current state, then every change after it, with
// nothing missed or repeated in between.
func (b *Broadcaster[T]) WatchWithPrefix(prefix []T, opts ...Option) (*Watcher[T], error) {
	return b.watch(prefix, nil, opts)
}

// WatchFrom is [Broadcaster.Watch] whose watcher first receives the kept
// values (see [WithHistory]) numbered seq and later, then every later
// value, with nothing missed or repeated between: replay and registration
// are one atomic step, and the registration barrier holds for the live
// part. WatchFrom(0) replays everything kept. Replayed values, like prefix
// values, never count against the queue length and are never dropped or
// evicted. A seq older than the oldest kept value, or greater than
// Stats().Published+1, returns an error wrapping [ErrOutOfRange] and
// registers nothing. Without history use Watch: a concurrent Publish can
// make Published+1 too old.
//
// The replay is not copied: the watcher starts reading the shared ring at
// seq, so WatchFrom costs what Watch costs whatever it replays.
func (b *Broadcaster[T]) WatchFrom(seq uint64, opts ...Option) (*Watcher[T], error) {
	return b.watch(nil, &seq, opts)
}

// replayFrom returns where a WatchFrom(from) watcher starts reading the
// ring, or an error wrapping ErrOutOfRange. Called with mu held, so that
// no value is committed between this and the registration.
func (b *Broadcaster[T]) replayFrom(from uint64) (uint64, error) {
	last := b.tail()
	oldest := last + 1
	if n := uint64(b.cfg.history); n > 0 {
		oldest = max(last, n) - n + 1 // the last n values, or all of them
	}
	if from == 0 {
		from = oldest
	}
	if b.cfg.history == 0 && from != last+1 {
		return 0, fmt.Errorf("%w: %d: the broadcaster keeps no history (see WithHistory; without it use Watch)", ErrOutOfRange, from)
	}
	if from < oldest || from > last+1 {
		return 0, fmt.Errorf("%w: %d (kept: %d to %d)", ErrOutOfRange, from, oldest, last)
	}
	return from, nil
}

func (b *Broadcaster[T]) watch(prefix []T, from *uint64, opts []Option) (*Watcher[T], error) {
	b.ready()
	cfg := b.cfg
	cfg.apply(opts)
	if cfg.ctx != nil && cfg.ctx.Err() != nil {
		return nil, context.Cause(cfg.ctx)
	}
	w := &Watcher[T]{b: b, queueLen: cfg.queueLen, policy: cfg.policy}
	for _, v := range prefix {
		w.pend.push(item[T]{v: v})
	}
	w.pendAll.Store(int64(len(prefix)))

	b.lock()
	defer b.unlock()
	if b.closed {
		return nil, ErrClosed
	}
	// The gate is closed: every Publish takes mu, so the tail read below
	// stays the last value published before this watcher: the
	// registration barrier.
	w.liveFrom = b.tail() + 1
	start := w.liveFrom
	if from != nil {
		s, err := b.replayFrom(*from)
		if err != nil {
			return nil, err
		}
		start = s
	}
	b.ensureRing(cfg.queueLen)
	w.next.Store(start)
	w.index = len(b.watchers)
	b.watchers = append(b.watchers, w)
	if w.policy.kind == kindBlockFor {
		b.nBlockFor.Add(1)
	}
	b.attn = min(b.attn, w.attnSeq(b.ring.Load().size()))
	if ctx := cfg.ctx; ctx != nil {
		// Registered under b.mu, so that Shutdown, which ends every watcher
		// under b.mu, finds it and can release it.
		w.ctxAfter = make(chan struct{})
		w.ctxStop = context.AfterFunc(ctx, func() {
			defer close(w.ctxAfter)
			w.stopWith(context.Cause(ctx))
		})
	}
	return w, nil
}

// ensureRing makes the ring big enough for queue length q. Called with mu
// held. Readers load the tail before the ring pointer, and the new ring
// holds every value the old one held, so a reader sees each value it may
// read in whichever ring it loads.
func (b *Broadcaster[T]) ensureRing(q int) {
	want := ringSize(q, b.cfg.history)
	old := b.ring.Load()
	if old.size() >= want {
		return
	}
	nr := newRing[T](want)
	if old != nil {
		t := b.tail()
		for s := max(t-min(t, old.size()-1), 1); s <= t; s++ {
			nr.buf[s&nr.mask] = old.at(s)
		}
	}
	b.ring.Store(nr)
}

// remove unregisters w. Called with mu held.
func (b *Broadcaster[T]) remove(w *Watcher[T]) {
	i := w.index
	if i < 0 || i >= len(b.watchers) || b.watchers[i] != w {
		return
	}
	last := len(b.watchers) - 1
	b.watchers[i] = b.watchers[last]
	b.watchers[i].index = i
	b.watchers[last] = nil
	b.watchers = b.watchers[:last]
	w.index = -1
	if w.policy.kind == kindBlockFor {
		b.nBlockFor.Add(-1)
	}
}

// Dropped returns the number of values dropped in all, across watchers:
// Stats().Dropped, read without taking any lock, so that a caller may check
// it on every publish (to notice drops as they happen, say). A watcher's
// [Watcher.Dropped] counts each of its drops before this total does: once
// the total shows a drop, so does the watcher's count.
func (b *Broadcaster[T]) Dropped() uint64 {
	return b.dropped.Load()
}

// Stats returns a snapshot of the broadcaster's counters.
func (b *Broadcaster[T]) Stats() Stats {
	b.mu.Lock()
	n := len(b.watchers)
	b.mu.Unlock()
	return Stats{Published: b.tail(), Dropped: b.dropped.Load(), Watchers: n}
}

// signalRoom tells the waiting publisher, if any, to look again.
func (b *Broadcaster[T]) signalRoom() {
	select {
	case b.room <- struct{}{}:
	default:
	}
}

// abortWaits makes every waiting publisher give up: Shutdown's ctx ended.
func (b *Broadcaster[T]) abortWaits() {
	b.abortOnce.Do(func() { close(b.abort) })
}

// abortForwarders makes every forwarder give up: Shutdown's ctx ended. Not
// before the publishers' commits are over and every watcher has ended: a
// forwarder that gave up earlier would close its channel with a value
// still to come for it.
func (b *Broadcaster[T]) abortForwarders() {
	b.fwdMu.Lock()
	b.fwdAborted = true
	ws := make([]*Watcher[T], 0, len(b.fwdRun))
	for w := range b.fwdRun {
		ws = append(ws, w)
	}
	b.fwdMu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		w.closeQuitLocked()
		w.mu.Unlock()
	}
}
