package broadcast_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
	"go.uber.org/goleak"
)

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
		// Some watchers are read while Shutdown runs, the others after.
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

	// Stop on WithContext watchers while Shutdown runs: both unregister
	// each watcher's context callback, and only one can. Shutdown used to
	// wait forever for a callback that Stop had unregistered (found by
	// examples/sse: a handler's deferred Stop racing Shutdown); in a
	// bubble, that wait is a deadlock, and the test fails. It hit within
	// the first few rounds of 100 watchers.
	t.Run("Stop racing", func(t *testing.T) {
		for range 50 {
			synctest.Test(t, func(t *testing.T) {
				b := broadcast.New[int]()
				start := make(chan struct{})
				var wg sync.WaitGroup
				for range 100 {
					w := watch(t, b, broadcast.WithContext(t.Context()))
					wg.Go(func() { <-start; w.Stop() })
				}
				close(start)
				shutdown(t, b)
				wg.Wait()
				checkStats(t, b, broadcast.Stats{Watchers: 0})
			})
		}
	})
}

// TestEvictAfterShutdownKeepsErrClosed: the first cause that ends a watcher
// is the one Err keeps; after Shutdown nothing evicts.
func TestEvictAfterShutdownKeepsErrClosed(t *testing.T) {
	b := newB(t)
	w := watch(t, b, with(broadcast.Evict, 2)...)
	publish(t, b, 1, 2)
	shutdown(t, b)
	if err := w.Err(); !errors.Is(err, broadcast.ErrClosed) {
		t.Errorf("Err() after Shutdown = %v, want ErrClosed", err)
	}
	if d := diff([]int{1, 2}, readPaths[1].take(t, w, -1)); d != "" {
		t.Errorf("values readable after Shutdown (-want +got):\n%s", d)
	}
}

// Contexts: nil is an error (never a panic), a done ctx publishes nothing, a
// ctx that ends while Shutdown waits makes it give up.
func hostileContextCases() []hostileCase {
	canceled := func() context.Context {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		return ctx
	}
	expired := func() context.Context {
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		cancel() // releases the timer; ctx.Err() stays DeadlineExceeded
		return ctx
	}
	publishCtx := func(name string, ctx func() context.Context, closed bool, want string) hostileCase {
		return hostileCase{
			name: name,
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(10)...)
				if closed {
					hShutdown(t, b)
				}
				var c context.Context
				if ctx != nil {
					c = ctx()
				}
				r.Errs = append(r.Errs, hostileErr(b.PublishContext(c, 1)))
				if !closed {
					hPub(t, b, 2)
					hShutdown(t, b)
				}
				r.Values = hC(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{want}, Values: map[bool][]int{false: {2}, true: nil}[closed],
				Stats: broadcast.Stats{Published: map[bool]uint64{false: 1, true: 0}[closed]}},
		}
	}
	return []hostileCase{
		publishCtx("PublishContext(nil ctx)", nil, false, "broadcast error"),
		publishCtx("PublishContext(canceled ctx)", canceled, false, "Canceled"),
		publishCtx("PublishContext(ctx past its deadline)", expired, false, "DeadlineExceeded"),
		// A done ctx is reported before the shut-down broadcaster.
		publishCtx("PublishContext(canceled ctx) after Shutdown", canceled, true, "Canceled"),
		publishCtx("PublishContext(nil ctx) after Shutdown", nil, true, "broadcast error"),
		{
			name: "Shutdown(nil ctx) does nothing",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				//lint:ignore SA1012 testing the nil check
				r.Errs = append(r.Errs, hostileErr(b.Shutdown(nil))) //nolint:staticcheck
				r.Errs = append(r.Errs, hostileErr(b.Publish(1)))
				hShutdown(t, b)
				r.Values = hC(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"broadcast error", "nil"}, Values: []int{1}, Stats: broadcast.Stats{Published: 1}},
		},
		{
			// Nothing to wait for: it completes, and the done ctx does not
			// matter (it returns nil, not ctx.Err()).
			name: "Shutdown(canceled ctx) with no Publish waiting",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				err := b.Shutdown(canceled())
				r.Errs = append(r.Errs, hostileErr(err), hostileErr(b.Publish(2)))
				r.Values = hAll(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"nil", "ErrClosed"}, Values: []int{1}, Stats: broadcast.Stats{Published: 1}},
		},
		hostileShutdownExpired("All"),
		hostileShutdownExpired("C"),
		{
			name: "Shutdown(canceled ctx) while the first Shutdown waits returns at once",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				pub := hAsync(func() error { return b.Publish(2) })
				synctest.Wait()
				first := hAsync(func() error { return b.Shutdown(context.Background()) })
				synctest.Wait()
				start := time.Now()
				r.Errs = append(r.Errs, hostileErr(b.Shutdown(canceled())))
				r.Elapsed = time.Since(start)
				r.Values = hC(t, w) // makes room: the first Shutdown can finish
				r.Errs = append(r.Errs, hostileErr(<-first), hostileErr(<-pub))
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"Canceled", "nil", "nil"}, Values: []int{1, 2}, Stats: broadcast.Stats{Published: 2}},
		},
		{
			name: "Shutdown three times, the last with a canceled ctx",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				for _, ctx := range []context.Context{context.Background(), context.Background(), canceled()} {
					r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
				}
			},
			want: hostileResult{Errs: []string{"nil", "nil", "nil"}},
		},
	}
}

