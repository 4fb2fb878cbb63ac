package broadcast_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// FuzzOps runs a random sequence of operations on one Broadcaster[int] from
// one goroutine, inside a synctest bubble, against a model: each watcher is a
// queue under its policy. Every step is deterministic, so the model is exact:
// every value read, every Dropped(), every Len(), every Stats(), every
// TryPublish answer and (in virtual time) how long each Publish waits.
//
// A watcher read through C() holds the same values as one read through
// All(): its channel is its queue (guarantee 3), with one exception that
// Watcher.C documents: its channel's capacity is the queue length plus the
// prefix or replay left when C() is first called, so the room of prefix
// values read goes to live values; and a full DropOldest watcher whose
// prefix or replay is still in its channel drops the new value instead. Shutdown waits for no
// reader (guarantee 6): at the end nothing reads while it runs.
//
// The input is read three bytes at a time: an operation and two arguments
// (see the op constants). Values published are 1, 2, 3, ...; prefix values
// are -1, -2, ...; so a duplicate or a value from before a watcher's Watch
// shows up as a mismatch.
func FuzzOps(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzOps.
	f.Add([]byte{opWatch, 0, 1, opBurst, 0, 5, opReadC, 0, 1, opPublish, 0, 0})
	// Odd lengths keep a history of 8: publish 6, evict a watcher of queue
	// 2, resume it from 3 with a context, read through Seq, cancel it.
	f.Add([]byte{opWatchEvict, 0, 1, opBurst, 0, 6, opReadSeq, 0, 7, opWatchFrom, 6, 8 + 0, opReadSeq, 1, 2, opPublish, 0, 0, opCancel, 1, 0, opReadC, 1, 7, 0})
	f.Add([]byte{opBurst, 0, 12, opWatchFrom, 7, 4, opWatchFrom, 40, 2, opWatchFrom, 1, 3, opBurst, 0, 9, opReadSeq, 0, 7, opReadC, 1, 7, opReadAll, 2, 7, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		synctest.Test(t, func(t *testing.T) { runOps(t, data) })
	})
}

// Operations. Arguments a and c are the two bytes after the operation byte.
const (
	opWatch           = iota // policy a%4 (BlockFor's d by a/4), queue length c%8+1
	opWatchWithPrefix        // as opWatch, prefix length c/8%5
	opPublish                // Publish; TryPublish (refused) when a Block watcher is full
	opTryPublish             // TryPublish
	opPublishContext         // PublishContext with a 1s deadline: may end on a full Block watcher
	opReadC                  // read min(c%8+1, held) values of watcher a through C()
	opReadAll                // the same through All()
	opStop                   // Stop watcher a
	opPublishCanceled        // PublishContext with a canceled ctx: publishes nothing
	opBurst                  // c%16 times opPublish
	opReadAllThenC           // as opReadAll, calling C() in the loop before breaking out
	opNestedRead             // read one value of watcher a/2 through All(), and inside that loop c%8 more through C() (a odd) or All()
	opWatchEvict             // as opWatch with policy Evict; with a context if a is odd
	opWatchFrom              // WatchFrom(Published+1 - a/2%(history+3)), or 0 if a%8 == 7; policy c%5, queue length c/8%8+1; a context if a%4 == 1
	opCancel                 // cancel the context of watcher a (if it has one) with a cause
	opReadSeq                // read min(c%8+1, held) values of watcher a through Seq, checking their sequence numbers
	numOps
)

const (
	maxOps      = 300
	maxWatchers = 12
	ctxTimeout  = time.Second // longer than every BlockFor wait below
)

var blockForWaits = []time.Duration{time.Millisecond, 3 * time.Millisecond, 7 * time.Millisecond}

