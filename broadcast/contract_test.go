package broadcast_test

// Black-box tests of the contract in the package doc (doc.go): one test per
// guarantee (TestRegistrationBarrier ... TestNoGoroutineAfterShutdown), then
// the semantics the package documents beyond it, then bad input.
//
// Nothing here sleeps and hopes. Concurrency is synchronised with channels and
// WaitGroups; anything timed (BlockFor, PublishContext and Shutdown deadlines)
// runs inside a testing/synctest bubble, where time is virtual and
// synctest.Wait tells that a Publish really is waiting.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
	"go.uber.org/goleak"
)

// guard bounds every wait that could hang on a bug. It is never a timing
// assertion: inside a bubble it fires as soon as everything is stuck.
const guard = 10 * time.Second

var policyCases = []struct {
	name string
	p    broadcast.Policy
}{
	{"Drop", broadcast.Drop},
	{"DropOldest", broadcast.DropOldest},
	{"Block", broadcast.Block},
	{"BlockFor", broadcast.BlockFor(time.Hour)},
}

// readPath is one of the two ways to read a watcher.
type readPath struct {
	name string
	// take reads n values, or every value until the watcher ends if n < 0.
	take func(t testing.TB, w *broadcast.Watcher[int], n int) []int
	// loop is the plain range loop a user writes: it calls f for each value
	// until the watcher ends or f returns false. It does not use t, so it
	// may run in any goroutine.
	loop func(w *broadcast.Watcher[int], f func(int) bool)
}

var readPaths = []readPath{
	{
		name: "C",
		take: func(t testing.TB, w *broadcast.Watcher[int], n int) []int {
			t.Helper()
			return testutil.Collect(t, w.C(), n, guard)
		},
		loop: func(w *broadcast.Watcher[int], f func(int) bool) {
			for v := range w.C() {
				if !f(v) {
					break
				}
			}
		},
	},
	{
		name: "All",
		take: func(t testing.TB, w *broadcast.Watcher[int], n int) []int {
			t.Helper()
			return testutil.CollectSeq(t, w.All(), n, guard)
		},
		loop: func(w *broadcast.Watcher[int], f func(int) bool) {
			for v := range w.All() {
				if !f(v) {
					break
				}
			}
		},
	},
}

func diff(want, got any) string { return cmp.Diff(want, got, cmpopts.EquateEmpty()) }

// newB returns a broadcaster that is shut down when the test ends.
func newB(t testing.TB, opts ...broadcast.Option) *broadcast.Broadcaster[int] {
	t.Helper()
	b := broadcast.New[int](opts...)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown at cleanup: %v", err)
		}
	})
	return b
}

func with(p broadcast.Policy, n int) []broadcast.Option {
	return []broadcast.Option{broadcast.WithPolicy(p), broadcast.WithQueueLength(n)}
}

func watch(t testing.TB, b *broadcast.Broadcaster[int], opts ...broadcast.Option) *broadcast.Watcher[int] {
	t.Helper()
	w, err := b.Watch(opts...)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return w
}

func publish(t testing.TB, b *broadcast.Broadcaster[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		if err := b.Publish(v); err != nil {
			t.Fatalf("Publish(%d): %v", v, err)
		}
	}
}

func shutdown(t testing.TB, b *broadcast.Broadcaster[int]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

// shutdownReading shuts b down while a reader takes w's values through rp,
// and returns what it took. Once C() was called, a watcher may hold more
// than its channel buffers (the values in flight beyond its queue length),
// and Shutdown waits for a C() reader to take them before it closes C():
// a test whose C() watcher holds more than cap(C()) values reads it this
// way. (Through All alone, queued values stay readable after Shutdown
// returns, and tests read them then.)
func shutdownReading(t testing.TB, b *broadcast.Broadcaster[int], w *broadcast.Watcher[int], rp readPath) []int {
	t.Helper()
	done := make(chan []int, 1)
	go func() {
		var vs []int
		rp.loop(w, func(v int) bool { vs = append(vs, v); return true })
		done <- vs
	}()
	shutdown(t, b)
	return <-done
}

// readAfterShutdown shuts b down and reads w to its end through rp: while
// Shutdown runs if during (a C() watcher holding more than its channel
// buffers, which Shutdown waits for), after it returns otherwise.
func readAfterShutdown(t testing.TB, b *broadcast.Broadcaster[int], w *broadcast.Watcher[int], rp readPath, during bool) []int {
	t.Helper()
	if during {
		return shutdownReading(t, b, w, rp)
	}
	shutdown(t, b)
	return rp.take(t, w, -1)
}

func checkStats(t testing.TB, b *broadcast.Broadcaster[int], want broadcast.Stats) {
	t.Helper()
	if d := cmp.Diff(want, b.Stats()); d != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", d)
	}
	if got := b.Dropped(); got != want.Dropped {
		t.Errorf("Dropped() = %d, want %d, as Stats().Dropped", got, want.Dropped)
	}
}

func checkDropped(t testing.TB, name string, w *broadcast.Watcher[int], want uint64) {
	t.Helper()
	if got := w.Dropped(); got != want {
		t.Errorf("%s.Dropped() = %d, want %d", name, got, want)
	}
}

// async runs f in a new goroutine; the channel receives its result.
func async(f func() error) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- f() }()
	return ch
}

// reader reads w through rp in a new goroutine until the watcher ends (or n
// values if n > 0); the channel receives what it read.
func reader(w *broadcast.Watcher[int], rp readPath, n int) <-chan []int {
	ch := make(chan []int, 1)
	go func() {
		var vs []int
		rp.loop(w, func(v int) bool {
			vs = append(vs, v)
			return n <= 0 || len(vs) < n
		})
		ch <- vs
	}()
	return ch
}

// returned reports whether ch already holds a result, without waiting.
// Inside a bubble, call it after synctest.Wait.
func returned(ch <-chan error) (err error, ok bool) {
	select {
	case err := <-ch:
		return err, true
	default:
		return nil, false
	}
}

// publishNoWait publishes each value and fails if a Publish waits (bubble only).
func publishNoWait(t testing.TB, b *broadcast.Broadcaster[int], vs ...int) {
	t.Helper()
	for _, v := range vs {
		ch := async(func() error { return b.Publish(v) })
		synctest.Wait()
		err, ok := returned(ch)
		if !ok {
			t.Fatalf("Publish(%d) is waiting; want it to return at once", v)
		}
		if err != nil {
			t.Fatalf("Publish(%d): %v", v, err)
		}
	}
}

// publishTimed publishes v and returns how long Publish took (bubble only,
// so the duration is exact virtual time).
func publishTimed(t testing.TB, b *broadcast.Broadcaster[int], v int) time.Duration {
	t.Helper()
	start := time.Now()
	if err := b.Publish(v); err != nil {
		t.Fatalf("Publish(%d): %v", v, err)
	}
	return time.Since(start)
}

// isClosedNow reports whether ch is closed with nothing left in it (bubble
// only, after synctest.Wait: nothing is on its way).
func isClosedNow(ch <-chan int) (closed bool, extra []int) {
	for {
		select {
		case v, ok := <-ch:
			if !ok {
				return true, extra
			}
			extra = append(extra, v)
		default:
			return false, extra
		}
	}
}

// --- Guarantee 1 ---------------------------------------------------------

// TestRegistrationBarrier covers guarantee 1 with a publisher running while
// Watch is called: no value whose Publish returned before Watch was called
// arrives, every value whose Publish started after Watch returned arrives, and
// (the barrier is linearizable) what arrives is one gap-free run up to the
// last value. Values in flight during Watch are not asserted either way.
func TestRegistrationBarrier(t *testing.T) {
	const (
		warmup   = 100  // values published before Watch is attempted
		maxAhead = 1000 // how far the publisher may run ahead of Watch
		tail     = 200  // values published after the publisher saw Watch return
	)
	for _, pc := range policyCases {
		for _, rp := range readPaths {
			t.Run(pc.name+"/"+rp.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					qlen := 4
					if pc.name == "Drop" || pc.name == "DropOldest" {
						// Large enough never to fill: this test is about the barrier.
						qlen = maxAhead + tail + 10
					}
					b := newB(t)
					var started, finished atomic.Int64
					started.Store(-1)
					finished.Store(-1)
					ready := make(chan struct{})
					watched := make(chan struct{})
					pubErr := make(chan error, 1)
					go func() {
						last := -1
						for i := 0; ; i++ {
							if i == warmup+maxAhead {
								<-watched
							}
							started.Store(int64(i))
							if err := b.Publish(i); err != nil {
								pubErr <- err
								return
							}
							finished.Store(int64(i))
							if i == warmup {
								close(ready)
							}
							if last < 0 {
								select {
								case <-watched:
									last = i + tail
								default:
								}
							}
							if last >= 0 && i >= last {
								pubErr <- nil
								return
							}
						}
					}()

					<-ready
					before := int(finished.Load()) // Publish of 0..before returned before Watch was called
					w := watch(t, b, with(pc.p, qlen)...)
					after := int(started.Load()) // Publish of after+1.. started after Watch returned
					close(watched)
					got := reader(w, rp, 0)
					if err := <-pubErr; err != nil {
						t.Fatalf("Publish: %v", err)
					}
					final := int(finished.Load())
					shutdown(t, b)
					vs := <-got

					if len(vs) == 0 {
						t.Fatalf("watcher received nothing; want at least %d..%d", after+1, final)
					}
					if slices.Contains(vs, 0) {
						// 0 was published first, long before Watch: it is
						// also what a ring slot never written holds
						// (TestRegressionWatchDuringIdlePublishes).
						t.Fatalf("the watcher received 0, published long before Watch (received %v...)", vs[:min(len(vs), 5)])
					}
					if vs[0] <= before {
						t.Errorf("watcher received %d, published before Watch was called (last such value %d)", vs[0], before)
					}
					if vs[0] > after+1 {
						t.Errorf("watcher's first value is %d; want every value from %d on (published after Watch returned)", vs[0], after+1)
					}
					if d := diff(testutil.Seq(vs[0], final+1), vs); d != "" {
						t.Errorf("stream is not every value from its first to the last published (-want +got):\n%s", d)
					}
					checkDropped(t, "w", w, 0)
				})
			})
		}
	}
}

