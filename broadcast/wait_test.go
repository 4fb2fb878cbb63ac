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

	"github.com/google/go-cmp/cmp"
	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
	"go.uber.org/goleak"
)

func TestAbandonedReaderBlock(t *testing.T) {
	for mode, m := range abandonModes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, w, other, rest := abandonSetup(t, broadcast.Block, mode)
				// The watcher holds 3 to last: its queue length, on both
				// read paths.
				last := 2 + abandonQueue
				for v := 4; v <= last; v++ {
					if ok, err := b.TryPublish(v); !ok || err != nil {
						t.Fatalf("TryPublish(%d) = (%v, %v), want (true, nil): there is room", v, ok, err)
					}
				}
				if got := w.Len(); got != last-2 {
					t.Errorf("Len() = %d, want %d", got, last-2)
				}
				if ok, err := b.TryPublish(last + 1); ok || err != nil {
					t.Errorf("TryPublish(%d) = (%v, %v), want (false, nil): the abandoned Block watcher is full", last+1, ok, err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				if err := b.PublishContext(ctx, last+1); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("PublishContext(%d) = %v, want DeadlineExceeded", last+1, err)
				}
				if got := time.Since(start); got != time.Second {
					t.Errorf("PublishContext(%d) returned after %v, want 1s, its deadline", last+1, got)
				}

				pub := make(chan error, 1)
				go func() { pub <- b.Publish(last + 2) }()
				synctest.Wait()
				select {
				case err := <-pub:
					t.Fatalf("Publish(%d) returned %v; want it to wait for the abandoned Block watcher", last+2, err)
				default:
				}
				sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer scancel()
				start = time.Now()
				if err := b.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
				}
				if got := time.Since(start); got != 5*time.Second {
					t.Errorf("Shutdown returned after %v, want 5s, its deadline", got)
				}
				if err := <-pub; !errors.Is(err, broadcast.ErrClosed) {
					t.Errorf("the waiting Publish(%d) = %v, want ErrClosed", last+2, err)
				}
				// Every watcher is closed: the abandoned one after what it
				// held (last+1 and last+2 were dropped for it, counted), the
				// other after everything, on both read paths.
				held, dropped := testutil.Seq(3, last+1), 2
				if d := cmp.Diff(held, abandonRead(t, w, rest, mode%2 == 0)); d != "" {
					t.Errorf("the abandoned watcher held (-want +got):\n%s", d)
				}
				if d := cmp.Diff(testutil.Seq(1, last+3), testutil.Drain(t, other.C(), time.Minute)); d != "" {
					t.Errorf("the other watcher (-want +got):\n%s", d)
				}
				for _, c := range []*broadcast.Watcher[int]{w, other} {
					if v, ok := <-c.C(); ok {
						t.Errorf("C() yielded %d after draining; want it closed", v)
					}
					if got := testutil.CollectSeq(t, c.All(), -1, time.Minute); got != nil {
						t.Errorf("All() yielded %v after draining; want it to end", got)
					}
				}
				if err := b.Shutdown(context.Background()); err != nil {
					t.Errorf("second Shutdown = %v, want nil", err)
				}
				if got := w.Dropped(); got != uint64(dropped) {
					t.Errorf("Dropped() = %d, want %d (%d at PublishContext's deadline, %d at Shutdown's)", got, dropped, last+1, last+2)
				}
				if d := cmp.Diff(broadcast.Stats{Published: uint64(last + 2), Dropped: uint64(dropped)}, b.Stats()); d != "" {
					t.Errorf("Stats() (-want +got):\n%s", d)
				}
			})
			goleak.VerifyNone(t)
		})
	}
}

// TestWithContextReleasesBlockedPublish: a ctx that ends while a Publish
// waits for its full Block watcher releases that Publish, as Stop does.
func TestWithContextReleasesBlockedPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newB(t)
		ctx, cancel := context.WithCancel(context.Background())
		w := watch(t, b, broadcast.WithContext(ctx), broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
		publish(t, b, 1)
		done := async(func() error { return b.Publish(2) })
		synctest.Wait()
		if _, ok := returned(done); ok {
			t.Fatal("Publish(2) returned with the Block watcher full")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Publish(2) = %v, want nil once ctx ended", err)
		}
		if err := w.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err() = %v, want context.Canceled (the cause of a plain cancel)", err)
		}
	})
}

// --- Guarantee 4 ---------------------------------------------------------

