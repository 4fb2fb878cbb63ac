package broadcast

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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
	initOnce sync.Once // ready
	cfg      config

	// mu guards the fields below it and serializes commits: the write of a
	// value into the ring, the tail increment and the decisions for full
	// watchers happen under mu, so every watcher sees one order. mu is never
	// held while waiting: a publisher that has to wait for a Block watcher
	// marks the broadcaster busy, unlocks, waits, and relocks.
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

	closedCh  chan struct{} // closed when Shutdown begins: wakes turn waiters
	abort     chan struct{} // closed when Shutdown's ctx ends: waits give up
	abortOnce sync.Once
	roomCh    chan struct{} // cap 1: a waiting publisher should re-check

	// fwd counts the forwarding goroutines of C() channels (see forward in
	// watcher.go); Shutdown waits for them. noSpawn, guarded by pmu, is set
	// by Shutdown once it has taken charge of every watcher's forwarder.
	fwd     sync.WaitGroup
	noSpawn bool

	nBlockFor atomic.Int32 // registered BlockFor watchers
	// tailw packs the next sequence number (tailw >> 1, also the count of
	// values published) with a bit that is set while watchers exist or
	// Shutdown began. With the bit clear, Publish has nobody to deliver to
	// and only moves the sequence, with one CAS and no lock (see
	// docs/design.md for what it saves). Set and cleared under mu;
	// while it is set, only a publisher holding mu changes tailw.
	tailw   atomic.Uint64
	ring    atomic.Pointer[ring[T]] // nil until the first watcher
	dropped atomic.Uint64

	// pmu guards parked: ring watchers whose reader is waiting for a value.
	// Publishers wake only those, and only when nParked says there are any.
	pmu     sync.Mutex
	parked  []*Watcher[T]
	nParked atomic.Int32
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

// Publish sends v to every watcher. It returns once v is queued for every
// watcher (or dropped for it, as its policy says); it waits only for full
// [Block] or [BlockFor] watchers. It returns [ErrClosed] once Shutdown has
// begun; a Publish that was waiting when Shutdown's ctx ended returns
// ErrClosed too, and v is then dropped (counted) for the watchers it had not
// reached.
func (b *Broadcaster[T]) Publish(v T) error {
	_, err := b.publish(context.Background(), v, false)
	return err
}