// --- Guarantee 2 ---------------------------------------------------------

// TestTotalOrder covers guarantee 2: several goroutines publish at once to
// watchers of every policy and read path. Lossless watchers all see the same
// sequence, lossy ones a subsequence of it, a late watcher a suffix of it, and
// each publishing goroutine's own order is kept.
func TestTotalOrder(t *testing.T) {
	const pubs, per = 4, 250
	const total = pubs * per
	c, all := readPaths[0], readPaths[1]
	prefix := []int{-1, -2, -3}
	specs := []struct {
		name     string
		opts     []broadcast.Option
		path     readPath
		lossless bool
		prefix   []int // WatchWithPrefix if not nil
	}{
		{"Block/C", with(broadcast.Block, 4), c, true, nil},
		{"Block/All", with(broadcast.Block, 1), all, true, nil},
		{"BlockFor/C", with(broadcast.BlockFor(time.Hour), 2), c, true, nil},
		{"BlockFor/All", with(broadcast.BlockFor(time.Hour), 3), all, true, nil},
		{"Drop-roomy/All", with(broadcast.Drop, total), all, true, nil},
		{"DropOldest-roomy/C", with(broadcast.DropOldest, total), c, true, nil},
		{"Drop-small/C", with(broadcast.Drop, 3), c, false, nil},
		{"DropOldest-small/All", with(broadcast.DropOldest, 2), all, false, nil},
		{"Block-prefix/All", with(broadcast.Block, 2), all, true, prefix},
		{"Block-prefix/C", with(broadcast.Block, 2), c, true, prefix},
		{"Drop-prefix/C", with(broadcast.Drop, 2), c, false, prefix},
		{"DropOldest-prefix/C", with(broadcast.DropOldest, 2), c, false, prefix},
		{"DropOldest-prefix/All", with(broadcast.DropOldest, 1), all, false, prefix},
	}
	b := newB(t)
	ws := make([]*broadcast.Watcher[int], len(specs))
	results := make([]<-chan []int, len(specs))
	for i, s := range specs {
		if s.prefix != nil {
			w, err := b.WatchWithPrefix(s.prefix, s.opts...)
			if err != nil {
				t.Fatalf("WatchWithPrefix: %v", err)
			}
			ws[i] = w
		} else {
			ws[i] = watch(t, b, s.opts...)
		}
		results[i] = reader(ws[i], s.path, 0)
	}

	halfway, lateReady := make(chan struct{}), make(chan struct{})
	errs := make(chan error, pubs)
	var wg sync.WaitGroup
	for g := range pubs {
		wg.Go(func() {
			for s := range per {
				if g == 0 && s == per/2 {
					close(halfway)
					<-lateReady
				}
				if err := b.Publish(g*per + s); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	<-halfway
	late := watch(t, b, broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(2))
	lateRes := reader(late, all, 0)
	close(lateReady)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Publish: %v", err)
	}
	shutdown(t, b)

	got := make([][]int, len(specs))
	for i, s := range specs {
		got[i] = <-results[i]
		if s.prefix != nil {
			if len(got[i]) < len(s.prefix) || !slices.Equal(got[i][:len(s.prefix)], s.prefix) {
				t.Fatalf("%s: stream does not start with the whole prefix %v: %v", s.name, s.prefix, got[i][:min(len(got[i]), 10)])
			}
			got[i] = got[i][len(s.prefix):]
		}
	}
	ref := got[0]
	sorted := slices.Clone(ref)
	slices.Sort(sorted)
	if d := diff(testutil.Seq(0, total), sorted); d != "" {
		t.Fatalf("%s did not receive every value exactly once (-want +got):\n%s", specs[0].name, d)
	}
	for i, s := range specs {
		last := make([]int, pubs)
		for g := range last {
			last[g] = -1
		}
		for _, v := range got[i] {
			g, seq := v/per, v%per
			if seq <= last[g] {
				t.Errorf("%s: goroutine %d's value %d arrived after its value %d", s.name, g, seq, last[g])
				break
			}
			last[g] = seq
		}
		if s.lossless {
			if d := diff(ref, got[i]); d != "" {
				t.Errorf("%s and %s disagree on the order (-%s +%s):\n%s", specs[0].name, s.name, specs[0].name, s.name, d)
			}
		} else if !testutil.IsSubsequence(got[i], ref) {
			t.Errorf("%s's stream is not a subsequence of %s's: the watchers disagree on the order", s.name, specs[0].name)
		}
		if n := uint64(len(got[i])) + ws[i].Dropped(); n != total {
			t.Errorf("%s: received %d + Dropped() %d = %d, want %d", s.name, len(got[i]), ws[i].Dropped(), n, total)
		}
	}
	lateGot := <-lateRes
	if len(lateGot) > len(ref) || !slices.Equal(lateGot, ref[len(ref)-len(lateGot):]) {
		t.Errorf("late watcher's %d values are not a suffix of the total order", len(lateGot))
	}
	for s := per/2 + 1; s < per; s++ { // published by goroutine 0 after the late Watch returned
		if !slices.Contains(lateGot, s) {
			t.Errorf("late watcher missed %d, published after its Watch returned", s)
			break
		}
	}
}

// --- Guarantee 3 ---------------------------------------------------------

// TestNeverReadingWatcher covers guarantee 3: a watcher nobody reads holds
// exactly its queue length, the first values under Drop and BlockFor, the
// last under DropOldest, and counts every value it lost.
// The same holds once C() was called (C-called-first): C()'s channel is the
// watcher's queue, and nothing reads while Shutdown runs.
func TestNeverReadingWatcher(t *testing.T) {
	const qlen, n = 3, 10
	cases := []struct {
		name string
		p    broadcast.Policy
		want []int
		wait time.Duration // time each Publish that finds the watcher full takes
	}{
		{"Drop", broadcast.Drop, []int{1, 2, 3}, 0},
		{"DropOldest", broadcast.DropOldest, []int{8, 9, 10}, 0},
		{"BlockFor", broadcast.BlockFor(time.Second), []int{1, 2, 3}, time.Second},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			for _, touched := range []bool{false, true} {
				name := tc.name + "/" + rp.name
				want := tc.want
				if touched {
					name += "/C-called-first"
				}
				lost := n - len(want)
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						b := newB(t)
						publish(t, b, -1) // before Watch: never seen
						w := watch(t, b, with(tc.p, qlen)...)
						if touched {
							w.C()
						}
						start := time.Now()
						for v := 1; v <= n; v++ {
							publish(t, b, v)
							synctest.Wait() // the forwarder, if any, takes what it can
						}
						if got := time.Since(start); got != time.Duration(lost)*tc.wait {
							t.Errorf("publishing took %v, want %v", got, time.Duration(lost)*tc.wait)
						}
						checkDropped(t, "w", w, uint64(lost))
						checkStats(t, b, broadcast.Stats{Published: n + 1, Dropped: uint64(lost), Watchers: 1})
						if l := w.Len(); l != len(want) {
							t.Errorf("Len() = %d, want %d", l, len(want))
						}
						got := readAfterShutdown(t, b, w, rp, touched)
						if d := diff(want, got); d != "" {
							t.Errorf("held values (-want +got):\n%s", d)
						}
						checkDropped(t, "w", w, uint64(lost))
						if r := uint64(len(got)) + w.Dropped(); r != n {
							t.Errorf("received + Dropped() = %d, want %d published to it", r, n)
						}
					})
				})
			}
		}
	}

	t.Run("several watchers", func(t *testing.T) {
		b := newB(t)
		a := watch(t, b, with(broadcast.Drop, 2)...)
		o := watch(t, b, with(broadcast.DropOldest, 4)...)
		publish(t, b, 1, 2, 3)
		l := watch(t, b, with(broadcast.Drop, 1)...)
		publish(t, b, 4, 5, 6, 7, 8)
		checkDropped(t, "a", a, 6)
		checkDropped(t, "o", o, 4)
		checkDropped(t, "l", l, 4)
		checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 14, Watchers: 3})
		shutdown(t, b)
		for _, c := range []struct {
			name string
			w    *broadcast.Watcher[int]
			want []int
		}{{"a", a, []int{1, 2}}, {"o", o, []int{5, 6, 7, 8}}, {"l", l, []int{4}}} {
			if d := diff(c.want, testutil.Drain(t, c.w.C(), guard)); d != "" {
				t.Errorf("%s held (-want +got):\n%s", c.name, d)
			}
		}
	})
}