// TestBlockHoldsQueueLength covers guarantee 4's "a publisher may wait": a
// Block watcher takes exactly its queue length, then Publish waits until a
// read makes room, on both read paths.
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
					rest = shutdownThenRead(t, b, w, rp)
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
			if d := diff([]int{2}, shutdownThenRead(t, b, blk, readPaths[0])); d != "" {
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
					rest = shutdownThenRead(t, b, w, rp)
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

// TestRegressionAllPendSignalsRoom: a Block watcher whose whole queue was
// set aside in its private FIFO (a PublishContext gave up on it, so Drop
// applied: the segment was copied out of the ring), read through All().
// Taking values from that FIFO made room, but only taking them from the
// ring told a waiting publisher so: Publish waited until Stop, Shutdown or
// its ctx (found by a review).
func TestRegressionAllPendSignalsRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := broadcast.New[int]()
		w, err := b.Watch(broadcast.WithQueueLength(4), broadcast.WithPolicy(broadcast.Block))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			if err := b.Publish(i); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err = b.PublishContext(ctx, -1) // gives up: dropped for w, its queue set aside
		cancel()
		if err != context.DeadlineExceeded || w.Dropped() != 1 {
			t.Fatalf("PublishContext: %v, Dropped %d; want DeadlineExceeded, 1", err, w.Dropped())
		}
		done := make(chan error, 1)
		go func() { done <- b.Publish(4) }()
		synctest.Wait() // Publish(4) waits for room
		var got []int
		read := make(chan struct{})
		go func() {
			defer close(read)
			for v := range w.All() {
				got = append(got, v)
				if v == 4 {
					return
				}
			}
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("Publish(4): %v", err)
			}
		case <-time.After(time.Hour):
			t.Fatal("Publish(4) still waits an hour after the reader took the queue")
		}
		<-read
		if want := []int{0, 1, 2, 3, 4}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("watcher got %v, want %v", got, want)
		}
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestRegressionWaitingPublisherKeepsCount: a publisher waiting for a full
// Block watcher that Stop then removes, the last one. Removing it let
// publishes take the no-watcher path (a CAS on the tail, no lock) before
// the waiting publisher committed; its commit then stored the tail from the
// sequence number it had read before waiting, erasing those publishes:
// Stats().Published fell back, and a watcher registered meanwhile missed
// the next value published after its Watch returned (found by a review).
func TestRegressionWaitingPublisherKeepsCount(t *testing.T) {
	for run := range 30 {
		synctest.Test(t, func(t *testing.T) {
			b := broadcast.New[int]()
			w, err := b.Watch(broadcast.WithQueueLength(1), broadcast.WithPolicy(broadcast.Block))
			if err != nil {
				t.Fatal(err)
			}
			mustPublish := func(v int) {
				t.Helper()
				if err := b.Publish(v); err != nil {
					t.Fatal(err)
				}
			}
			mustPublish(0) // w is full
			p1 := make(chan error, 1)
			go func() { p1 <- b.Publish(1) }()
			synctest.Wait() // Publish(1) waits for room
			w.Stop()        // the last watcher: Publish(1) may commit now
			mustPublish(100)
			mustPublish(101)
			w3, err := b.Watch(broadcast.WithPolicy(broadcast.Block))
			if err != nil {
				t.Fatal(err)
			}
			if err := <-p1; err != nil {
				t.Fatal(err)
			}
			mustPublish(200) // after w3's Watch returned: w3 must get it
			mustPublish(201)
			if got := b.Stats().Published; got != 6 {
				t.Errorf("run %d: Published %d, want 6 (0, 1, 100, 101, 200, 201)", run, got)
			}
			var got []int
			for v := range w3.All() {
				got = append(got, v)
				if v == 201 {
					break
				}
			}
			if len(got) < 2 || got[len(got)-2] != 200 {
				t.Errorf("run %d: w3 got %v, want it to end with 200, 201", run, got)
			}
			if err := b.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestRegressionEveryWaiterWakes: several goroutines waiting on one watcher
// (two All loops, or All loops and the forwarder after C()) shared one
// wake-up token and one place on the parked list: a publish woke one of
// them and the others waited for good (found by a review). The first case
// failed before the fix; the second, where the forwarder is the waiter
// left behind, stalled every time outside a bubble (the review's
// reproduction, with real time) but not inside one, whose scheduling hands
// the token to the forwarder.
//
// In the first case each loop takes one value and then cannot take more
// (the first leaves, the second stays in its loop body), so the second
// value must go to whichever loop did not get the first one: a loop left
// waiting fails it. (It used to let the second loop read everything and
// expected the first to win one of six values, which depends on
// scheduling: under -race the second loop often took them all.)
func TestRegressionEveryWaiterWakes(t *testing.T) {
	t.Run("two All loops", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := broadcast.New[int]()
			w, err := b.Watch()
			if err != nil {
				t.Fatal(err)
			}
			var first, rest []int
			var loops sync.WaitGroup
			busy := make(chan struct{})
			loops.Go(func() { // takes one value, then leaves
				for v := range w.All() {
					first = append(first, v)
					break
				}
			})
			synctest.Wait()
			loops.Go(func() { // takes one value, then stays in its loop body
				for v := range w.All() {
					if rest = append(rest, v); len(rest) == 1 {
						<-busy
					}
				}
			})
			synctest.Wait() // both parked
			for i := range 2 {
				if err := b.Publish(i); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
			}
			if len(first) != 1 || len(rest) != 1 {
				t.Errorf("the loops got %v and %v, want one value each", first, rest)
			}
			close(busy)
			w.Stop()
			loops.Wait()
		})
	})
	t.Run("All loops then C", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := broadcast.New[int]()
			w, err := b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(4))
			if err != nil {
				t.Fatal(err)
			}
			var got atomic.Int64
			var loops sync.WaitGroup
			for range 2 {
				loops.Go(func() {
					for range w.All() {
						got.Add(1)
					}
				})
				synctest.Wait() // parked
			}
			w.C() // the loops read the channel from now on
			published := make(chan struct{})
			go func() {
				defer close(published)
				for i := range 20 {
					if err := b.Publish(i); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			select {
			case <-published:
			case <-time.After(time.Hour):
				t.Errorf("the publisher still waits after an hour: the loops got %d of 20", got.Load())
			}
			synctest.Wait()
			if n := got.Load(); n != 20 {
				t.Errorf("the loops got %d of 20", n)
			}
			w.Stop()
			<-published
			loops.Wait()
		})
	})
}