// fzWatcher is one watcher and its model.
type fzWatcher struct {
	name       string
	w          *broadcast.Watcher[int]
	kind       int // 0 Drop, 1 DropOldest, 2 Block, 3 BlockFor
	wait       time.Duration
	qlen       int
	queue      []int // values held, oldest first; the first prefixLeft are the prefix
	prefixLeft int
	dropped    uint64
	stopped    bool
	cCalled    bool // C() was called: Seq then yields 0 for every value
	chanCap    int  // its channel's capacity: the queue length plus the prefix left at the first C()
	chanAll    bool // C() was first called once Evict had ended it: the channel holds all it had, no forwarder
	evicted    bool
	cancel     context.CancelCauseFunc // WithContext
	wantErr    error                   // what Err() returns once it ended
}

// exempt is how many values at the front of the queue never count against
// the queue length and are never dropped: the prefix (or replay).
func (m *fzWatcher) exempt() int { return m.prefixLeft }
func (m *fzWatcher) full() bool {
	if m.cCalled {
		return len(m.queue) >= m.chanCap
	}
	return len(m.queue)-m.exempt() >= m.qlen
}

// calledC records a call of C(). The first, once the watcher has ended
// (evicted), makes a channel holding everything queued, and no forwarder.
func (m *fzWatcher) calledC() {
	if !m.cCalled && m.evicted && !m.stopped {
		m.chanAll = true
	}
	if !m.cCalled {
		m.chanCap = m.prefixLeft + m.qlen
	}
	m.cCalled = true
}

// consumed takes the first n values off the model's queue: they were read.
func (m *fzWatcher) consumed(n int) {
	m.queue = m.queue[n:]
	m.prefixLeft = max(0, m.prefixLeft-n)
}

type fzModel struct {
	t          *testing.T
	b          *broadcast.Broadcaster[int]
	ws         []*fzWatcher
	next       int // last value published or attempted
	nextPrefix int
	published  uint64
	shut       bool // Shutdown has returned: no watcher is registered
	step       int
	history    int            // WithHistory of the broadcaster
	accepted   []int          // every value accepted; the n-th has sequence number n
	seqOf      map[int]uint64 // value -> sequence number (prefix values: 0)
}

func runOps(t *testing.T, data []byte) {
	m := &fzModel{t: t, seqOf: map[int]uint64{}}
	if len(data)%2 == 1 {
		m.history = 8 // odd inputs keep a history, so that WatchFrom can replay
	}
	m.b = newB(t, broadcast.WithHistory(m.history))
	if len(data) > 3*maxOps {
		data = data[:3*maxOps]
	}
	arg := func(i int) byte {
		if i < len(data) {
			return data[i]
		}
		return 0
	}
	for i := 0; i < len(data); i += 3 {
		m.step = i / 3
		op, a, c := data[i]%numOps, arg(i+1), arg(i+2)
		switch op {
		case opWatch:
			m.watch(a, c, 0)
		case opWatchWithPrefix:
			m.watch(a, c, int(c/8)%5)
		case opPublish:
			m.publish()
		case opTryPublish:
			m.tryPublish()
		case opPublishContext:
			m.publishContext()
		case opReadC, opReadAll:
			m.read(a, int(c%8)+1, op == opReadC)
		case opReadAllThenC:
			m.readAllThenC(a, int(c%8)+1)
		case opNestedRead:
			m.nestedRead(a/2, int(c%8), a%2 == 1)
		case opStop:
			if len(m.ws) > 0 {
				w := m.ws[int(a)%len(m.ws)]
				m.settle()
				w.w.Stop()
				m.stopped(w)
			}
		case opPublishCanceled:
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			m.next++
			if err := m.b.PublishContext(ctx, m.next); !errors.Is(err, context.Canceled) {
				m.fatalf("PublishContext(canceled, %d) = %v, want context.Canceled", m.next, err)
			}
		case opBurst:
			for range int(c % 16) {
				m.publish()
			}
		case opWatchEvict:
			m.watchWith(4, a%2 == 1, int(c%8)+1, nil, "Watch")
		case opWatchFrom:
			m.watchFrom(a, c)
		case opCancel:
			m.cancel(a)
		case opReadSeq:
			m.readSeq(a, int(c%8)+1)
		}
		m.check()
	}
	m.finish()
}