// TestLossyAfterReaderFreesRoom covers guarantee 3 across reads: a value read
// frees exactly one place, Drop keeps the oldest held values, DropOldest the
// newest, BlockFor drops like Drop after waiting.
//
// Read through C() (called at the first read, with the queue full), the
// watcher also holds min(ChannelBuffer, 2) = 2 values in flight (1 in the
// channel, 1 in the forwarder's send), which are never dropped: where that
// changes what it keeps, restC and droppedC say so. Every step is followed
// by synctest.Wait so that the forwarder takes what it can; since more is
// queued than the channel holds, the C() watcher is read while Shutdown
// runs (Shutdown waits for a C() reader).
func TestLossyAfterReaderFreesRoom(t *testing.T) {
	type step struct {
		pub  []int         // values to publish, or
		read []int         // values a read must return
		wait time.Duration // how long the publishing takes
	}
	cases := []struct {
		name     string
		p        broadcast.Policy
		steps    []step
		rest     []int // what remains after Shutdown
		dropped  uint64
		restC    []int // through C(), if not rest
		droppedC uint64
	}{
		{"Drop/read one", broadcast.Drop, []step{{pub: []int{1, 2, 3}}, {read: []int{1}}, {pub: []int{4}}}, []int{2, 4}, 1, nil, 0},
		{"Drop/read all", broadcast.Drop, []step{{pub: []int{1, 2, 3}}, {read: []int{1, 2}}, {pub: []int{4, 5, 6}}}, []int{4, 5}, 2, nil, 0},
		{"DropOldest/read all", broadcast.DropOldest, []step{{pub: []int{1, 2, 3}}, {read: []int{2, 3}}, {pub: []int{4}}}, []int{4}, 1, nil, 0},
		{"DropOldest/read one", broadcast.DropOldest, []step{{pub: []int{1, 2, 3}}, {read: []int{2}}, {pub: []int{4, 5}}}, []int{4, 5}, 2, nil, 0},
		{"BlockFor/read one", broadcast.BlockFor(time.Second), []step{{pub: []int{1, 2, 3}, wait: time.Second}, {read: []int{1}}, {pub: []int{4}}}, []int{2, 4}, 1, nil, 0},
		{"Block/read one", broadcast.Block, []step{{pub: []int{1, 2}}, {read: []int{1}}, {pub: []int{3}}}, []int{2, 3}, 0, nil, 0},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			t.Run(tc.name+"/"+rp.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					viaC := rp.name == "C"
					rest, dropped := tc.rest, tc.dropped
					if viaC && tc.restC != nil {
						rest, dropped = tc.restC, tc.droppedC
					}
					b := newB(t)
					w := watch(t, b, with(tc.p, 2)...)
					for _, s := range tc.steps {
						if s.read != nil {
							if d := diff(s.read, rp.take(t, w, len(s.read))); d != "" {
								t.Fatalf("read (-want +got):\n%s", d)
							}
							synctest.Wait() // the forwarder, if any, takes what it can
							continue
						}
						start := time.Now()
						for _, v := range s.pub {
							if tc.p == broadcast.Block {
								publishNoWait(t, b, v)
							} else {
								publish(t, b, v)
							}
							synctest.Wait()
						}
						if got := time.Since(start); got != s.wait {
							t.Errorf("publishing %v took %v, want %v", s.pub, got, s.wait)
						}
					}
					checkDropped(t, "w", w, dropped)
					if l := w.Len(); l != len(rest) {
						t.Errorf("Len() = %d, want %d", l, len(rest))
					}
					got := readAfterShutdown(t, b, w, rp, viaC)
					if d := diff(rest, got); d != "" {
						t.Errorf("after Shutdown (-want +got):\n%s", d)
					}
					checkDropped(t, "w", w, dropped)
				})
			})
		}
	}
}

// --- Guarantee 4 ---------------------------------------------------------

// TestBlockHoldsQueueLength covers guarantee 4's "a publisher may wait": a
// Block watcher takes exactly its queue length, then Publish waits until a
// read makes room. (Through C(), called at the read, the forwarder takes
// the 3 queued values at once, which is room too; after the read the
// watcher holds 2, 3 and 4, more than C()'s channel of 2, so it is read
// while Shutdown runs.)
func TestBlockHoldsQueueLength(t *testing.T) {
	for _, rp := range readPaths {
		t.Run(rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				w := watch(t, b, with(broadcast.Block, 3)...)
				publishNoWait(t, b, 1, 2, 3)
				pub := async(func() error { return b.Publish(4) })
				synctest.Wait()
				if _, ok := returned(pub); ok {
					t.Fatal("Publish(4) returned with 3 values held at queue length 3; want it to wait")
				}
				if d := diff([]int{1}, rp.take(t, w, 1)); d != "" {
					t.Fatalf("read (-want +got):\n%s", d)
				}
				synctest.Wait()
				err, ok := returned(pub)
				if !ok {
					t.Fatal("Publish(4) still waiting after a read made room")
				}
				if err != nil {
					t.Fatalf("Publish(4): %v", err)
				}
				var rest []int
				if rp.name == "C" {
					rest = shutdownReading(t, b, w, rp)
				} else {
					shutdown(t, b)
					rest = rp.take(t, w, -1)
				}
				if d := diff([]int{2, 3, 4}, rest); d != "" {
					t.Errorf("after Shutdown (-want +got):\n%s", d)
				}
				checkDropped(t, "w", w, 0)
			})
		})
	}
}

// TestBlockLossless covers guarantee 4: a slow reader of a Block watcher
// gets every value; a fast Drop watcher beside it is not held up into losing
// anything either.
func TestBlockLossless(t *testing.T) {
	const n = 200
	for _, rp := range readPaths {
		t.Run(rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				slow := watch(t, b, with(broadcast.Block, 2)...)
				fast := watch(t, b, with(broadcast.Drop, n)...)
				slowGot := make(chan []int, 1)
				go func() {
					var vs []int
					rp.loop(slow, func(v int) bool {
						vs = append(vs, v)
						time.Sleep(time.Millisecond) // virtual: a slow consumer
						return true
					})
					slowGot <- vs
				}()
				fastGot := reader(fast, readPaths[0], 0)
				start := time.Now()
				publish(t, b, testutil.Seq(0, n)...)
				if waited := time.Since(start); waited < (n-10)*time.Millisecond {
					t.Errorf("publishing to a Block watcher read every 1ms took %v; want the publisher to wait for the reader", waited)
				}
				shutdown(t, b)
				if d := diff(testutil.Seq(0, n), <-slowGot); d != "" {
					t.Errorf("Block watcher lost values (-want +got):\n%s", d)
				}
				if d := diff(testutil.Seq(0, n), <-fastGot); d != "" {
					t.Errorf("Drop watcher (-want +got):\n%s", d)
				}
				checkDropped(t, "slow", slow, 0)
				checkStats(t, b, broadcast.Stats{Published: n, Dropped: 0, Watchers: 0})
			})
		})
	}
}

// TestStopReleasesBlockedPublish covers guarantee 4's second half: Stop on a
// full Block watcher that a Publish waits for releases that Publish at once,
// whether Stop runs in another goroutine or in the reader's own loop.
func TestStopReleasesBlockedPublish(t *testing.T) {
	t.Run("from another goroutine", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			wedged := watch(t, b, with(broadcast.Block, 1)...)
			other := watch(t, b, with(broadcast.Drop, 10)...)
			publish(t, b, 1)
			var pubs []<-chan error
			for v := 2; v <= 4; v++ { // several publishers queue up behind it
				pubs = append(pubs, async(func() error { return b.Publish(v) }))
				synctest.Wait()
			}
			for i, p := range pubs {
				if _, ok := returned(p); ok {
					t.Fatalf("Publish(%d) returned although a Block watcher is full", i+2)
				}
			}
			start := time.Now()
			stopped := async(func() error { wedged.Stop(); return nil })
			synctest.Wait()
			if _, ok := returned(stopped); !ok {
				t.Fatal("Stop is waiting")
			}
			for i, p := range pubs {
				err, ok := returned(p)
				if !ok {
					t.Fatalf("Publish(%d) still waiting after Stop", i+2)
				}
				if err != nil {
					t.Errorf("Publish(%d): %v", i+2, err)
				}
			}
			if d := time.Since(start); d != 0 {
				t.Errorf("Stop released the Publish after %v, want at once", d)
			}
			checkStats(t, b, broadcast.Stats{Published: 4, Dropped: 0, Watchers: 1})
			checkDropped(t, "wedged", wedged, 0)
			shutdown(t, b)
			if got := testutil.Drain(t, wedged.C(), guard); !slices.Equal(got, []int{1}[:len(got)]) {
				t.Errorf("stopped watcher yielded %v, want a prefix of [1]", got)
			}
			if d := diff([]int{1, 2, 3, 4}, slices.Sorted(slices.Values(testutil.Drain(t, other.C(), guard)))); d != "" {
				t.Errorf("other watcher (-want +got):\n%s", d)
			}
		})
	})

	for _, rp := range readPaths {
		t.Run("from the reader's loop/"+rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				w := watch(t, b, with(broadcast.Block, 1)...)
				pub := async(func() error {
					for v := 1; v <= 5; v++ {
						if err := b.Publish(v); err != nil {
							return err
						}
					}
					return nil
				})
				var got []int
				var start time.Time
				rp.loop(w, func(v int) bool {
					got = append(got, v)
					if len(got) > 1 {
						return true
					}
					synctest.Wait()
					if _, ok := returned(pub); ok {
						t.Error("publisher finished 5 values into a Block watcher of length 1 read once")
					}
					start = time.Now()
					w.Stop()
					return true
				})
				synctest.Wait()
				err, ok := returned(pub)
				if !ok {
					t.Fatal("publisher still waiting after Stop inside the reader's loop")
				}
				if err != nil {
					t.Errorf("Publish: %v", err)
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("Stop released the Publish after %v, want at once", d)
				}
				if len(got) == 0 || got[0] != 1 || !slices.Equal(got, testutil.Seq(1, len(got)+1)) || len(got) > 2 {
					t.Errorf("reader got %v, want 1 then at most the values already queued", got)
				}
				checkDropped(t, "w", w, 0)
			})
		})
	}
}

// --- Guarantee 5 ---------------------------------------------------------

