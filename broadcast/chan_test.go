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
				got = append(got, shutdownThenRead(t, b, w, readPaths[0])...)
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

// TestShutdownKeepsEvictedC: an evicted watcher read through C() is no
// longer registered; Shutdown, with nobody reading it, returns nil at once
// (guarantee 6), and its channel keeps the queue it held, then is closed
// (guarantee 10). Issue 27: its values beyond the channel used to be
// dropped when Shutdown's ctx ended.
func TestShutdownKeepsEvictedC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newB(t)
		w := watch(t, b, with(broadcast.Evict, 10)...)
		ch := w.C()
		for v := 1; v <= 21; v++ {
			publish(t, b, v)
		}
		if err := w.Err(); !errors.Is(err, broadcast.ErrEvicted) {
			t.Fatalf("Err() = %v, want ErrEvicted (value 11 found the queue full)", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		start := time.Now()
		if err := b.Shutdown(ctx); err != nil || time.Since(start) != 0 {
			t.Errorf("Shutdown = %v after %v, want nil at once (it waits for no reader)", err, time.Since(start))
		}
		checkDropped(t, "evicted watcher", w, 1)
		var got []int
		for v := range ch {
			got = append(got, v)
		}
		if d := diff(testutil.Seq(1, 11), got); d != "" {
			t.Errorf("the channel after Shutdown (-want +got):\n%s", d)
		}
	})
}

// Regression tests of library bugs found by the reliability work (issue 5),
// each failing before its fix. The cost of a full DropOldest watcher, also
// found then, is a benchmark: BenchmarkDropOldestFull in bench_test.go.

// TestRegressionDropOldestPrefixOrder: a DropOldest watcher read through C()
// while its prefix is still in the channel. When its queue is full, Publish
// takes every value out of the channel to remove the oldest non-prefix one
// and sends the rest back (discardOldestLocked). The reader receives from
// the same channel meanwhile, so it can get a value from the middle of what
// Publish is taking out: it sees prefix values out of order, or a live value
// before the prefix, and the wrong value is discarded (a prefix value, which
// guarantee 5 says is never dropped).
func TestRegressionDropOldestPrefixOrder(t *testing.T) {
	const prefixLen, values = 200, 2000
	for round := range 150 {
		b := broadcast.New[int]()
		prefix := make([]int, prefixLen)
		for i := range prefix {
			prefix[i] = -prefixLen + i // -200 .. -1, then the live values 0, 1, ...
		}
		w, err := b.WatchWithPrefix(prefix, broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(1))
		if err != nil {
			t.Fatal(err)
		}
		c := w.C()
		got := make(chan []int, 1)
		go func() {
			var vs []int
			for v := range c {
				vs = append(vs, v)
			}
			got <- vs
		}()
		for v := range values {
			if err := b.Publish(v); err != nil {
				t.Fatal(err)
			}
		}
		pendingShutdown(t, b)
		vs := <-got
		var bad string
		for i := 1; i < len(vs); i++ {
			if vs[i] <= vs[i-1] {
				bad = fmt.Sprintf("value %d at index %d after %d", vs[i], i, vs[i-1])
				break
			}
		}
		prefixGot := 0
		for _, v := range vs {
			if v < 0 {
				prefixGot++
			}
		}
		if bad != "" || prefixGot != prefixLen {
			t.Fatalf("round %d: read %d values, %d of the %d prefix values (want all, in order), Dropped() %d; first disorder: %s",
				round, len(vs), prefixGot, prefixLen, w.Dropped(), bad)
		}
		if n := uint64(len(vs)-prefixLen) + w.Dropped(); n != values {
			t.Fatalf("round %d: received %d + Dropped() %d = %d live values, want %d", round, len(vs)-prefixLen, w.Dropped(), n, values)
		}
	}
}