func (m *fzModel) fatalf(format string, args ...any) {
	m.t.Helper()
	m.t.Fatalf("step %d: %s", m.step, fmt.Sprintf(format, args...))
}

func (m *fzModel) watch(a, c byte, prefixLen int) {
	if len(m.ws) >= maxWatchers {
		return
	}
	w := &fzWatcher{kind: int(a % 4), qlen: int(c%8) + 1}
	var p broadcast.Policy
	switch w.kind {
	case 0:
		p = broadcast.Drop
	case 1:
		p = broadcast.DropOldest
	case 2:
		p = broadcast.Block
	case 3:
		w.wait = blockForWaits[int(a/4)%len(blockForWaits)]
		p = broadcast.BlockFor(w.wait)
	}
	w.name = fmt.Sprintf("watcher %d (%v, length %d, prefix %d)", len(m.ws), p, w.qlen, prefixLen)
	var err error
	if prefixLen == 0 && c%2 == 0 {
		w.w, err = m.b.Watch(with(p, w.qlen)...)
	} else {
		var prefix []int
		for range prefixLen {
			m.nextPrefix--
			prefix = append(prefix, m.nextPrefix)
		}
		w.w, err = m.b.WatchWithPrefix(prefix, with(p, w.qlen)...)
		w.queue, w.prefixLeft = slices.Clone(prefix), prefixLen
	}
	if err != nil {
		m.fatalf("Watch: %v", err)
	}
	m.ws = append(m.ws, w)
}

var errCanceled = errors.New("fuzz: canceled")

// watchWith registers a watcher with policy kind (0 Drop, 1 DropOldest,
// 2 Block, 3 BlockFor(1ms), 4 Evict), a context if withCtx, and the values
// of replay held first (WatchFrom's replay) when how is "WatchFrom".
func (m *fzModel) watchWith(kind int, withCtx bool, qlen int, replay []int, how string, from ...uint64) {
	if len(m.ws) >= maxWatchers {
		return
	}
	w := &fzWatcher{kind: kind, qlen: qlen}
	p := []broadcast.Policy{broadcast.Drop, broadcast.DropOldest, broadcast.Block, broadcast.BlockFor(blockForWaits[0]), broadcast.Evict}[kind]
	if kind == 3 {
		w.wait = blockForWaits[0]
	}
	opts := with(p, qlen)
	if withCtx {
		ctx, cancel := context.WithCancelCause(context.Background())
		w.cancel = cancel
		opts = append(opts, broadcast.WithContext(ctx))
	}
	w.name = fmt.Sprintf("watcher %d (%s, %v, length %d, replay %d, context %v)", len(m.ws), how, p, qlen, len(replay), withCtx)
	var err error
	if how == "WatchFrom" {
		w.w, err = m.b.WatchFrom(from[0], opts...)
		w.queue, w.prefixLeft = slices.Clone(replay), len(replay)
	} else {
		w.w, err = m.b.Watch(opts...)
	}
	if err != nil {
		m.fatalf("%s: %v", w.name, err)
	}
	m.ws = append(m.ws, w)
}

// watchFrom asks for a sequence number in range or out of it.
func (m *fzModel) watchFrom(a, c byte) {
	from := uint64(0)
	if a%8 != 7 {
		back := uint64(a/2) % uint64(m.history+3)
		if back > m.published+1 {
			back = m.published + 1
		}
		from = m.published + 1 - back
	}
	oldest := m.published + 1
	if h := uint64(m.history); h > 0 {
		oldest = max(m.published, h) - h + 1
	}
	start := from
	if start == 0 {
		start = oldest
	}
	if start < oldest || start > m.published+1 {
		w, err := m.b.WatchFrom(from)
		if w != nil || !errors.Is(err, broadcast.ErrOutOfRange) {
			m.fatalf("WatchFrom(%d) with %d published, history %d = (%v, %v), want ErrOutOfRange", from, m.published, m.history, w, err)
		}
		return
	}
	m.watchWith(int(c%5), a%4 == 1, int(c/8%8)+1, m.accepted[start-1:], "WatchFrom", from)
}