// TestWatchWithPrefix covers guarantee 5: the prefix comes first and is never
// dropped, the watcher holds the prefix plus its queue length, and after the
// prefix it behaves as Watch (barrier and policy included).
func TestWatchWithPrefix(t *testing.T) {
	prefix := []int{-1, -2, -3}
	cases := []struct {
		name    string
		p       broadcast.Policy
		prefix  []int
		want    []int
		dropped uint64
		wait    time.Duration
	}{
		{"Drop", broadcast.Drop, prefix, []int{-1, -2, -3, 1, 2}, 3, 0},
		{"DropOldest", broadcast.DropOldest, prefix, []int{-1, -2, -3, 4, 5}, 3, 0},
		{"BlockFor", broadcast.BlockFor(time.Second), prefix, []int{-1, -2, -3, 1, 2}, 3, 3 * time.Second},
		{"Drop/nil prefix", broadcast.Drop, nil, []int{1, 2}, 3, 0},
		{"DropOldest/empty prefix", broadcast.DropOldest, []int{}, []int{4, 5}, 3, 0},
		{"Drop/long prefix", broadcast.Drop, testutil.Seq(100, 110), append(testutil.Seq(100, 110), 1, 2), 3, 0},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			t.Run(tc.name+"/"+rp.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newB(t)
					publish(t, b, 0) // before the watcher: not part of its stream
					w, err := b.WatchWithPrefix(tc.prefix, with(tc.p, 2)...)
					if err != nil {
						t.Fatalf("WatchWithPrefix: %v", err)
					}
					start := time.Now()
					publish(t, b, 1, 2, 3, 4, 5)
					if got := time.Since(start); got != tc.wait {
						t.Errorf("publishing took %v, want %v", got, tc.wait)
					}
					checkDropped(t, "w", w, tc.dropped)
					shutdown(t, b)
					if d := diff(tc.want, rp.take(t, w, -1)); d != "" {
						t.Errorf("stream (-want +got):\n%s", d)
					}
					checkStats(t, b, broadcast.Stats{Published: 6, Dropped: tc.dropped, Watchers: 0})
				})
			})
		}
	}

	// Block: the prefix does not count against the queue length. (Through
	// C(), called at the read, the forwarder then holds values in flight
	// beyond the queue length: the watcher's limit through C() is tested
	// by TestContractHarness. After the read it holds 2 and 3, more than
	// C()'s channel of 1, so it is read while Shutdown runs.)
	for _, rp := range readPaths {
		t.Run("Block/"+rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				w, err := b.WatchWithPrefix(prefix, with(broadcast.Block, 2)...)
				if err != nil {
					t.Fatalf("WatchWithPrefix: %v", err)
				}
				publishNoWait(t, b, 1, 2)
				pub := async(func() error { return b.Publish(3) })
				synctest.Wait()
				if _, ok := returned(pub); ok {
					t.Fatal("Publish(3) returned with prefix + queue length held; want it to wait")
				}
				if d := diff([]int{-1, -2, -3, 1}, rp.take(t, w, 4)); d != "" {
					t.Fatalf("read (-want +got):\n%s", d)
				}
				if err := <-pub; err != nil {
					t.Fatalf("Publish(3): %v", err)
				}
				var rest []int
				if rp.name == "C" {
					rest = shutdownReading(t, b, w, rp)
				} else {
					shutdown(t, b)
					rest = rp.take(t, w, -1)
				}
				if d := diff([]int{2, 3}, rest); d != "" {
					t.Errorf("after Shutdown (-want +got):\n%s", d)
				}
				checkDropped(t, "w", w, 0)
			})
		})
	}

	t.Run("prefix first with a live reader", func(t *testing.T) {
		b := newB(t)
		w, err := b.WatchWithPrefix(testutil.Seq(-50, 0), with(broadcast.Block, 1)...)
		if err != nil {
			t.Fatalf("WatchWithPrefix: %v", err)
		}
		got := reader(w, readPaths[0], 0)
		publish(t, b, testutil.Seq(0, 100)...)
		shutdown(t, b)
		if d := diff(testutil.Seq(-50, 100), <-got); d != "" {
			t.Errorf("stream (-want +got):\n%s", d)
		}
	})
}

// --- Guarantee 6 ---------------------------------------------------------

// TestShutdown covers guarantee 6: ErrClosed from Shutdown's start, queued
// values readable after it on both read paths, the ctx deadline with a
// wedged Block watcher, repeated calls, and Shutdown racing everything else.
func TestShutdown(t *testing.T) {
	t.Run("ErrClosed afterwards", func(t *testing.T) {
		b := newB(t)
		publish(t, b, 1)
		shutdown(t, b)
		checkClosedErrors(t, b)
		checkStats(t, b, broadcast.Stats{Published: 1, Dropped: 0, Watchers: 0})
	})

	t.Run("ErrClosed from its start", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			wedged := watch(t, b, with(broadcast.Block, 1)...)
			other := watch(t, b, with(broadcast.Drop, 5)...)
			publish(t, b, 1)
			pub := async(func() error { return b.Publish(2) })
			synctest.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			shut := async(func() error { return b.Shutdown(ctx) })
			synctest.Wait()
			if _, ok := returned(shut); ok {
				t.Fatal("Shutdown returned while a Publish waits on a full Block watcher")
			}
			ops := async(func() error { checkClosedErrors(t, b); return nil })
			synctest.Wait()
			if _, ok := returned(ops); !ok {
				t.Fatal("Publish/TryPublish/Watch wait while Shutdown is in progress; want ErrClosed at once")
			}
			// Reading makes room: the waiting value is delivered, Shutdown completes.
			if d := diff([]int{1, 2}, testutil.Collect(t, wedged.C(), 2, guard)); d != "" {
				t.Errorf("wedged watcher (-want +got):\n%s", d)
			}
			if err := <-shut; err != nil {
				t.Errorf("Shutdown = %v, want nil once everything was delivered", err)
			}
			if err := <-pub; err != nil {
				t.Errorf("Publish(2), accepted before Shutdown and delivered: %v", err)
			}
			if d := diff([]int{1, 2}, testutil.Drain(t, other.C(), guard)); d != "" {
				t.Errorf("other watcher (-want +got):\n%s", d)
			}
			if closed, extra := isClosedNow(wedged.C()); !closed || extra != nil {
				t.Errorf("wedged watcher after Shutdown: closed %v, extra %v", closed, extra)
			}
		})
	})

	for _, pc := range policyCases {
		for _, rp := range readPaths {
			for _, early := range []bool{false, true} {
				name := pc.name + "/" + rp.name
				if early {
					name += "/C-called-before"
				}
				t.Run("queued values readable/"+name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						b := newB(t)
						// Queue length 6: with C() called before, its channel
						// holds the whole queue (guarantee 3).
						w := watch(t, b, with(pc.p, 6)...)
						var c <-chan int
						if early {
							c = w.C()
							if cap(c) != 6 {
								t.Fatalf("cap(C()) = %d, want 6, the queue length", cap(c))
							}
						}
						publishNoWait(t, b, 1, 2, 3, 4, 5)
						shutdown(t, b)
						checkStats(t, b, broadcast.Stats{Published: 5, Dropped: 0, Watchers: 0})
						if d := diff([]int{1, 2, 3, 4, 5}, rp.take(t, w, -1)); d != "" {
							t.Errorf("after Shutdown (-want +got):\n%s", d)
						}
						synctest.Wait()
						if closed, extra := isClosedNow(w.C()); !closed || extra != nil {
							t.Errorf("C() after draining: closed %v, extra %v", closed, extra)
						}
						if early && w.C() != c {
							t.Error("C() returned a different channel after Shutdown")
						}
						if got := rp.take(t, w, -1); got != nil {
							t.Errorf("second read after Shutdown yielded %v", got)
						}
					})
				})
			}
		}
	}

	for _, cancelCase := range []struct {
		name string
		want error
	}{{"deadline", context.DeadlineExceeded}, {"cancel", context.Canceled}} {
		t.Run("ctx ends with a wedged Block watcher/"+cancelCase.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				wedged := watch(t, b, with(broadcast.Block, 1)...)
				roomy := watch(t, b, with(broadcast.Drop, 10)...)
				publish(t, b, 1)
				pub := async(func() error { return b.Publish(2) })
				synctest.Wait()
				if _, ok := returned(pub); ok {
					t.Fatal("Publish(2) did not wait on the full Block watcher")
				}
				var ctx context.Context
				var cancel context.CancelFunc
				if cancelCase.want == context.Canceled {
					ctx, cancel = context.WithCancel(context.Background())
					go func() { time.Sleep(5 * time.Second); cancel() }()
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
				}
				defer cancel()
				start := time.Now()
				err := b.Shutdown(ctx)
				if !errors.Is(err, cancelCase.want) {
					t.Errorf("Shutdown = %v, want %v", err, cancelCase.want)
				}
				if d := time.Since(start); d != 5*time.Second {
					t.Errorf("Shutdown returned after %v, want 5s (when ctx ended)", d)
				}
				if err := <-pub; !errors.Is(err, broadcast.ErrClosed) {
					t.Errorf("the waiting Publish(2) = %v, want ErrClosed", err)
				}
				st := b.Stats()
				if st.Published != 1 && st.Published != 2 { // whether the interrupted value counts is not specified
					t.Errorf("Stats().Published = %d, want 1 or 2", st.Published)
				}
				checkStats(t, b, broadcast.Stats{Published: st.Published, Dropped: wedged.Dropped() + roomy.Dropped()})
				if wedged.Dropped() == 0 {
					t.Error("wedged watcher: Dropped() = 0, want the undelivered value counted")
				}
				for _, w := range []struct {
					name string
					w    *broadcast.Watcher[int]
				}{{"wedged", wedged}, {"roomy", roomy}} {
					got := testutil.Drain(t, w.w.C(), guard) // closed: this ends
					if !slices.Equal(got, []int{1, 2}[:min(len(got), 2)]) {
						t.Errorf("%s yielded %v, want a prefix of [1 2]", w.name, got)
					}
					if n := uint64(len(got)) + w.w.Dropped(); n != 2 {
						t.Errorf("%s: received %d + Dropped() %d = %d, want 2", w.name, len(got), w.w.Dropped(), n)
					}
				}
				if err := b.Shutdown(context.Background()); err != nil {
					t.Errorf("second Shutdown = %v, want nil", err)
				}
				checkClosedErrors(t, b)
			})
		})
	}

	t.Run("further calls return nil", func(t *testing.T) {
		b := newB(t)
		w := watch(t, b)
		publish(t, b, 1)
		shutdown(t, b)
		done, cancel := context.WithCancel(context.Background())
		cancel()
		if err := b.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown(Background) after the first finished = %v, want nil", err)
		}
		// Even with a ctx that is already done: the first has finished.
		// Repeated, so that a random choice between the two shows up.
		for i := range 64 {
			if err := b.Shutdown(done); err != nil {
				t.Errorf("Shutdown(canceled ctx) after the first finished = %v, want nil (call %d)", err, i+3)
				break
			}
		}
		if d := diff([]int{1}, testutil.Drain(t, w.C(), guard)); d != "" {
			t.Errorf("queued values (-want +got):\n%s", d)
		}
	})

	t.Run("concurrent with Stop, Publish, Watch", testShutdownStress)
}