// hostileShutdownExpired: Shutdown with a ctx already past its deadline
// while a Publish waits for a full Block watcher read through path: it
// returns at once; the Publish gives up with ErrClosed, its value goes to
// the watcher with room and is counted as dropped for the full one.
// The same on both read paths: the full watcher keeps 1 (guarantee 6).
func hostileShutdownExpired(path string) hostileCase {
	held := []int{1}
	kept := []int{1}      // readable after Shutdown
	last := len(held) + 1 // the value whose Publish waits
	dropped := uint64(last - len(kept))
	return hostileCase{
		name: "Shutdown(ctx past its deadline) while a Publish waits, " + path,
		run: func(t *testing.T, r *hostileResult) {
			b := hNew(t)
			full := hWatch(t, b, hBlock(1)...)
			roomy := hWatch(t, b, broadcast.WithQueueLength(10))
			if path == "C" {
				full.C()
			}
			for _, v := range held {
				hPub(t, b, v)
			}
			pub := hAsync(func() error { return b.Publish(last) })
			synctest.Wait()
			ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
			defer cancel()
			start := time.Now()
			r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
			r.Elapsed = time.Since(start)
			r.Errs = append(r.Errs, hostileErr(<-pub))
			r.Values, r.Other = hC(t, full), hC(t, roomy)
			r.Dropped = []uint64{full.Dropped(), roomy.Dropped()}
			r.Stats = b.Stats()
		},
		want: hostileResult{
			Errs:    []string{"DeadlineExceeded", "ErrClosed"},
			Values:  kept,
			Other:   testutil.Seq(1, last+1),
			Dropped: []uint64{dropped, 0},
			// Published counts the value although its Publish returned
			// ErrClosed: it was committed, and reached roomy.
			Stats: broadcast.Stats{Published: uint64(last), Dropped: dropped},
		},
	}
}