// cancel ends the context of watcher a: it stops as by Stop, with the cause.
func (m *fzModel) cancel(a byte) {
	if len(m.ws) == 0 {
		return
	}
	w := m.ws[int(a)%len(m.ws)]
	if w.cancel == nil {
		return
	}
	m.settle()
	w.cancel(errCanceled)
	synctest.Wait() // the AfterFunc has stopped it
	if !w.stopped && !w.evicted && !m.shut {
		w.wantErr = errCanceled
	}
	if w.evicted && !w.stopped {
		// Stopped, All() ends at once: if it yields a value, ctx did not
		// stop the evicted watcher (TestRegressionContextStopsEvictedWatcher).
		// (Every watcher is stopped first, so that the cleanup's Shutdown
		// need not wait for C() readers.)
		for v := range w.w.All() {
			for _, x := range m.ws {
				x.w.Stop()
			}
			m.t.Fatalf("step %d: %s: ctx ended after eviction and the watcher was not stopped (All() yields %d)", m.step, w.name, v)
		}
	}
	m.stopped(w)
}

// stopped applies Stop to the model: C() closes and All() ends at once, on
// both paths; what the watcher held is discarded, not counted. Called after
// Stop.
func (m *fzModel) stopped(w *fzWatcher) {
	if w.stopped {
		return
	}
	w.stopped = true
	w.queue = nil
	w.prefixLeft = 0
}

// settle lets every goroutine of the bubble (a WithContext callback) run.
func (m *fzModel) settle() { synctest.Wait() }

// readSeq reads up to k values of watcher a through Seq and checks their
// numbers.
func (m *fzModel) readSeq(a byte, k int) {
	if len(m.ws) == 0 {
		return
	}
	w := m.ws[int(a)%len(m.ws)]
	if w.stopped {
		m.read(a, k, false)
		return
	}
	n := min(k, len(w.queue))
	if n == 0 {
		return
	}
	var got []int
	for s, v := range w.w.Seq() {
		want := m.seqOf[v]
		if w.cCalled {
			want = 0 // values that went through C()'s channel carry no number
		}
		if s != want {
			m.fatalf("%s: Seq yields %d with sequence number %d, want %d", w.name, v, s, want)
		}
		if got = append(got, v); len(got) == n {
			break
		}
	}
	if !slices.Equal(got, w.queue[:n]) {
		m.fatalf("%s: read %v through Seq, want %v", w.name, got, w.queue[:n])
	}
	w.consumed(n)
}

// live returns the watchers not stopped and not evicted.
func (m *fzModel) live() []*fzWatcher {
	var l []*fzWatcher
	for _, w := range m.ws {
		if !w.stopped && !w.evicted {
			l = append(l, w)
		}
	}
	return l
}

// fullWaiters reports whether a full Block watcher exists, and the longest d
// of the full BlockFor watchers: how long a Publish waits for them.
func (m *fzModel) fullWaiters() (blockFull bool, wait time.Duration) {
	m.settle()
	for _, w := range m.live() {
		if w.full() {
			switch w.kind {
			case 2:
				blockFull = true
			case 3:
				wait = max(wait, w.wait)
			}
		}
	}
	return blockFull, wait
}

// deliver applies a published value to the model. A full Block watcher
// only drops when a PublishContext gave up on it.
func (m *fzModel) deliver(v int) {
	m.published++
	m.accepted = append(m.accepted, v)
	m.seqOf[v] = m.published
	for _, w := range m.live() {
		switch {
		case !w.full():
			w.queue = append(w.queue, v)
		case w.kind == 4: // Evict: the value is dropped and the watcher ends
			w.dropped++
			w.evicted = true
			w.wantErr = broadcast.ErrEvicted
		case w.kind == 1 && w.cCalled && w.prefixLeft > 0:
			// DropOldest through C(), the prefix or replay unread in front
			// of the channel: the new value goes (Watcher.C).
			w.dropped++
		case w.kind == 1: // DropOldest: the oldest value that is not exempt goes
			e := w.exempt()
			w.queue = append(slices.Delete(w.queue, e, e+1), v)
			w.dropped++
		default: // Drop, BlockFor after its wait, Block after ctx ended
			w.dropped++
		}
	}
}