// checkClosedErrors checks that every entry point reports ErrClosed.
func checkClosedErrors(t testing.TB, b *broadcast.Broadcaster[int]) {
	t.Helper()
	before := b.Stats().Published
	if err := b.Publish(100); !errors.Is(err, broadcast.ErrClosed) {
		t.Errorf("Publish = %v, want ErrClosed", err)
	}
	if err := b.PublishContext(context.Background(), 101); !errors.Is(err, broadcast.ErrClosed) {
		t.Errorf("PublishContext = %v, want ErrClosed", err)
	}
	if ok, err := b.TryPublish(102); ok || !errors.Is(err, broadcast.ErrClosed) {
		t.Errorf("TryPublish = (%v, %v), want (false, ErrClosed)", ok, err)
	}
	if _, err := b.Watch(); !errors.Is(err, broadcast.ErrClosed) {
		t.Errorf("Watch = %v, want ErrClosed", err)
	}
	if _, err := b.WatchWithPrefix([]int{1}); !errors.Is(err, broadcast.ErrClosed) {
		t.Errorf("WatchWithPrefix = %v, want ErrClosed", err)
	}
	if got := b.Stats().Published; got != before {
		t.Errorf("Stats().Published went from %d to %d after Shutdown", before, got)
	}
}

// testShutdownStress runs Shutdown while goroutines publish, watch, read and
// stop: nothing panics, errors are nil or ErrClosed, every value accepted
// reaches the watcher that was there from the start (and nothing else does),
// every watcher ends, Stats adds up, and (TestMain) nothing leaks.
func testShutdownStress(t *testing.T) {
	const pubs, watchers, shutters = 3, 6, 3
	const stride = 1_000_000 // value = goroutine*stride + its sequence number
	b := newB(t)
	keeper := watch(t, b, with(broadcast.Block, 4)...)
	keeperGot := reader(keeper, readPaths[1], 0)
	audit := watch(t, b, with(broadcast.Block, 2)...) // stopped racing Shutdown
	auditGot := reader(audit, readPaths[0], 0)

	var accepted [pubs]atomic.Int64 // values accepted per goroutine: 0..accepted-1
	var wg sync.WaitGroup
	fail := make(chan string, 64)
	report := func(format string, args ...any) {
		select {
		case fail <- fmt.Sprintf(format, args...):
		default:
		}
	}
	halfway := make(chan struct{})
	var once sync.Once
	for g := range pubs {
		wg.Go(func() {
			for s := 0; ; s++ {
				v := g*stride + s
				var err error
				switch s % 3 {
				case 0:
					err = b.Publish(v)
				case 1:
					err = b.PublishContext(context.Background(), v)
				case 2:
					var ok bool
					if ok, err = b.TryPublish(v); err == nil && !ok {
						err = b.Publish(v) // refused, not published: publish it for sure
					}
				}
				if errors.Is(err, broadcast.ErrClosed) {
					return
				}
				if err != nil {
					report("publish %d: %v", v, err)
					return
				}
				accepted[g].Add(1)
				if s == 300 {
					once.Do(func() { close(halfway) })
				}
			}
		})
	}
	for i := range watchers {
		wg.Go(func() {
			policy := policyCases[i%len(policyCases)].p
			rp := readPaths[i%2]
			for round := 0; ; round++ {
				w, err := b.Watch(with(policy, 1+round%3)...)
				if errors.Is(err, broadcast.ErrClosed) {
					return
				}
				if err != nil {
					report("Watch: %v", err)
					return
				}
				n := 0
				last := map[int]int{}
				stopped := false
				rp.loop(w, func(v int) bool {
					g, s := v/stride, v%stride
					if p, ok := last[g]; ok && s <= p {
						report("watcher saw goroutine %d's %d after its %d", g, s, p)
					}
					last[g] = s
					if n++; n == 5+round%7 {
						stopped = true
						w.Stop()
					}
					return true
				})
				if !stopped { // the watcher ended by itself: Shutdown closed it
					return
				}
			}
		})
	}
	<-halfway
	shut := make(chan error, shutters)
	var sw sync.WaitGroup
	for range shutters {
		sw.Go(func() { shut <- b.Shutdown(context.Background()) })
	}
	sw.Go(audit.Stop)
	sw.Go(audit.Stop)
	sw.Wait()
	close(shut)
	for err := range shut {
		if err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
	}
	wg.Wait()
	close(fail)
	for msg := range fail {
		t.Error(msg)
	}

	var total uint64
	want := map[int][]int{}
	for g := range accepted {
		n := int(accepted[g].Load())
		total += uint64(n)
		want[g] = testutil.Seq(g*stride, g*stride+n)
	}
	perGoroutine := func(vs []int) map[int][]int {
		m := map[int][]int{}
		for g := range pubs {
			m[g] = nil
		}
		for _, v := range vs {
			m[v/stride] = append(m[v/stride], v)
		}
		return m
	}
	if d := diff(want, perGoroutine(<-keeperGot)); d != "" {
		t.Errorf("Block watcher registered first, read to the end: want every accepted value (-want +got):\n%s", d)
	}
	for g, vs := range perGoroutine(<-auditGot) { // stopped at some point: a prefix of each
		if !slices.Equal(vs, want[g][:min(len(vs), len(want[g]))]) || len(vs) > len(want[g]) {
			t.Errorf("stopped Block watcher: goroutine %d's values are not a prefix of those accepted", g)
		}
	}
	checkDropped(t, "keeper", keeper, 0)
	checkStats(t, b, broadcast.Stats{Published: total, Dropped: b.Stats().Dropped, Watchers: 0})
}

// --- Guarantee 7 ---------------------------------------------------------

// TestNoGoroutineAfterShutdown covers guarantee 7 for one broadcaster, with
// watchers of every policy in every state (C() used, All() broken out of,
// Block reader running, BlockFor timing, Stop called).
func TestNoGoroutineAfterShutdown(t *testing.T) {
	t.Run("drained", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		b := broadcast.New[int](broadcast.WithQueueLength(2))
		var ws []*broadcast.Watcher[int]
		for _, pc := range policyCases {
			for i := range 3 {
				w := watch(t, b, broadcast.WithPolicy(pc.p))
				switch i {
				case 0:
					w.C()
				case 1:
					w.Stop()
				}
				ws = append(ws, w)
			}
		}
		read := reader(watch(t, b, with(broadcast.Block, 1)...), readPaths[0], 0)
		// Only TryPublish: the Block and BlockFor watchers above are never read.
		for v := range 10 {
			if _, err := b.TryPublish(v); err != nil {
				t.Fatalf("TryPublish: %v", err)
			}
		}
		testutil.CollectSeq(t, ws[0].All(), 1, guard) // breaks out: the watcher stays registered
		ws[2].Stop()
		// The watchers whose C() was called may hold more than their
		// channels buffer (values in flight beyond the queue length,
		// depending on how many TryPublish calls succeeded): Shutdown
		// waits for a reader to take them, so read them meanwhile.
		var drains []<-chan []int
		for i := 0; i < len(ws); i += 3 {
			drains = append(drains, reader(ws[i], readPaths[0], 0))
		}
		shutdown(t, b)
		<-read
		for _, d := range drains {
			<-d
		}
		goleak.VerifyNone(t, ignore)
	})

	t.Run("deadline", func(t *testing.T) {
		ignore := goleak.IgnoreCurrent()
		synctest.Test(t, func(t *testing.T) {
			b := broadcast.New[int]()
			wedged := watch(t, b, with(broadcast.Block, 1)...)
			watch(t, b, with(broadcast.BlockFor(time.Hour), 1)...)
			wedged.C()
			publish(t, b, 1)
			pub := async(func() error { return b.Publish(2) })
			synctest.Wait() // Publish(2) waits for both full watchers
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
			}
			<-pub
			// Inside the bubble, right after Shutdown; the bubble's own
			// goroutine that runs this function is not the broadcaster's.
			goleak.VerifyNone(t, ignore, goleak.IgnoreTopFunction("testing/synctest.testingSynctestTest"))
		})
	})
}

// --- Documented semantics beyond the numbered guarantees ----------------

// TestStats checks Published, Dropped (stopped watchers included) and
// Watchers through a watcher's whole life.
func TestStats(t *testing.T) {
	b := newB(t)
	checkStats(t, b, broadcast.Stats{})
	publish(t, b, 0) // accepted with no watcher
	checkStats(t, b, broadcast.Stats{Published: 1})
	d := watch(t, b, with(broadcast.Drop, 2)...)
	o := watch(t, b, with(broadcast.DropOldest, 2)...)
	checkStats(t, b, broadcast.Stats{Published: 1, Watchers: 2})
	publish(t, b, 1, 2, 3, 4, 5)
	checkStats(t, b, broadcast.Stats{Published: 6, Dropped: 6, Watchers: 2})
	d.Stop()
	checkStats(t, b, broadcast.Stats{Published: 6, Dropped: 6, Watchers: 1})
	checkDropped(t, "d", d, 3)
	publish(t, b, 6)
	if ok, err := b.TryPublish(7); !ok || err != nil {
		t.Fatalf("TryPublish = (%v, %v), want (true, nil)", ok, err)
	}
	checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 8, Watchers: 1})
	checkDropped(t, "d", d, 3)
	checkDropped(t, "o", o, 5)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_ = b.PublishContext(done, 8)
	checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 8, Watchers: 1})
	shutdown(t, b)
	checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 8, Watchers: 0})
	if d := diff([]int{6, 7}, testutil.Drain(t, o.C(), guard)); d != "" {
		t.Errorf("DropOldest watcher (-want +got):\n%s", d)
	}
}