// A shut-down broadcaster: every entry point answers, none panics.
func hostileClosedCases() []hostileCase {
	return []hostileCase{
		{
			name: "every entry point after Shutdown",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				hPub(t, b, 1)
				hShutdown(t, b)
				ok, err := b.TryPublish(3)
				w, werr := b.Watch()
				r.Errs = append(r.Errs, hostileErr(b.Publish(1)), hostileErr(b.PublishContext(context.Background(), 2)),
					hostileErr(err), hostileErr(werr), hostileErr(b.Shutdown(context.Background())))
				r.Ok = append(r.Ok, ok)
				r.Strings = append(r.Strings, fmt.Sprint(w == nil))
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"ErrClosed", "ErrClosed", "ErrClosed", "ErrClosed", "nil"}, Ok: []bool{false},
				Strings: []string{"true"}, Stats: broadcast.Stats{Published: 1}},
		},
		{
			// Stop after Shutdown discards what a watcher in ring mode held
			// (uncounted, as any Stop does) ...
			name: "Stop after Shutdown, C() never called: queued values discarded",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(2))
				hPub(t, b, 1, 2, 3)
				hShutdown(t, b)
				w.Stop()
				w.Stop()
				r.Values, r.Other = hAll(t, w), hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{Dropped: []uint64{1}, Stats: broadcast.Stats{Published: 3, Dropped: 1}},
		},
		{
			// ... on both read paths: C()'s channel held the queue, 1 and
			// 2 (3 to 5 dropped), and Stop discards them too. Nobody
			// reads, and Shutdown returns nil at once (guarantee 6).
			name: "Stop after Shutdown, C() called before: discarded as through All",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(2))
				w.C()
				for v := 1; v <= 5; v++ {
					hPub(t, b, v)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
				r.Elapsed = time.Since(start)
				w.Stop()
				r.Values = hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{Errs: []string{"nil"},
				Dropped: []uint64{3}, Stats: broadcast.Stats{Published: 5, Dropped: 3}},
		},
	}
}

// TestRegressionShutdownAbortCountsGivenUpValue: Shutdown's ctx ends while
// a Publish waits for a full Block watcher read through C() that nobody
// reads. Guarantee 3's count must hold: every value published to the
// watcher is received or counted in Dropped(). (The C() forwarder of an
// earlier core could close C() before the publisher that gave up
// committed its value, which was then neither received nor counted.)
func TestRegressionShutdownAbortCountsGivenUpValue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := broadcast.New[int](broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
		w, _ := b.Watch()
		ch := w.C()
		if err := b.Publish(1); err != nil { // queued: the watcher is full
			t.Fatal(err)
		}
		pub := make(chan error, 1)
		go func() { pub <- b.Publish(2) }()
		synctest.Wait() // Publish(2) waits for room
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
		}
		if err := <-pub; !errors.Is(err, broadcast.ErrClosed) {
			t.Errorf("the waiting Publish(2) = %v, want ErrClosed", err)
		}
		if l := w.Len(); l != 1 {
			t.Errorf("Len() = %d after Shutdown, want 1", l)
		}
		n := 0
		for range ch {
			n++
		}
		if n != 1 || w.Dropped() != 1 {
			t.Errorf("received %d, Dropped() %d; want 1 and 1 of the 2 published to the watcher", n, w.Dropped())
		}
		if l := w.Len(); l != 0 {
			t.Errorf("Len() = %d after C() closed, want 0", l)
		}
	})
}

// TestRegressionShutdownDoneCtxNothingToWait: Shutdown with a ctx already
// canceled, when nothing waits (no Publish waiting, no C() forwarder,
// here not even a watcher), completes and returns nil: ctx did not end
// first, there was nothing to wait for (the hostile case "Shutdown(canceled
// ctx) with no Publish waiting" holds it to that). The core's
// waitForwarders starts a goroutine for b.fwd.Wait and selects between it
// and ctx.Done(), so a done ctx usually wins before that goroutine runs,
// and Shutdown returns Canceled having dropped nothing.
func TestRegressionShutdownDoneCtxNothingToWait(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, watchers := range []int{0, 1} {
		b := broadcast.New[int]()
		for range watchers {
			w, err := b.Watch()
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
		}
		if err := b.Publish(1); err != nil {
			t.Fatal(err)
		}
		if err := b.Shutdown(ctx); err != nil {
			t.Errorf("%d watchers: Shutdown(canceled ctx) with nothing to wait for = %v, want nil", watchers, err)
		}
		if d := b.Stats().Dropped; d != 0 {
			t.Errorf("%d watchers: Dropped = %d, want 0", watchers, d)
		}
	}
}

// TestHostileContexts: nil, canceled and expired contexts given to PublishContext and Shutdown (guarantee 6).
func TestHostileContexts(t *testing.T) { runHostile(t, hostileContextCases()) }

// TestHostileClosed: every entry point after Shutdown (guarantee 6).
func TestHostileClosed(t *testing.T) { runHostile(t, hostileClosedCases()) }