func (m *fzModel) publish() {
	blockFull, wait := m.fullWaiters()
	if blockFull { // Publish would wait forever: TryPublish must refuse
		m.tryPublish()
		return
	}
	m.next++
	start := time.Now()
	if err := m.b.Publish(m.next); err != nil {
		m.fatalf("Publish(%d): %v", m.next, err)
	}
	if d := time.Since(start); d != wait {
		m.fatalf("Publish(%d) took %v, want %v (full BlockFor watchers)", m.next, d, wait)
	}
	m.deliver(m.next)
}

func (m *fzModel) tryPublish() {
	blockFull, wait := m.fullWaiters()
	want := !blockFull && wait == 0
	m.next++
	start := time.Now()
	ok, err := m.b.TryPublish(m.next)
	if ok != want || err != nil {
		m.fatalf("TryPublish(%d) = (%v, %v), want (%v, nil)", m.next, ok, err, want)
	}
	if d := time.Since(start); d != 0 {
		m.fatalf("TryPublish(%d) took %v", m.next, d)
	}
	if ok {
		m.deliver(m.next)
	}
}

func (m *fzModel) publishContext() {
	blockFull, wait := m.fullWaiters()
	var wantErr error
	if blockFull {
		wantErr, wait = context.DeadlineExceeded, ctxTimeout
	}
	m.next++
	ctx, cancel := context.WithTimeout(context.Background(), ctxTimeout)
	defer cancel()
	start := time.Now()
	if err := m.b.PublishContext(ctx, m.next); !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) {
		m.fatalf("PublishContext(%d) = %v, want %v", m.next, err, wantErr)
	}
	if d := time.Since(start); d != wait {
		m.fatalf("PublishContext(%d) took %v, want %v", m.next, d, wait)
	}
	m.deliver(m.next)
}

// read reads up to k values of watcher a through C() or All().
func (m *fzModel) read(a byte, k int, viaC bool) {
	if len(m.ws) == 0 {
		return
	}
	w := m.ws[int(a)%len(m.ws)]
	if !w.stopped {
		if viaC {
			w.calledC() // below, C() is called even with nothing to read
		}
		n := min(k, len(w.queue))
		var got []int
		if n > 0 {
			got = m.take(w, n, viaC)
		}
		if !slices.Equal(got, w.queue[:n]) {
			m.fatalf("%s: read %v, want %v (holding %v)", w.name, got, w.queue[:n], w.queue)
		}
		w.consumed(n)
		if viaC && len(w.queue) == 0 {
			synctest.Wait()
			select {
			case v, ok := <-w.w.C():
				if ok || !w.evicted {
					m.fatalf("%s: C() yields %v (open %v) with nothing queued", w.name, v, ok)
				}
			default:
				if w.evicted {
					m.fatalf("%s: evicted, C() is not closed once its values were read", w.name)
				}
			}
		}
		return
	}
	// Stopped: C() is closed and empty; All() has ended.
	got := m.take(w, k, viaC)
	var want []int
	if !slices.Equal(got, want) {
		m.fatalf("%s (stopped): read %v through %s, want %v", w.name, got, map[bool]string{true: "C()", false: "All()"}[viaC], want)
	}
	w.consumed(len(got))
}

// readAllThenC reads up to k values of a live watcher a through All(),
// calling C() inside the loop just before it breaks out: the values All()
// had taken but not yielded must stay queued, in order.
func (m *fzModel) readAllThenC(a byte, k int) {
	if len(m.ws) == 0 {
		return
	}
	w := m.ws[int(a)%len(m.ws)]
	n := min(k, len(w.queue))
	if w.stopped || n == 0 {
		m.read(a, k, false)
		return
	}
	var got []int
	want := slices.Clone(w.queue[:n])
	for v := range w.w.All() {
		got = append(got, v)
		if len(got) == n {
			w.w.C()
			w.consumed(n) // before C(): its channel's room counts what is left
			w.calledC()
			break
		}
	}
	if !slices.Equal(got, want) {
		m.fatalf("%s: read %v, want %v", w.name, got, want)
	}
}