// TestStop checks that after Stop returns nothing more is queued, C() is
// closed (keeping what it already buffered), All() ends, undelivered values
// are not counted as dropped, Stats().Watchers goes down, and that C() keeps
// returning the same channel.
func TestStop(t *testing.T) {
	for _, pc := range policyCases {
		for _, rp := range readPaths {
			for _, early := range []bool{false, true} {
				name := pc.name + "/" + rp.name
				if early {
					name += "/C-called-before"
				}
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						b := newB(t)
						other := watch(t, b, with(broadcast.Drop, 10)...)
						w := watch(t, b, with(pc.p, 5)...)
						var c <-chan int
						if early {
							c = w.C()
						}
						publishNoWait(t, b, 1, 2, 3)
						checkStats(t, b, broadcast.Stats{Published: 3, Watchers: 2})
						w.Stop()
						checkStats(t, b, broadcast.Stats{Published: 3, Watchers: 1})
						publishNoWait(t, b, 4, 5)
						synctest.Wait()
						got := rp.take(t, w, -1) // ends: the watcher is stopped
						// All() ends at once; C() may still hold what it had buffered.
						closed, rest := isClosedNow(w.C())
						if !closed {
							t.Error("C() is not closed after Stop")
						}
						if got = append(got, rest...); !slices.Equal(got, []int{1, 2, 3}[:min(len(got), 3)]) {
							t.Errorf("stopped watcher yielded %v, want a prefix of [1 2 3] (what C() had buffered)", got)
						}
						if early && w.C() != c {
							t.Error("C() returned a different channel after Stop")
						}
						checkDropped(t, "w", w, 0)
						checkStats(t, b, broadcast.Stats{Published: 5, Dropped: 0, Watchers: 1})
						shutdown(t, b)
						if d := diff([]int{1, 2, 3, 4, 5}, testutil.Drain(t, other.C(), guard)); d != "" {
							t.Errorf("other watcher (-want +got):\n%s", d)
						}
					})
				})
			}
		}
	}

	t.Run("keeps Dropped", func(t *testing.T) {
		b := newB(t)
		w := watch(t, b, with(broadcast.Drop, 1)...)
		publish(t, b, 1, 2, 3)
		w.Stop()
		checkDropped(t, "w", w, 2)
		checkStats(t, b, broadcast.Stats{Published: 3, Dropped: 2, Watchers: 0})
	})

	t.Run("same channel", func(t *testing.T) {
		b := newB(t)
		w := watch(t, b)
		c := w.C()
		if w.C() != c {
			t.Fatal("second C() returned a different channel")
		}
		publish(t, b, 1)
		if got := testutil.Collect(t, w.C(), 1, guard); !slices.Equal(got, []int{1}) {
			t.Fatalf("C() = %v, want [1]", got)
		}
		w.Stop()
		if w.C() != c {
			t.Error("C() after Stop returned a different channel")
		}
	})

	t.Run("idempotent", func(t *testing.T) {
		b := newB(t)
		watch(t, b)
		w := watch(t, b)
		w.Stop()
		w.Stop()
		checkStats(t, b, broadcast.Stats{Watchers: 1})
		publish(t, b, 1)
		if got := testutil.Drain(t, w.C(), guard); got != nil {
			t.Errorf("stopped watcher yielded %v", got)
		}
	})

	t.Run("concurrent", func(t *testing.T) {
		b := newB(t)
		keep := watch(t, b)
		ws := []*broadcast.Watcher[int]{watch(t, b), watch(t, b, with(broadcast.Block, 1)...), watch(t, b)}
		publish(t, b, 1)
		var wg sync.WaitGroup
		for range 8 {
			for _, w := range ws {
				wg.Go(w.Stop)
			}
		}
		wg.Wait()
		checkStats(t, b, broadcast.Stats{Published: 1, Watchers: 1})
		publish(t, b, 2, 3) // the stopped Block watcher is full: must not matter
		shutdown(t, b)
		if d := diff([]int{1, 2, 3}, testutil.Drain(t, keep.C(), guard)); d != "" {
			t.Errorf("remaining watcher (-want +got):\n%s", d)
		}
	})

	t.Run("concurrent with Shutdown", func(t *testing.T) {
		b := newB(t)
		var ws []*broadcast.Watcher[int]
		for _, pc := range policyCases {
			ws = append(ws, watch(t, b, with(pc.p, 1)...), watch(t, b, with(pc.p, 3)...))
		}
		for _, w := range ws[:4] {
			w.C()
		}
		var published uint64
		for v := range 3 {
			ok, err := b.TryPublish(v)
			if err != nil {
				t.Fatalf("TryPublish: %v", err)
			}
			if ok {
				published++
			}
		}
		var wg sync.WaitGroup
		shut := make(chan error, 1)
		wg.Go(func() { shut <- b.Shutdown(context.Background()) })
		for _, w := range ws {
			wg.Go(w.Stop)
			wg.Go(w.Stop)
		}
		wg.Wait()
		if err := <-shut; err != nil {
			t.Errorf("Shutdown = %v, want nil", err)
		}
		for i, w := range ws {
			testutil.Drain(t, w.C(), guard) // every watcher ends
			if w.Dropped() > 3 {
				t.Errorf("watcher %d: Dropped() = %d of 3 published", i, w.Dropped())
			}
		}
		checkStats(t, b, broadcast.Stats{Published: published, Dropped: b.Stats().Dropped, Watchers: 0})
	})
}

// TestAllBreakLeavesWatcherRegistered: breaking out of All() does not stop
// the watcher; the values after the one the loop saw come next, through
// either path.
func TestAllBreakLeavesWatcherRegistered(t *testing.T) {
	for _, rp := range readPaths {
		t.Run("then "+rp.name, func(t *testing.T) {
			b := newB(t)
			w := watch(t, b, with(broadcast.Drop, 10)...)
			publish(t, b, 1, 2, 3)
			var seen []int
			for v := range w.All() {
				seen = append(seen, v)
				break
			}
			if d := diff([]int{1}, seen); d != "" {
				t.Fatalf("first loop (-want +got):\n%s", d)
			}
			checkStats(t, b, broadcast.Stats{Published: 3, Watchers: 1})
			publish(t, b, 4)
			shutdown(t, b)
			if d := diff([]int{2, 3, 4}, rp.take(t, w, -1)); d != "" {
				t.Errorf("after the break (-want +got):\n%s", d)
			}
		})
	}
}

// TestCAndAllTogether: each value goes to exactly one of C() and All(), in
// order, whether one goroutine alternates or two read at once.
func TestCAndAllTogether(t *testing.T) {
	t.Run("alternating", func(t *testing.T) {
		b := newB(t)
		w := watch(t, b, with(broadcast.Block, 30)...)
		publish(t, b, testutil.Seq(0, 30)...)
		var got []int
		for i, n := range []int{3, 2, 4, 1, 1, 5, 2} {
			got = append(got, readPaths[i%2].take(t, w, n)...)
		}
		publish(t, b, testutil.Seq(30, 40)...)
		got = append(got, readPaths[1].take(t, w, 3)...)
		shutdown(t, b)
		got = append(got, readPaths[0].take(t, w, -1)...)
		if d := diff(testutil.Seq(0, 40), got); d != "" {
			t.Errorf("values read through C() and All() in turn (-want +got):\n%s", d)
		}
	})

	// Switching from All() to C() inside the loop, then leaving the loop:
	// the values All() had not yielded yet must come through C(), the prefix
	// included. They may be more than C()'s channel holds (with a queue
	// length of 1 it is unbuffered), so C() is read while Shutdown waits
	// for its reader.
	for _, pc := range policyCases {
		for _, tc := range []struct {
			name   string
			prefix []int
			qlen   int
			pub    []int
		}{
			{"no prefix", nil, 10, []int{1, 2, 3, 4, 5}},
			{"prefix", []int{-1, -2, -3, -4, -5}, 1, []int{1}},
		} {
			t.Run("C() inside an All() loop/"+pc.name+"/"+tc.name, func(t *testing.T) {
				b := newB(t)
				w, err := b.WatchWithPrefix(tc.prefix, with(pc.p, tc.qlen)...)
				if err != nil {
					t.Fatalf("WatchWithPrefix: %v", err)
				}
				publish(t, b, tc.pub...)
				var got []int
				for v := range w.All() {
					got = append(got, v)
					w.C()
					break
				}
				got = append(got, shutdownReading(t, b, w, readPaths[0])...)
				want := append(slices.Clone(tc.prefix), tc.pub...)
				if d := diff(want, got); d != "" {
					t.Errorf("values read (-want +got):\n%s", d)
				}
				checkDropped(t, "w", w, 0)
			})
		}
	}

	// The same after Shutdown: a loop that breaks out after Shutdown and
	// C() ran gives back values that were queued when Shutdown returned;
	// they must stay readable.
	for _, pc := range policyCases {
		t.Run("Shutdown and C() inside an All() loop/"+pc.name, func(t *testing.T) {
			b := newB(t)
			w := watch(t, b, with(pc.p, 10)...)
			publish(t, b, 1, 2, 3, 4, 5)
			var got []int
			for v := range w.All() {
				got = append(got, v)
				shutdown(t, b)
				w.C()
				break
			}
			got = append(got, testutil.Drain(t, w.C(), guard)...)
			got = append(got, testutil.CollectSeq(t, w.All(), -1, guard)...)
			if d := diff([]int{1, 2, 3, 4, 5}, got); d != "" {
				t.Errorf("values read (-want +got):\n%s", d)
			}
			checkDropped(t, "w", w, 0)
		})
	}

	// One goroutine reading the watcher through a second reader inside an
	// All() loop sees one stream, in order (guarantee 2): the values the
	// loop has not yielded yet come first, and are available at once.
	for _, inner := range readPaths {
		for _, meanwhile := range []bool{false, true} {
			name := "reading " + inner.name + " inside an All() loop keeps the order"
			if meanwhile {
				name += "/published meanwhile"
			} else {
				name += "/nothing published meanwhile"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newB(t)
					w := watch(t, b)
					publish(t, b, 1, 2, 3, 4, 5)
					var got []int
					for v := range w.All() {
						got = append(got, v)
						if meanwhile {
							publish(t, b, 6)
						}
						got = append(got, inner.take(t, w, 1)...)
						break
					}
					if !meanwhile {
						publish(t, b, 6)
					}
					shutdown(t, b)
					got = append(got, testutil.Drain(t, w.C(), guard)...)
					if d := diff(testutil.Seq(1, 7), got); d != "" {
						t.Errorf("values read (-want +got):\n%s", d)
					}
				})
			})
		}
	}

	t.Run("concurrently", func(t *testing.T) {
		const n = 1000
		b := newB(t)
		w := watch(t, b, with(broadcast.Block, 4)...)
		var results []<-chan []int
		for _, rp := range readPaths {
			results = append(results, reader(w, rp, 0))
		}
		publish(t, b, testutil.Seq(0, n)...)
		shutdown(t, b)
		var all []int
		for _, res := range results {
			vs := <-res
			if !slices.IsSorted(vs) {
				t.Errorf("a reader saw values out of order: %v", vs)
			}
			all = append(all, vs...)
		}
		slices.Sort(all)
		if d := diff(testutil.Seq(0, n), all); d != "" {
			t.Errorf("union of both readers (-want +got):\n%s", d)
		}
	})
}