// PublishContext is [Broadcaster.Publish] whose waits for full Block
// watchers end when ctx does. A ctx already done is reported first, also
// on a shut-down broadcaster. If ctx is already done, or ends while this
// call waits for another Publish to finish (values are committed one at a
// time, in order), nothing is published and ctx.Err() is returned. If ctx ends while v waits, v still goes to every
// watcher with room, is dropped (counted in Dropped) for each Block watcher
// that had none, as [BlockFor] would, and ctx.Err() is returned.
func (b *Broadcaster[T]) PublishContext(ctx context.Context, v T) error {
	if ctx == nil {
		return errNilContext
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := b.publish(ctx, v, false)
	return err
}

// TryPublish publishes v only if that needs no waiting: it returns
// (false, nil) without publishing when a [Block] or [BlockFor] watcher is
// full or another publisher is waiting, (false, ErrClosed) once Shutdown
// has begun, and (true, nil) when v was published. It never blocks.
func (b *Broadcaster[T]) TryPublish(v T) (bool, error) {
	return b.publish(context.Background(), v, true)
}

// slowBit is tailw's bit: watchers exist or Shutdown began.
const slowBit = 1

// seq returns the next sequence number: the count of values published.
func (b *Broadcaster[T]) seq() uint64 { return b.tailw.Load() >> 1 }

// publishIdle publishes when nobody watches: it only counts. It reports
// false if the broadcaster has watchers or is shut down.
func (b *Broadcaster[T]) publishIdle() bool {
	for {
		x := b.tailw.Load()
		if x&slowBit != 0 {
			return false
		}
		if b.tailw.CompareAndSwap(x, x+2) {
			return true
		}
	}
}

func (b *Broadcaster[T]) publish(ctx context.Context, v T, try bool) (bool, error) {
	if b.publishIdle() {
		return true, nil
	}
	var w8 waitState
	if b.nBlockFor.Load() > 0 {
		// BlockFor waits are measured from the call, also when this publish
		// first waits for its turn behind another one.
		w8.start = time.Now()
	}
	b.mu.Lock()
	// Take the turn: only one publisher waits at a time, so the order of
	// commits is the order every watcher sees.
	for b.busy {
		if b.closed {
			b.mu.Unlock()
			return false, ErrClosed
		}
		if try {
			b.mu.Unlock()
			return false, nil
		}
		if b.turn == nil {
			b.turn = make(chan struct{})
		}
		t := b.turn
		b.mu.Unlock()
		select {
		case <-t:
		case <-ctx.Done():
			return false, ctx.Err()
		case <-b.closedCh:
			return false, ErrClosed
		}
		b.mu.Lock()
	}
	if b.closed {
		b.mu.Unlock()
		return false, ErrClosed
	}
	if b.tailw.Load()&slowBit == 0 {
		// The last watcher left meanwhile.
		b.mu.Unlock()
		if b.publishIdle() {
			return true, nil
		}
		return b.publish(ctx, v, try)
	}

	s := b.seq()
	var (
		result error
		spins  int
	)
	if !w8.start.IsZero() {
		w8.now = time.Now()
	}

	// Phase 1, before the commit: a full Block watcher gets nothing until
	// it has room, so v stays invisible while we wait.
	for {
		full, deadline := b.fullBlockers(s, &w8)
		direct := b.direct
		if !full && len(direct) == 0 {
			break
		}
		if try {
			clear(direct)
			b.direct = direct[:0]
			b.mu.Unlock()
			return false, nil
		}
		b.busy = true
		b.mu.Unlock()
		if full {
			clear(direct)
			b.direct = direct[:0]
			if spins < publisherSpins {
				// Readers usually make room within a scheduling round;
				// yielding is much cheaper than parking on roomCh.
				spins++
				runtime.Gosched()
				b.mu.Lock()
				continue
			}
			stop, err := w8.wait(ctx, b.roomCh, b.abort, deadline)
			b.mu.Lock()
			if stop {
				w8.giveUp = true
				result = err
			}
			continue
		}
		// Every full watcher left holds its whole queue in its channel:
		// hand v to each directly, which waits for its reader (see
		// sendDirect). b.direct is ours while busy.
		for _, w := range direct {
			if err := w.sendDirect(ctx, v, s, &w8); err != nil && result == nil {
				result = err
			}
		}
		clear(direct)
		b.mu.Lock()
		b.direct = direct[:0]
	}

	// Phase 2, the commit.
	if s >= b.attn {
		b.attend(s, &w8)
	}
	if r := b.ring.Load(); r != nil {
		r.buf[s&r.mask] = v
	}
	bit := uint64(slowBit)
	if b.nWatchers == 0 && !b.closed && b.cfg.history == 0 {
		bit = 0 // the last watcher left while we waited (see remove)
	}
	b.tailw.Store((s+1)<<1 | bit)
	if b.busy {
		b.busy = false
		if b.turn != nil {
			close(b.turn)
			b.turn = nil
		}
	}
	b.mu.Unlock()
	w8.stop()
	b.wakeParked()
	return true, result
}

// waitState is a publisher's view of its own waiting: when it started (for
// BlockFor), whether it gave up (ctx ended or Shutdown aborted), and a timer
// reused across waits. It lives on the publisher's stack.
type waitState struct {
	start  time.Time
	now    time.Time
	giveUp bool
	timer  *time.Timer
}

func (ws *waitState) stop() {
	if ws.timer != nil {
		ws.timer.Stop()
	}
}

// expired reports whether a BlockFor watcher with policy p has been waited
// for long enough. Watchers only count as expired once waiting has started.
func (ws *waitState) expired(p Policy) bool {
	if ws.giveUp {
		return true
	}
	return p.kind == kindBlockFor && !ws.start.IsZero() && ws.now.Sub(ws.start) >= p.wait
}

func (ws *waitState) deadline(p Policy) time.Time {
	if p.kind != kindBlockFor {
		return time.Time{}
	}
	return ws.start.Add(p.wait)
}

// wait blocks until a consumer makes room (roomCh), the earliest BlockFor
// deadline passes, ctx ends or Shutdown aborts. It reports whether the
// publisher must give up and with which error.
func (ws *waitState) wait(ctx context.Context, room, abort <-chan struct{}, deadline time.Time) (bool, error) {
	var tc <-chan time.Time
	if !deadline.IsZero() {
		d := time.Until(deadline)
		if ws.timer == nil {
			ws.timer = time.NewTimer(d)
		} else {
			ws.timer.Reset(d)
		}
		tc = ws.timer.C
	}
	var give bool
	var err error
	select {
	case <-room:
	case <-tc:
	case <-ctx.Done():
		give, err = true, ctx.Err()
	case <-abort:
		give, err = true, ErrClosed
	}
	if ws.timer != nil {
		ws.timer.Stop()
	}
	ws.now = time.Now()
	return give, err
}

// fullBlockers reports whether a Block or unexpired BlockFor watcher is
// full for seq s, marking each such watcher so that its reader (or
// forwarder) signals roomCh when it makes room, and returns the earliest
// BlockFor deadline among them (zero if none). Full watchers whose whole
// queue is in their C() channel cannot signal (nobody sees a receive from a
// full channel but a blocked sender), so they are put on b.direct instead:
// the publisher sends v to them itself. Called with b.mu held.
func (b *Broadcaster[T]) fullBlockers(s uint64, ws *waitState) (bool, time.Time) {
	if s < b.attn {
		return false, time.Time{}
	}
	full := false
	var deadline time.Time
	R := b.ringSize()
	for _, w := range b.watchers {
		if !w.policy.waits() || w.attnSeq(R) > s {
			continue
		}
		w.mu.Lock()
		w.roomWanted.Store(true)
		if w.h.Load() <= s && w.queuedLocked(s) >= w.queueLen && !ws.expired(w.policy) {
			if ws.start.IsZero() {
				ws.start = time.Now()
				ws.now = ws.start
			}
			if w.directLocked(s) {
				w.roomWanted.Store(false)
				b.direct = append(b.direct, w)
			} else {
				full = true
				if d := ws.deadline(w.policy); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
					deadline = d
				}
			}
		} else {
			w.roomWanted.Store(false)
		}
		w.mu.Unlock()
	}
	return full, deadline
}

