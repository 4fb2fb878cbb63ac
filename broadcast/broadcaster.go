package broadcast

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// Ring sizes. The ring is shared by every watcher read through All (see
// docs/design.md); it only has to cover how far such a watcher normally lags,
// because a watcher that falls further behind gets its values copied into a
// private queue. 1024 slots cover the default queue length of 1000.
const (
	minRing = 64
	maxRing = 1024
)

// Spinning: how many times a publisher waiting for room, or a reader waiting
// for a value, yields the processor and looks again before it parks.
const (
	publisherSpins = 2
	readerSpins    = 1
)

// Stats is a snapshot of a broadcaster's counters.
//
// Published counts every value committed to the total order, including one
// whose PublishContext returned ctx.Err() or whose Publish returned
// ErrClosed after waiting (it reached the watchers that had room); it
// equals the nil-error publishes plus the true TryPublishes when no wait
// was cut short.
type Stats struct {
	Published uint64 // values accepted by Publish/PublishContext/TryPublish
	Dropped   uint64 // deliveries lost to policies, all watchers, stopped ones included
	Watchers  int    // watchers currently registered
}

// A Broadcaster fans every published value out to every registered watcher,
// in one total order, under each watcher's [Policy]. Create one with [New];
// the zero value is ready to use, as New() with no options. All methods are
// safe for concurrent use. A Broadcaster must not be copied after first
// use. Its only goroutines are the forwarders of watchers read through
// [Watcher.C], one each.
type Broadcaster[T any] struct {
	// Set once, by New or by the first use of a zero Broadcaster (ready);
	// read without locks after that.
	initOnce sync.Once
	cfg      config
	closedCh chan struct{} // closed when Shutdown begins: wakes turn waiters
	abort    chan struct{} // closed when Shutdown's ctx ends: waits give up
	roomCh   chan struct{} // cap 1: a waiting publisher should re-check

	// Atomics, read without locks. tailw packs the next sequence number
	// (tailw >> 1, also the count of values published) with slowBit, set
	// while watchers exist, Shutdown began or history is kept. With the
	// bit clear, Publish has nobody to deliver to and only moves the
	// sequence, with one CAS and no lock (docs/design.md says what it
	// saves). tailw, ring and nBlockFor are written under mu (an idle
	// publish excepted: its CAS fails once the bit is set).
	tailw     atomic.Uint64
	ring      atomic.Pointer[ring[T]] // nil until the first watcher
	dropped   atomic.Uint64
	nBlockFor atomic.Int32 // registered BlockFor watchers

	// mu guards these and serializes commits: the write of a value into
	// the ring, the tail increment and the decisions for full watchers
	// happen under mu, so every watcher sees one order. mu is never held
	// while waiting: a publisher that has to wait for a Block watcher marks
	// the broadcaster busy, unlocks, waits, and relocks.
	mu        sync.Mutex
	closed    bool          // Shutdown began
	busy      bool          // a publisher is waiting; others queue on turn
	turn      chan struct{} // closed when busy clears (nil if nobody waits)
	watchers  []*Watcher[T] // every registered watcher; each reads the ring
	attn      uint64        // no watcher needs attention before this seq
	direct    []*Watcher[T] // scratch: full C() watchers a publish sends to directly
	nWatchers int
	shutting  bool
	shutDone  chan struct{} // closed when the first Shutdown has finished
	abortOnce sync.Once     // closes abort

	// fwd counts the forwarding goroutines of C() channels (chan.go);
	// Shutdown waits for them.
	fwd sync.WaitGroup

	// pmu guards these: the watchers whose reader is waiting for a value
	// (publishers wake only those, and only when nParked, written under
	// pmu, says there are any), and noSpawn, set by Shutdown once it has
	// taken charge of every watcher's forwarder.
	pmu     sync.Mutex
	parked  []*Watcher[T]
	nParked atomic.Int32
	noSpawn bool
}

type ring[T any] struct {
	buf  []T
	mask uint64
}

// New returns a broadcaster. opts set the defaults for its watchers: queue
// length [DefaultQueueLength] and policy [Drop] unless given.
func New[T any](opts ...Option) *Broadcaster[T] {
	b := &Broadcaster[T]{cfg: defaultConfig()}
	b.cfg.inNew = true
	b.cfg.apply(opts)
	b.cfg.inNew = false
	b.ready()
	return b
}

// ready makes, once, what a Broadcaster needs beyond its zero value: New
// calls it, and so does the first Watch or Shutdown of a zero Broadcaster,
// which then behaves as New() with no options. (Publish before that only
// counts, as with no watchers.)
func (b *Broadcaster[T]) ready() {
	b.initOnce.Do(func() {
		if b.cfg.queueLen == 0 {
			b.cfg = defaultConfig()
		}
		b.attn = math.MaxUint64
		b.closedCh = make(chan struct{})
		b.abort = make(chan struct{})
		b.roomCh = make(chan struct{}, 1)
		if b.cfg.history > 0 {
			// Every publish writes the ring, watched or not.
			b.ensureRing(0)
			b.tailw.Or(slowBit)
		}
	})
}