// TestRegressionDropOldestChannelKeepsOldest: guarantee 3 says a never-read
// DropOldest watcher holds the last values published. (Found by the soak
// with the first C() forwarder, which kept values in the channel beyond
// what it documented.) Read through C(), the channel is the queue: once the
// prefix is received, a DropOldest watcher holds its queue length of the
// newest values, as through All(), plus the room its prefix took (the
// channel's capacity is fixed at the first C()). While its prefix is still in the
// channel, in front of the live values, the oldest live value cannot be
// taken out without reordering what a concurrent reader receives, so a
// full watcher drops the new value instead, as Drop (Watcher.C documents
// it); every lost value is counted either way.
func TestRegressionDropOldestChannelKeepsOldest(t *testing.T) {
	const prefixLen, qlen, n = 20, 50, 300
	b := broadcast.New[int]()
	prefix := make([]int, prefixLen)
	for i := range prefix {
		prefix[i] = -prefixLen + i
	}
	w, err := b.WatchWithPrefix(prefix, broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(qlen))
	if err != nil {
		t.Fatal(err)
	}
	c := w.C()
	for v := range n {
		if err := b.Publish(v); err != nil {
			t.Fatal(err)
		}
	}
	// The prefix unread: the first qlen live values stay, the rest dropped.
	want := slices.Clone(prefix)
	for v := range qlen {
		want = append(want, v)
	}
	got := testutil.Collect(t, c, prefixLen+qlen, time.Minute)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DropOldest watcher, prefix unread, queue %d, %d published: holds\n%v\nwant the prefix and the first %d:\n%v", qlen, n, got, qlen, want)
	}
	if d, want := w.Dropped(), uint64(n-qlen); d != want {
		t.Errorf("Dropped() = %d, want %d", d, want)
	}
	// The prefix read: the newest values replace the oldest, and the room
	// the prefix took goes to live values (Watcher.C): it holds the last
	// qlen+prefixLen.
	for v := n; v < 2*n; v++ {
		if err := b.Publish(v); err != nil {
			t.Fatal(err)
		}
	}
	pendingShutdown(t, b)
	room := qlen + prefixLen
	if got, want := testutil.Drain(t, c, time.Minute), testutil.Seq(2*n-room, 2*n); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("DropOldest watcher, prefix read, then %d published: holds\n%v\nwant the last %d", n, got, room)
	}
	if d, want := w.Dropped(), uint64(n-qlen+n-room); d != want {
		t.Errorf("Dropped() = %d, want %d", d, want)
	}
}

// TestRegressionCStartsOnConcurrentPublish: C() called while a Publish
// commits the watcher's first value. C() looks for queued values and, if
// it finds none, parks its pending forwarder's starter on the parked list;
// a publisher stores the tail and then wakes the parked list. If the
// publisher's wake-up runs between C()'s look and its park, nobody starts
// the forwarder: the value stays queued, the reader waits, and under Block
// the next Publish waits for room for good (only a later commit would wake
// the starter). All loops park before they look (Watcher.await); C() looks
// before it parks. TestStopFromInsideLoop hangs on it now and then (once
// in a -race -count=10 run). Each round runs in a synctest bubble, whose
// guard fires as soon as everything is stuck: 0 to 3 rounds in 20000 stick
// (it failed 2 runs of 3 here; 0 of 3000 once C() parks before it looks).
func TestRegressionCStartsOnConcurrentPublish(t *testing.T) {
	const rounds = 20000
	stuck := 0
	for range rounds {
		synctest.Test(t, func(t *testing.T) {
			b := broadcast.New[int]()
			w, err := b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				for v := range 3 {
					if b.Publish(v) != nil {
						return
					}
				}
			}()
			ch := w.C() // while Publish(0) commits
			for range 3 {
				select {
				case <-ch:
				case <-time.After(time.Hour): // a guard: in the bubble it fires only once all is stuck
					stuck++
					w.Stop()
					_ = b.Shutdown(context.Background())
					return
				}
			}
			if err := b.Shutdown(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	if stuck > 0 {
		t.Errorf("%d of %d rounds: C() read nothing of the 3 values published (the forwarder never started)", stuck, rounds)
	}
}