// TestTryPublish: (true, nil) when published, (false, nil) publishing nothing
// when a Block or BlockFor watcher is full or a Publish is waiting, (false,
// ErrClosed) after Shutdown; it never waits.
func TestTryPublish(t *testing.T) {
	try := func(t *testing.T, b *broadcast.Broadcaster[int], v int, want bool) {
		t.Helper()
		start := time.Now()
		ok, err := b.TryPublish(v)
		if ok != want || err != nil {
			t.Errorf("TryPublish(%d) = (%v, %v), want (%v, nil)", v, ok, err, want)
		}
		if d := time.Since(start); d != 0 {
			t.Errorf("TryPublish(%d) took %v, want no wait", v, d)
		}
	}
	t.Run("published", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			try(t, b, 0, true) // no watcher
			w := watch(t, b, with(broadcast.Drop, 1)...)
			try(t, b, 1, true)
			try(t, b, 2, true) // Drop never refuses: counted instead
			checkDropped(t, "w", w, 1)
			checkStats(t, b, broadcast.Stats{Published: 3, Dropped: 1, Watchers: 1})
		})
	})
	for _, full := range []struct {
		name string
		p    broadcast.Policy
	}{{"Block", broadcast.Block}, {"BlockFor", broadcast.BlockFor(time.Second)}} {
		for _, early := range []bool{false, true} {
			name := full.name + " full"
			if early {
				name += "/C-called-before"
			}
			// On both read paths w, of queue length 1, is full after 1
			// and refuses 2 (guarantee 3: C()'s channel is its queue).
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newB(t)
					other := watch(t, b, with(broadcast.Drop, 10)...)
					w := watch(t, b, with(full.p, 1)...)
					held := []int{1}
					if early {
						w.C()
					}
					for _, v := range held {
						try(t, b, v, true)
					}
					refused := len(held) + 1
					try(t, b, refused, false)
					checkStats(t, b, broadcast.Stats{Published: uint64(len(held)), Watchers: 2})
					if l := w.Len(); l != len(held) {
						t.Errorf("Len() = %d, want %d", l, len(held))
					}
					if d := diff([]int{1}, testutil.Collect(t, w.C(), 1, guard)); d != "" {
						t.Fatalf("read (-want +got):\n%s", d)
					}
					try(t, b, refused+1, true)
					rest := append(slices.Clone(held[1:]), refused+1)
					shutdown(t, b)
					if d := diff(rest, testutil.Drain(t, w.C(), guard)); d != "" {
						t.Errorf("w after the read (-want +got):\n%s", d)
					}
					if d := diff(append(slices.Clone(held), refused+1), testutil.Drain(t, other.C(), guard)); d != "" {
						t.Errorf("other watcher got what TryPublish refused (-want +got):\n%s", d)
					}
					checkDropped(t, "w", w, 0)
				})
			})
		}
	}
	t.Run("Publish waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			other := watch(t, b, with(broadcast.Drop, 10)...)
			w := watch(t, b, with(broadcast.Block, 1)...)
			publish(t, b, 1)
			pub := async(func() error { return b.Publish(2) })
			synctest.Wait()
			try(t, b, 99, false)
			w.Stop()
			if err := <-pub; err != nil {
				t.Fatalf("Publish(2): %v", err)
			}
			checkStats(t, b, broadcast.Stats{Published: 2, Watchers: 1})
			shutdown(t, b)
			if d := diff([]int{1, 2}, testutil.Drain(t, other.C(), guard)); d != "" {
				t.Errorf("other watcher (-want +got):\n%s", d)
			}
		})
	})
	t.Run("after Shutdown", func(t *testing.T) {
		b := newB(t)
		shutdown(t, b)
		if ok, err := b.TryPublish(1); ok || !errors.Is(err, broadcast.ErrClosed) {
			t.Errorf("TryPublish = (%v, %v), want (false, ErrClosed)", ok, err)
		}
	})
}

// TestPublishContext: a done ctx publishes nothing; a ctx that ends while a
// full Block watcher holds the value up delivers it to every watcher with
// room, drops and counts it for the rest, and returns ctx.Err().
func TestPublishContext(t *testing.T) {
	t.Run("already done", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			w := watch(t, b, with(broadcast.Block, 10)...)
			canceled, cancel := context.WithCancel(context.Background())
			cancel()
			expired, cancel2 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel2()
			for _, ctx := range []context.Context{canceled, expired} {
				if err := b.PublishContext(ctx, 1); err == nil || !errors.Is(err, ctx.Err()) {
					t.Errorf("PublishContext = %v, want %v", err, ctx.Err())
				}
			}
			checkStats(t, b, broadcast.Stats{Watchers: 1})
			if err := b.PublishContext(context.Background(), 2); err != nil {
				t.Errorf("PublishContext(Background) = %v", err)
			}
			shutdown(t, b)
			if d := diff([]int{2}, testutil.Drain(t, w.C(), guard)); d != "" {
				t.Errorf("watcher (-want +got):\n%s", d)
			}
		})
	})

	for _, end := range []struct {
		name string
		want error
	}{{"deadline", context.DeadlineExceeded}, {"cancel", context.Canceled}} {
		t.Run("ends while waiting/"+end.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				full := watch(t, b, with(broadcast.Block, 1)...)
				roomy := watch(t, b, with(broadcast.Block, 5)...)
				drop := watch(t, b, with(broadcast.Drop, 5)...)
				oldest := watch(t, b, with(broadcast.DropOldest, 1)...)
				slowFor := watch(t, b, with(broadcast.BlockFor(time.Hour), 1)...)
				publish(t, b, 1)
				var ctx context.Context
				var cancel context.CancelFunc
				if end.want == context.Canceled {
					ctx, cancel = context.WithCancel(context.Background())
					go func() { time.Sleep(3 * time.Second); cancel() }()
				} else {
					ctx, cancel = context.WithTimeout(context.Background(), 3*time.Second)
				}
				defer cancel()
				start := time.Now()
				if err := b.PublishContext(ctx, 2); !errors.Is(err, end.want) {
					t.Errorf("PublishContext = %v, want %v", err, end.want)
				}
				if d := time.Since(start); d != 3*time.Second {
					t.Errorf("PublishContext returned after %v, want 3s (when ctx ended)", d)
				}
				checkDropped(t, "full", full, 1)
				checkDropped(t, "oldest", oldest, 1)
				checkDropped(t, "slowFor", slowFor, 1)
				checkStats(t, b, broadcast.Stats{Published: 2, Dropped: 3, Watchers: 5})
				shutdown(t, b)
				for _, c := range []struct {
					name string
					w    *broadcast.Watcher[int]
					want []int
				}{
					{"full", full, []int{1}},
					{"roomy", roomy, []int{1, 2}},
					{"drop", drop, []int{1, 2}},
					{"oldest", oldest, []int{2}},
					{"slowFor", slowFor, []int{1}},
				} {
					if d := diff(c.want, testutil.Drain(t, c.w.C(), guard)); d != "" {
						t.Errorf("%s (-want +got):\n%s", c.name, d)
					}
				}
			})
		})
	}

	// ctx ends while the value waits behind another Publish, which waits for
	// the same full Block watcher: as documented, the value still goes to
	// the watchers with room and is counted.
	t.Run("ends while waiting behind another Publish", func(t *testing.T) {
		// Values are committed one at a time, in order: a PublishContext
		// whose ctx ends while another Publish holds the turn publishes
		// nothing (documented on PublishContext).
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			full := watch(t, b, with(broadcast.Block, 1)...)
			roomy := watch(t, b, with(broadcast.Drop, 5)...)
			publish(t, b, 1)
			first := async(func() error { return b.Publish(2) })
			synctest.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			if err := b.PublishContext(ctx, 3); !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("PublishContext = %v, want DeadlineExceeded", err)
			}
			if d := diff([]int{1}, testutil.Collect(t, full.C(), 1, guard)); d != "" {
				t.Fatalf("full watcher (-want +got):\n%s", d)
			}
			if err := <-first; err != nil {
				t.Errorf("Publish(2): %v", err)
			}
			// full's C() channel is unbuffered (queue length 1): 2 is in
			// flight, and Shutdown waits for a reader to take it.
			if d := diff([]int{2}, shutdownReading(t, b, full, readPaths[0])); d != "" {
				t.Errorf("full watcher after the read (-want +got):\n%s", d)
			}
			if d := diff([]int{1, 2}, testutil.Drain(t, roomy.C(), guard)); d != "" {
				t.Errorf("watcher with room (-want +got):\n%s", d)
			}
			checkStats(t, b, broadcast.Stats{Published: 2, Dropped: 0})
			checkDropped(t, "full", full, 0)
		})
	})

	t.Run("room in time", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			w := watch(t, b, with(broadcast.Block, 1)...)
			publish(t, b, 1)
			go func() {
				time.Sleep(time.Second)
				<-w.C()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			if err := b.PublishContext(ctx, 2); err != nil {
				t.Errorf("PublishContext = %v, want nil", err)
			}
			if d := time.Since(start); d != time.Second {
				t.Errorf("PublishContext took %v, want 1s (until the read)", d)
			}
			// w's C() channel is unbuffered (queue length 1): 2 is in
			// flight, and Shutdown waits for a reader to take it.
			if d := diff([]int{2}, shutdownReading(t, b, w, readPaths[0])); d != "" {
				t.Errorf("watcher (-want +got):\n%s", d)
			}
			checkDropped(t, "w", w, 0)
		})
	})
}