func (b *Broadcaster[T]) ringSize() uint64 {
	if r := b.ring.Load(); r != nil {
		return uint64(len(r.buf))
	}
	return 0
}

// ensureRing makes the ring big enough for queue length n. Called with b.mu
// held. Readers load the tail before the ring pointer, so a reader that sees
// a value committed into a new ring also sees the new ring.
func (b *Broadcaster[T]) ensureRing(n int) {
	want := uint64(minRing)
	for want < uint64(n)+1 && want < maxRing {
		want <<= 1
	}
	for want < uint64(b.cfg.history)+1 {
		want <<= 1 // WithHistory: the last n values stay in the ring
	}
	old := b.ring.Load()
	if old != nil && uint64(len(old.buf)) >= want {
		return
	}
	nr := &ring[T]{buf: make([]T, want), mask: want - 1}
	if old != nil {
		t := b.seq()
		n := min(t, uint64(len(old.buf)))
		for seq := t - n; seq < t; seq++ {
			nr.buf[seq&nr.mask] = old.buf[seq&old.mask]
		}
	}
	b.ring.Store(nr)
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
func (b *Broadcaster[T]) WatchFrom(seq uint64, opts ...Option) (*Watcher[T], error) {
	return b.watch(nil, &seq, opts)
}

// replayLocked copies the kept values numbered from and later into w's
// private queue as exempt values (as a prefix is), or returns an error
// wrapping ErrOutOfRange. Called with b.mu held, so that no value is
// committed between the replay and the registration. The copy is the price
// of this core: publishers wait for it (BenchmarkWatchFrom; figures in
// docs/bench-resume.md).
func (b *Broadcaster[T]) replayLocked(w *Watcher[T], from uint64) error {
	last := b.seq()
	oldest := last + 1
	if n := uint64(b.cfg.history); n > 0 {
		oldest = max(last, n) - n + 1 // the last n values, or all of them
	}
	if from == 0 {
		from = oldest
	}
	if from < oldest || from > last+1 {
		return fmt.Errorf("%w: %d (kept: %d to %d)", ErrOutOfRange, from, oldest, last)
	}
	r := b.ring.Load()
	items := make([]item[T], 0, last+1-from)
	for q := from; q <= last; q++ {
		items = append(items, item[T]{seq: q, v: r.buf[(q-1)&r.mask]})
	}
	w.pend.adopt(items)
	k := int64(last + 1 - from)
	w.pendLen.Store(k)
	w.prefixLeft.Store(k)
	w.prefixLen = int(k)
	return nil
}

func (b *Broadcaster[T]) watch(prefix []T, from *uint64, opts []Option) (*Watcher[T], error) {
	b.ready()
	cfg := b.cfg
	cfg.apply(opts)
	if cfg.ctx != nil && cfg.ctx.Err() != nil {
		return nil, context.Cause(cfg.ctx)
	}
	w := &Watcher[T]{b: b, queueLen: cfg.queueLen, policy: cfg.policy, prefixLen: len(prefix)}
	if len(prefix) > 0 {
		items := make([]item[T], len(prefix))
		for i, v := range prefix {
			items[i].v = v
		}
		w.pend.init(items)
		w.pendLen.Store(int64(len(prefix)))
		w.prefixLeft.Store(int64(len(prefix)))
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, ErrClosed
	}
	if from != nil {
		if err := b.replayLocked(w, *from); err != nil {
			b.mu.Unlock()
			return nil, err
		}
	}
	b.ensureRing(cfg.queueLen)
	b.tailw.Or(slowBit) // from here Publish takes mu, so the seq is stable
	w.h.Store(b.seq())
	w.index = len(b.watchers)
	b.watchers = append(b.watchers, w)
	b.nWatchers++
	if w.policy.kind == kindBlockFor {
		b.nBlockFor.Add(1)
	}
	b.attn = min(b.attn, w.attnSeq(b.ringSize()))
	if ctx := cfg.ctx; ctx != nil {
		// Registered under b.mu, so that Shutdown, which takes every
		// watcher under b.mu, finds it and can release it.
		after := make(chan struct{})
		w.mu.Lock()
		w.ctxAfter = after
		w.ctxStop = context.AfterFunc(ctx, func() {
			defer close(after)
			w.stopWith(context.Cause(ctx))
		})
		w.mu.Unlock()
	}
	b.mu.Unlock()
	return w, nil
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
	n := b.nWatchers
	b.mu.Unlock()
	return Stats{Published: b.seq(), Dropped: b.dropped.Load(), Watchers: n}
}

// abortWaits makes every waiting publisher and forwarder give up: Shutdown's
// ctx ended.
func (b *Broadcaster[T]) abortWaits() {
	b.abortOnce.Do(func() { close(b.abort) })
}

// signalRoom tells a waiting publisher to re-check.
func (b *Broadcaster[T]) signalRoom() {
	select {
	case b.roomCh <- struct{}{}:
	default:
	}
}