// attend handles every watcher that needs it before seq s is written:
// full lossy watchers get their policy applied, watchers about to be lapped
// get their values copied out of the ring. It recomputes b.attn. Called with
// b.mu held, only when s >= b.attn, which is rare unless a watcher is full.
func (b *Broadcaster[T]) attend(s uint64, ws *waitState) {
	r := b.ring.Load()
	R := b.ringSize()
	next := uint64(math.MaxUint64)
	for i := 0; i < len(b.watchers); i++ {
		w := b.watchers[i]
		if w.attnSeq(R) <= s {
			w.mu.Lock()
			w.attendLocked(s, r, ws)
			evicted := w.evicted
			w.mu.Unlock()
			if evicted {
				b.remove(w) // moves the last watcher to i: visit i again
				i--
				continue
			}
		}
		next = min(next, w.attnSeq(R))
	}
	b.attn = next
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

// remove unregisters w. Called with b.mu held.
func (b *Broadcaster[T]) remove(w *Watcher[T]) {
	if !unlink(&b.watchers, w) {
		return
	}
	b.nWatchers--
	if b.nWatchers == 0 && !b.closed && !b.busy && b.cfg.history == 0 {
		// Publishes may count without the lock from here. Not while a
		// publisher holds the turn: it read the sequence number before
		// waiting, and its commit stores the tail from it, so nothing may
		// move the tail meanwhile; its commit clears the bit instead.
		b.tailw.And(^uint64(slowBit))
	}
	if w.policy.kind == kindBlockFor {
		b.nBlockFor.Add(-1)
	}
}

// unlink removes w from *list in O(1) by moving the last watcher into its
// place, and reports whether w was there. Called with b.mu held.
func unlink[T any](list *[]*Watcher[T], w *Watcher[T]) bool {
	l := *list
	i := w.index
	if i < 0 || i >= len(l) || l[i] != w {
		return false
	}
	last := len(l) - 1
	l[i] = l[last]
	l[i].index = i
	l[last] = nil
	*list = l[:last]
	w.index = -1
	return true
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

// Shutdown stops the broadcaster. From its start, Publish, PublishContext,
// TryPublish, Watch and WatchWithPrefix return [ErrClosed]. A Publish still
// waiting for a full Block watcher may finish until ctx ends; then it gives
// up (its value is dropped, counted, for the watchers it had not reached).
// Every value whose Publish returned nil is then delivered: a watcher read
// through All() keeps it readable, and its loop ends after the last one; a
// watcher read through C() gets it in its channel, which is then closed.
// A C() channel buffers at most [ChannelBuffer] values, so Shutdown waits
// for C() readers to take the rest of their queues; if ctx ends first, the
// channels keep what they hold and the rest is dropped (counted in
// Dropped). Shutdown returns nil, or ctx.Err() if ctx ended first; either
// way every watcher is closed and every goroutine of the broadcaster has
// exited. Calls after the first wait for it to finish and return nil (or
// their own ctx.Err()). Shutdown(nil) returns an error and does nothing.
func (b *Broadcaster[T]) Shutdown(ctx context.Context) error {
	if ctx == nil {
		return errNilContext
	}
	b.ready()
	b.mu.Lock()
	if b.shutting {
		done := b.shutDone
		b.mu.Unlock()
		return waitDone(ctx, done)
	}
	b.shutting, b.closed = true, true
	b.tailw.Or(slowBit)
	b.shutDone = make(chan struct{})
	close(b.closedCh)
	err := b.waitPublisherLocked(ctx)
	handing, ctxWatchers := b.endWatchersLocked()
	b.mu.Unlock()

	// WithContext watchers: no callback may run after Shutdown returns, so
	// unregister each, or wait for the one already running.
	for _, w := range ctxWatchers {
		if !w.ctxStop() {
			<-w.ctxAfter
		}
	}

	// From here no forwarder is started by a publisher's wake-up: end took
	// charge of every C() channel (closed it, or made sure a forwarder
	// drains it). Wait for the forwarders to hand their values to readers,
	// or for ctx: then they drop what is left (counted), close and exit.
	b.clearParked()
	if err == nil && handing {
		err = b.waitForwarders(ctx)
	} else {
		// Nothing left to hand over (or already aborted): the forwarders
		// of closed channels exit at once.
		b.fwd.Wait()
	}

	b.mu.Lock()
	close(b.shutDone)
	b.mu.Unlock()
	return err
}

// waitDone waits for done, or for ctx; done first if both are.
func waitDone(ctx context.Context, done <-chan struct{}) error {
	select {
	case <-done:
		return nil
	default:
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitPublisherLocked waits, with b.mu held except while it blocks, until
// no publisher holds the turn. If ctx ends first it aborts that publisher's
// wait, waits for it to give up, and returns ctx.Err().
func (b *Broadcaster[T]) waitPublisherLocked(ctx context.Context) error {
	var err error
	for b.busy {
		if b.turn == nil {
			b.turn = make(chan struct{})
		}
		t := b.turn
		b.mu.Unlock()
		if err == nil {
			select {
			case <-t:
			case <-ctx.Done():
				err = ctx.Err()
				b.abortWaits()
				<-t
			}
		} else {
			<-t
		}
		b.mu.Lock()
	}
	return err
}

// endWatchersLocked ends and unregisters every watcher. It reports whether
// a C() forwarder still has values to hand over, and returns the watchers
// bound to a context. Called with b.mu held, no publisher active.
func (b *Broadcaster[T]) endWatchersLocked() (handing bool, ctxWatchers []*Watcher[T]) {
	for _, w := range b.watchers {
		w.mu.Lock()
		if w.end() {
			handing = true
		}
		if w.ctxStop != nil {
			ctxWatchers = append(ctxWatchers, w)
		}
		w.index = -1
		w.mu.Unlock()
	}
	clear(b.watchers)
	b.watchers, b.nWatchers = nil, 0
	b.nBlockFor.Store(0)
	return handing, ctxWatchers
}

// clearParked empties the parked list for good: every watcher has ended
// (its done channel is closed), nobody needs waking, and no forwarder may
// start from here.
func (b *Broadcaster[T]) clearParked() {
	b.pmu.Lock()
	b.noSpawn = true
	for _, w := range b.parked {
		w.parked = false
	}
	clear(b.parked)
	b.parked = nil
	b.nParked.Store(0)
	b.pmu.Unlock()
}

// waitForwarders waits for the forwarders to hand their queues over; if
// ctx ends first, it aborts them (they drop the rest, counted), waits for
// them to exit and returns ctx.Err().
func (b *Broadcaster[T]) waitForwarders(ctx context.Context) error {
	drained := make(chan struct{})
	go func() {
		b.fwd.Wait()
		close(drained)
	}()
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
	}
	select {
	case <-drained: // it finished after all
		return nil
	default:
	}
	b.abortWaits()
	<-drained
	return ctx.Err()
}

// abortWaits makes every waiting publisher and forwarder give up: Shutdown's
// ctx ended.
func (b *Broadcaster[T]) abortWaits() {
	b.abortOnce.Do(func() { close(b.abort) })
}

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

// signalRoom tells a waiting publisher to re-check.
func (b *Broadcaster[T]) signalRoom() {
	select {
	case b.roomCh <- struct{}{}:
	default:
	}
}