// nestedRead reads one value of a live watcher through All() and, inside
// that loop, up to k more through C() or a second All() loop: one goroutine,
// one stream, so they come in order.
func (m *fzModel) nestedRead(a byte, k int, viaC bool) {
	if len(m.ws) == 0 {
		return
	}
	w := m.ws[int(a)%len(m.ws)]
	if w.stopped || len(w.queue) == 0 {
		m.read(a, k, viaC)
		return
	}
	n := min(k, len(w.queue)-1)
	var got []int
	want := slices.Clone(w.queue[:n+1])
	for v := range w.w.All() {
		got = append(got, v)
		w.consumed(1) // before C(): its channel's room counts what is left
		if n > 0 {
			got = append(got, m.take(w, n, viaC)...)
			w.consumed(n)
		}
		break
	}
	if !slices.Equal(got, want) {
		m.fatalf("%s: nested read %v, want %v", w.name, got, want)
	}
}

// take reads n values (every value until the end if n < 0).
func (m *fzModel) take(w *fzWatcher, n int, viaC bool) []int {
	if viaC {
		w.calledC()
		return testutil.Collect(m.t, w.w.C(), n, guard)
	}
	return testutil.CollectSeq(m.t, w.w.All(), n, guard)
}

func (m *fzModel) check() {
	m.t.Helper()
	m.settle()
	var dropped uint64
	for _, w := range m.ws {
		if got := w.w.Dropped(); got != w.dropped {
			m.fatalf("%s: Dropped() = %d, want %d", w.name, got, w.dropped)
		}
		dropped += w.dropped
		if got := w.w.Len(); got != len(w.queue) {
			m.fatalf("%s: Len() = %d, want %d (holding %v)", w.name, got, len(w.queue), w.queue)
		}
	}
	for _, w := range m.ws {
		want := w.wantErr
		if m.shut && want == nil && !w.stopped {
			want = broadcast.ErrClosed
		}
		if got := w.w.Err(); !errors.Is(got, want) || (got == nil) != (want == nil) {
			m.fatalf("%s: Err() = %v, want %v", w.name, got, want)
		}
	}
	want := broadcast.Stats{Published: m.published, Dropped: dropped, Watchers: len(m.live())}
	if m.shut {
		want.Watchers = 0
	}
	if got := m.b.Stats(); got != want {
		m.fatalf("Stats() = %+v, want %+v", got, want)
	}
}

// finish shuts the broadcaster down, with nothing reading while Shutdown
// runs, and reads every watcher to its end.
func (m *fzModel) finish() {
	m.step = -1
	m.settle()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	start := time.Now()
	if err := m.b.Shutdown(ctx); err != nil {
		m.fatalf("Shutdown = %v, want nil (it waits for no reader)", err)
	}
	if took := time.Since(start); took != 0 {
		m.fatalf("Shutdown took %v, want no wait", took)
	}
	checkClosedErrors(m.t, m.b)
	if err := m.b.Shutdown(context.Background()); err != nil {
		m.fatalf("second Shutdown: %v", err)
	}
	m.shut = true
	m.check()
	for i, w := range m.ws {
		viaC := i%2 == 0
		got := m.take(w, -1, viaC)
		synctest.Wait()
		closed, rest := isClosedNow(w.w.C())
		if !closed {
			m.fatalf("%s: C() is not closed after Shutdown", w.name)
		}
		wantGot, wantRest := w.queue, []int(nil) // after Stop, nothing
		if !slices.Equal(got, wantGot) || !slices.Equal(rest, wantRest) {
			m.fatalf("%s (stopped %v): after Shutdown read %v then %v from C(), want %v then %v", w.name, w.stopped, got, rest, wantGot, wantRest)
		}
		w.consumed(len(w.queue))
	}
	m.check()
}
