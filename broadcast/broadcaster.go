package broadcast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
)

// ErrClosed is returned by Publish, PublishContext, TryPublish, Watch,
// WatchWithPrefix and WatchFrom once [Broadcaster.Shutdown] has begun.
var ErrClosed = errors.New("broadcast: broadcaster is shut down")

// ErrOutOfRange is wrapped by the error of [Broadcaster.WatchFrom] when the
// sequence number asked for is not kept: older than the oldest kept value,
// or beyond the next one.
var ErrOutOfRange = errors.New("broadcast: sequence number out of range")

// ErrEvicted is what [Watcher.Err] returns once [Evict] ended the watcher.
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
	cfg config // set by New, never changed; zero in a zero Broadcaster (defaults)

	// Written only with mu held, read without it: ring readers load tail,
	// then ring (see readBatch); Dropped loads dropped.
	tail    atomic.Uint64           // the sequence number of the last value
	ring    atomic.Pointer[ring[T]] // nil until the first Watch, or WithHistory
	dropped atomic.Uint64

	// mu guards the rest and serializes commits: one total order. It is
	// never held while waiting. Lock order: mu, then a watcher's mu.
	mu         sync.Mutex
	readers    []*Watcher[T]            // watchers read from the ring (All, Seq)
	chans      []*Watcher[T]            // watchers read through C(): commits send to them
	attn       uint64                   // no reader needs a visit before this sequence number (any lower bound will do: 0 in a zero Broadcaster)
	parked     *waiter[T]               // read loops waiting for a commit or a change of their watcher, newest first
	nBlockFor  int                      // watchers under BlockFor: publishes then note their start
	closed     bool                     // Shutdown began
	busy       bool                     // a publisher holds the turn: it waits for room
	turn       chan struct{}            // closed when busy clears or Shutdown begins; nil if nobody waits for it
	sending    *Watcher[T]              // the C() watcher the turn's holder is blocked sending to
	sendEnd    chan struct{}            // closed when that send ends; nil if nobody waits for it
	abort      chan struct{}            // closed when Shutdown's ctx ends: the publisher waiting for room gives up; made on first use
	shutDone   chan struct{}            // closed when the first Shutdown has finished
	evictedCtx map[*Watcher[T]]struct{} // evicted watchers whose WithContext callback may still run, until Stop or Shutdown
}

// New returns a broadcaster. opts set the defaults for its watchers: queue
// length [DefaultQueueLength] and policy [Drop] unless given.
func New[T any](opts ...Option) *Broadcaster[T] {
	cfg := defaultConfig()
	cfg.inNew = true
	cfg.apply(opts)
	cfg.inNew = false
	b := &Broadcaster[T]{cfg: cfg, attn: math.MaxUint64}
	if cfg.history > 0 {
		b.ring.Store(newRing[T](ringSize(0, cfg.history)))
	}
	return b
}

// defaults returns New's options, or the defaults for a zero Broadcaster
// (it needs nothing else before its first use; the rest is made under mu).
func (b *Broadcaster[T]) defaults() config {
	if b.cfg.queueLen == 0 {
		return defaultConfig()
	}
	return b.cfg
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
// values (see [WithHistory]) numbered seq and later, then every later value,
// with nothing missed or repeated between: replay and registration are one
// atomic step, and the registration barrier holds for the live part.
// WatchFrom(0) replays everything kept. Replayed values, like prefix values,
// never count against the queue length and are never dropped or evicted. A
// seq older than the oldest kept value, or greater than Stats().Published+1,
// returns an error wrapping [ErrOutOfRange] and registers nothing. Without
// history use Watch: a concurrent Publish can make Published+1 too old.
func (b *Broadcaster[T]) WatchFrom(seq uint64, opts ...Option) (*Watcher[T], error) {
	return b.watch(nil, &seq, opts)
}

// replayFrom returns where a WatchFrom(from) watcher starts reading the
// ring, or an error wrapping ErrOutOfRange. Called with mu held.
func (b *Broadcaster[T]) replayFrom(from uint64) (uint64, error) {
	last := b.tail.Load()
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
	cfg := b.defaults()
	cfg.apply(opts)
	if cfg.ctx != nil && cfg.ctx.Err() != nil {
		return nil, context.Cause(cfg.ctx)
	}
	w := &Watcher[T]{b: b, queueLen: cfg.queueLen, policy: cfg.policy, room: make(chan struct{}, 1)}
	for _, v := range prefix {
		w.pend.push(item[T]{v: v})
	}

	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	// Every commit holds mu, so the tail read here stays the last value
	// published before this watcher until it is registered: the
	// registration barrier.
	w.liveFrom = b.tail.Load() + 1
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
	w.index = len(b.readers)
	b.readers = append(b.readers, w)
	if w.policy.kind == kindBlockFor {
		b.nBlockFor++
	}
	b.attn = min(b.attn, w.attnSeqLocked(b.ring.Load().size())) // w is not shared yet
	if ctx := cfg.ctx; ctx != nil {
		// Registered under mu, so that Shutdown finds it and can wait for it.
		w.ctxAfter = make(chan struct{})
		w.ctxStop = context.AfterFunc(ctx, func() {
			defer close(w.ctxAfter)
			w.stopWith(context.Cause(ctx))
		})
	}
	return w, nil
}

// ensureRing makes the ring big enough for queue length q, with mu held. The
// new ring holds every value the old one held, and readers load the tail
// before the ring: each finds every value up to its tail in either ring.
func (b *Broadcaster[T]) ensureRing(q int) {
	want := ringSize(q, b.cfg.history)
	old := b.ring.Load()
	if old.size() >= want {
		return
	}
	nr := newRing[T](want)
	if old != nil {
		t := b.tail.Load()
		for s := max(t-min(t, old.size()-1), 1); s <= t; s++ {
			nr.buf[s&nr.mask] = old.at(s)
		}
	}
	b.ring.Store(nr)
}

// removeLocked unregisters w from the readers or the chans, with mu held.
func (b *Broadcaster[T]) removeLocked(w *Watcher[T]) {
	list := &b.readers
	if w.inChans {
		list = &b.chans
	}
	i, ws := w.index, *list
	if i < 0 || i >= len(ws) || ws[i] != w {
		return
	}
	last := len(ws) - 1
	ws[i] = ws[last]
	ws[i].index = i
	ws[last] = nil
	*list = ws[:last]
	w.index = -1
	if w.policy.kind == kindBlockFor {
		b.nBlockFor--
	}
}

// evictedLocked unregisters w, which Evict ended. Its WithContext callback
// stays registered: when ctx ends it stops w. Called with mu held.
func (b *Broadcaster[T]) evictedLocked(w *Watcher[T]) {
	b.removeLocked(w)
	if w.ctxStop != nil {
		if b.evictedCtx == nil {
			b.evictedCtx = make(map[*Watcher[T]]struct{})
		}
		b.evictedCtx[w] = struct{}{}
	}
	b.wakeWatcherLocked(w)
}

// Dropped returns the number of values dropped in all, across watchers:
// Stats().Dropped, read without taking any lock, so that a caller may check
// it on every publish. A watcher's [Watcher.Dropped] counts each of its
// drops before this total does: once the total shows one, so does it.
func (b *Broadcaster[T]) Dropped() uint64 {
	return b.dropped.Load()
}

// Stats returns a snapshot of the broadcaster's counters.
func (b *Broadcaster[T]) Stats() Stats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Stats{Published: b.tail.Load(), Dropped: b.dropped.Load(), Watchers: len(b.readers) + len(b.chans)}
}
