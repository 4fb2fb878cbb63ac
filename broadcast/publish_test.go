package broadcast_test

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

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
			if d := diff([]int{2}, shutdownThenRead(t, b, full, readPaths[0])); d != "" {
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
			if d := diff([]int{2}, shutdownThenRead(t, b, w, readPaths[0])); d != "" {
				t.Errorf("watcher (-want +got):\n%s", d)
			}
			checkDropped(t, "w", w, 0)
		})
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

// TestPublishWithoutLockKeepsBounds: below the attention bound a publish
// commits without the broadcaster's mutex; a watcher that registers
// meanwhile lowers the bound, and no publish may go past it unvisited.
// Four publishers run flat out while watchers of queue length 1 (Drop,
// never read) come and go: every look at one finds at most one value
// queued, and its drops account for the rest.
func TestPublishWithoutLockKeepsBounds(t *testing.T) {
	b := broadcast.New[int](broadcast.WithPolicy(broadcast.Drop), broadcast.WithQueueLength(1))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := b.Publish(i); err != nil {
					t.Error(err)
					return
				}
				if i%64 == 0 {
					runtime.Gosched() // with one processor, let the watchers come and go
				}
			}
		})
	}
	for range 500 {
		w, err := b.Watch()
		if err != nil {
			t.Fatal(err)
		}
		from := b.Stats().Published
		for range 4 {
			if l := w.Len(); l > 1 {
				t.Fatalf("Len() = %d for a Drop watcher of queue length 1", l)
			}
			runtime.Gosched()
		}
		// Every value up to to was held or dropped before to was stored.
		to := b.Stats().Published
		if d, l := w.Dropped(), w.Len(); to > from && uint64(l)+d < to-from {
			t.Fatalf("holds %d and dropped %d of at least %d values published after it registered", l, d, to-from)
		}
		w.Stop()
	}
	close(stop)
	wg.Wait()
}