// TestBlockFor: a Publish waits at most d, measured from the Publish call,
// for a full BlockFor watcher, then drops the value for that watcher only.
func TestBlockFor(t *testing.T) {
	t.Run("drops for that watcher only", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			w := watch(t, b, with(broadcast.BlockFor(2*time.Second), 1)...)
			other := watch(t, b, with(broadcast.Drop, 5)...)
			publish(t, b, 1)
			if d := publishTimed(t, b, 2); d != 2*time.Second {
				t.Errorf("Publish took %v, want 2s", d)
			}
			checkDropped(t, "w", w, 1)
			checkDropped(t, "other", other, 0)
			checkStats(t, b, broadcast.Stats{Published: 2, Dropped: 1, Watchers: 2})
			shutdown(t, b)
			if d := diff([]int{1}, testutil.Drain(t, w.C(), guard)); d != "" {
				t.Errorf("BlockFor watcher (-want +got):\n%s", d)
			}
			if d := diff([]int{1, 2}, testutil.Drain(t, other.C(), guard)); d != "" {
				t.Errorf("other watcher (-want +got):\n%s", d)
			}
		})
	})

	t.Run("measured from the Publish call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			a := watch(t, b, with(broadcast.BlockFor(2*time.Second), 1)...)
			c := watch(t, b, with(broadcast.BlockFor(3*time.Second), 1)...)
			e := watch(t, b, with(broadcast.BlockFor(time.Second), 1)...)
			publish(t, b, 1)
			if d := publishTimed(t, b, 2); d != 3*time.Second {
				t.Errorf("Publish with full BlockFor(2s), BlockFor(3s), BlockFor(1s) watchers took %v, want 3s", d)
			}
			for _, w := range []*broadcast.Watcher[int]{a, c, e} {
				checkDropped(t, "w", w, 1)
			}
		})
	})

	t.Run("behind a Block watcher", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			blk := watch(t, b, with(broadcast.Block, 1)...)
			bf := watch(t, b, with(broadcast.BlockFor(2*time.Second), 1)...)
			publish(t, b, 1)
			go func() {
				time.Sleep(5 * time.Second)
				<-blk.C()
			}()
			if d := publishTimed(t, b, 2); d != 5*time.Second {
				t.Errorf("Publish took %v, want 5s (the Block watcher's reader)", d)
			}
			checkDropped(t, "bf", bf, 1)
			checkDropped(t, "blk", blk, 0)
			// blk's C() channel is unbuffered (queue length 1): 2 is in
			// flight, and Shutdown waits for a reader to take it.
			if d := diff([]int{2}, shutdownReading(t, b, blk, readPaths[0])); d != "" {
				t.Errorf("Block watcher (-want +got):\n%s", d)
			}
		})
	})

	// The wait is measured from the Publish call, also when the Publish
	// first waits for another publisher's turn.
	t.Run("measured from the call, behind another Publish", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := newB(t)
			blk := watch(t, b, with(broadcast.Block, 1)...)
			bf := watch(t, b, with(broadcast.BlockFor(2*time.Second), 1)...)
			publish(t, b, 1)
			go func() { // reads blk from 5s on
				time.Sleep(5 * time.Second)
				for range blk.C() {
				}
			}()
			first := async(func() error { return b.Publish(2) })
			time.Sleep(time.Second)
			if d := publishTimed(t, b, 3); d != 4*time.Second {
				t.Errorf("Publish(3), called at 1s, returned after %v; want 4s (at 5s, when the first Publish is done: its 2s for the BlockFor watcher had passed by then)", d)
			}
			if err := <-first; err != nil {
				t.Errorf("Publish(2): %v", err)
			}
			checkDropped(t, "bf", bf, 2)
		})
	})

	for _, rp := range readPaths {
		t.Run("room in time/"+rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				w := watch(t, b, with(broadcast.BlockFor(5*time.Second), 1)...)
				publish(t, b, 1)
				read := make(chan []int, 1)
				go func() {
					time.Sleep(time.Second)
					read <- <-reader(w, rp, 1)
				}()
				if d := publishTimed(t, b, 2); d != time.Second {
					t.Errorf("Publish took %v, want 1s (until the read)", d)
				}
				if d := diff([]int{1}, <-read); d != "" {
					t.Errorf("read (-want +got):\n%s", d)
				}
				checkDropped(t, "w", w, 0)
				var rest []int
				if rp.name == "C" {
					// The channel is unbuffered (queue length 1): 2 is in
					// flight, and Shutdown waits for a reader to take it.
					rest = shutdownReading(t, b, w, rp)
				} else {
					shutdown(t, b)
					rest = rp.take(t, w, -1)
				}
				if d := diff([]int{2}, rest); d != "" {
					t.Errorf("after Shutdown (-want +got):\n%s", d)
				}
			})
		})
	}
}

// TestOptions: New's options are the defaults (queue length 1000, Drop),
// Watch's override them one by one, and nil Options are ignored.
func TestOptions(t *testing.T) {
	cases := []struct {
		name    string
		newOpts []broadcast.Option
		opts    []broadcast.Option
		n       int
		want    []int
	}{
		{"defaults", nil, nil, 1001, testutil.Seq(0, 1000)},
		{"nil everywhere", []broadcast.Option{nil}, []broadcast.Option{nil, nil}, 1001, testutil.Seq(0, 1000)},
		{"New sets the default", []broadcast.Option{broadcast.WithQueueLength(2), broadcast.WithPolicy(broadcast.DropOldest)}, nil, 5, []int{3, 4}},
		{"Watch overrides the policy", []broadcast.Option{broadcast.WithQueueLength(2), broadcast.WithPolicy(broadcast.DropOldest)}, []broadcast.Option{broadcast.WithPolicy(broadcast.Drop)}, 5, []int{0, 1}},
		{"Watch overrides the length", []broadcast.Option{broadcast.WithQueueLength(2), broadcast.WithPolicy(broadcast.DropOldest)}, []broadcast.Option{broadcast.WithQueueLength(3)}, 5, []int{2, 3, 4}},
		{"nil among options", []broadcast.Option{nil, broadcast.WithQueueLength(2), nil}, []broadcast.Option{nil, broadcast.WithPolicy(broadcast.DropOldest), nil}, 5, []int{3, 4}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newB(t, tc.newOpts...)
			w := watch(t, b, tc.opts...)
			p, err := b.WatchWithPrefix([]int{-1}, tc.opts...)
			if err != nil {
				t.Fatalf("WatchWithPrefix: %v", err)
			}
			publish(t, b, testutil.Seq(0, tc.n)...)
			shutdown(t, b)
			if d := diff(tc.want, testutil.Drain(t, w.C(), guard)); d != "" {
				t.Errorf("Watch (-want +got):\n%s", d)
			}
			if d := diff(append([]int{-1}, tc.want...), testutil.Drain(t, p.C(), guard)); d != "" {
				t.Errorf("WatchWithPrefix (-want +got):\n%s", d)
			}
			checkDropped(t, "w", w, uint64(tc.n-len(tc.want)))
		})
	}
}

// --- Bad input -----------------------------------------------------------

// TestBadOptionsPanic: programmer errors panic with the package prefix, in
// the Option constructor or at the latest where the Option is used.
func TestBadOptionsPanic(t *testing.T) {
	cases := []struct {
		name string
		opt  func() broadcast.Option
	}{
		{"WithQueueLength(0)", func() broadcast.Option { return broadcast.WithQueueLength(0) }},
		{"WithQueueLength(-1)", func() broadcast.Option { return broadcast.WithQueueLength(-1) }},
		{"WithQueueLength(MaxQueueLength+1)", func() broadcast.Option { return broadcast.WithQueueLength(broadcast.MaxQueueLength + 1) }},
		{"BlockFor(0)", func() broadcast.Option { return broadcast.WithPolicy(broadcast.BlockFor(0)) }},
		{"BlockFor(-1s)", func() broadcast.Option { return broadcast.WithPolicy(broadcast.BlockFor(-time.Second)) }},
		{"WithPolicy(Policy{})", func() broadcast.Option { return broadcast.WithPolicy(broadcast.Policy{}) }},
	}
	for _, tc := range cases {
		for _, where := range []string{"New", "Watch", "WatchWithPrefix"} {
			t.Run(tc.name+"/"+where, func(t *testing.T) {
				b := newB(t)
				msg, ok := testutil.PanicMessage(func() {
					switch where {
					case "New":
						nb := broadcast.New[int](tc.opt())
						defer nb.Shutdown(context.Background())
					case "Watch":
						b.Watch(tc.opt())
					case "WatchWithPrefix":
						b.WatchWithPrefix([]int{1}, tc.opt())
					}
				})
				if !ok {
					t.Fatal("no panic")
				}
				if !strings.HasPrefix(msg, "broadcast:") {
					t.Errorf("panic %q, want it to start with %q", msg, "broadcast:")
				}
				checkStats(t, b, broadcast.Stats{})
			})
		}
	}

	t.Run("limits accepted", func(t *testing.T) {
		b := newB(t, broadcast.WithQueueLength(broadcast.MaxQueueLength))
		w := watch(t, b, broadcast.WithQueueLength(1), broadcast.WithPolicy(broadcast.BlockFor(time.Nanosecond)))
		publish(t, b, 1)
		w.Stop()
	})
}

// TestNilContext: a nil ctx is an error, never a panic, and has no effect.
func TestNilContext(t *testing.T) {
	var nilCtx context.Context
	b := newB(t)
	w := watch(t, b)
	if err := b.PublishContext(nilCtx, 1); err == nil {
		t.Error("PublishContext(nil, 1) = nil, want an error")
	}
	checkStats(t, b, broadcast.Stats{Watchers: 1})
	if err := b.Shutdown(nilCtx); err == nil {
		t.Error("Shutdown(nil) = nil, want an error")
	}
	publish(t, b, 2) // not shut down
	late := watch(t, b)
	publish(t, b, 3)
	checkStats(t, b, broadcast.Stats{Published: 2, Watchers: 2})
	shutdown(t, b)
	if d := diff([]int{2, 3}, testutil.Drain(t, w.C(), guard)); d != "" {
		t.Errorf("watcher (-want +got):\n%s", d)
	}
	if d := diff([]int{3}, testutil.Drain(t, late.C(), guard)); d != "" {
		t.Errorf("late watcher (-want +got):\n%s", d)
	}
}