// A Publish that finds a Block watcher's channel full commits first and
// then waits to send to it (payLocked): every other watcher has the value
// meanwhile, and Stats counts it; the turn is held, so no later value
// overtakes it on any watcher, and TryPublish says it would wait. (Before,
// the wait came first and nothing of the value was visible until the full
// channel had room: a scan of every channel on every Publish.)
func TestFullChannelWatcherPaidAfterCommit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newB(t)
		full := watch(t, b, with(broadcast.Block, 2)...)
		fullC := full.C()
		ring := watch(t, b, with(broadcast.Block, 10)...)
		roomy := watch(t, b, with(broadcast.Block, 10)...)
		roomyC := roomy.C()
		publish(t, b, 1, 2)
		p3 := async(func() error { return b.Publish(3) })
		synctest.Wait()
		if _, ok := returned(p3); ok {
			t.Fatal("Publish(3) returned although a Block channel is full")
		}
		if got := ring.Len(); got != 3 {
			t.Errorf("ring watcher holds %d values while Publish(3) waits, want 3 (1, 2, 3)", got)
		}
		if got := len(roomyC); got != 3 {
			t.Errorf("roomy channel holds %d values while Publish(3) waits, want 3", got)
		}
		checkStats(t, b, broadcast.Stats{Published: 3, Watchers: 3})
		if ok, err := b.TryPublish(99); ok || err != nil {
			t.Errorf("TryPublish while Publish(3) waits = %v, %v; want false, nil", ok, err)
		}
		p4 := async(func() error { return b.Publish(4) }) // waits for the turn
		synctest.Wait()
		if got := ring.Len(); got != 3 {
			t.Errorf("ring watcher holds %d values, want 3: Publish(4) overtook Publish(3)", got)
		}
		var got []int
		for len(got) < 4 {
			got = append(got, <-fullC)
			synctest.Wait()
		}
		for i, p := range []<-chan error{p3, p4} {
			if err, ok := returned(p); !ok || err != nil {
				t.Errorf("Publish(%d) = %v, returned %v; want nil, true", i+3, err, ok)
			}
		}
		if d := diff([]int{1, 2, 3, 4}, got); d != "" {
			t.Errorf("full watcher (-want +got):\n%s", d)
		}
		checkDropped(t, "full", full, 0)
		shutdown(t, b)
		if d := diff([]int{1, 2, 3, 4}, testutil.Drain(t, roomyC, guard)); d != "" {
			t.Errorf("roomy watcher (-want +got):\n%s", d)
		}
		if d := diff([]int{1, 2, 3, 4}, slices.Collect(ring.All())); d != "" {
			t.Errorf("ring watcher (-want +got):\n%s", d)
		}
	})
}
