package broadcast_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// TestEvict: guarantee 10 on both read paths, with and without a prefix,
// with C() called before the values arrive and after. An Evict watcher that
// never reads holds its queue; the value that finds it full is dropped
// (counted) and ends it: it keeps what it holds, readable in order, then
// ends with Err() == ErrEvicted; it leaves Stats().Watchers, and neither the
// publisher nor another watcher waits for it.
//
// With C() called first, the watcher also holds what its forwarder took:
// min(ChannelBuffer, 3) = 3 values in flight (2 in the channel, 1 in the
// forwarder's blocked send), the first ones, prefix values included; its
// queue then holds 3 more, and the value after those evicts it (wantC).
// Each publish is followed by synctest.Wait so that the forwarder takes
// what it can.
func TestEvict(t *testing.T) {
	cases := []struct {
		name   string
		prefix []int
		want   []int // what the evicted watcher reads
		wantC  []int // the same with C() called first
		reason string
	}{
		{"no prefix", nil, []int{1, 2, 3}, []int{1, 2, 3, 4, 5, 6}, "queue length 3: value 4 finds it full (through C(): 1, 2, 3 in flight, value 7)"},
		{"prefix", []int{-2, -1}, []int{-2, -1, 1, 2, 3}, []int{-2, -1, 1, 2, 3, 4}, "the prefix does not count against the queue length (guarantee 5) (through C(): -2, -1, 1 in flight, value 5)"},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			for _, cFirst := range []bool{false, true} {
				name := tc.name + "/" + rp.name
				want := tc.want
				if cFirst {
					name += "/C-called-first"
					want = tc.wantC
				}
				held := len(want) - len(tc.prefix) // live values it holds
				t.Run(name, func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						b := newB(t)
						w, err := b.WatchWithPrefix(tc.prefix, with(broadcast.Evict, 3)...)
						if err != nil {
							t.Fatal(err)
						}
						other := watch(t, b, with(broadcast.Block, 10)...)
						if cFirst {
							w.C()
						}
						for v := 1; v <= held; v++ {
							publish(t, b, v)
							synctest.Wait() // the forwarder, if any, takes what it can
						}
						if err := w.Err(); err != nil {
							t.Fatalf("Err() before eviction = %v, want nil (%s)", err, tc.reason)
						}
						if l := w.Len(); l != len(want) {
							t.Errorf("Len() = %d before eviction, want %d", l, len(want))
						}
						publish(t, b, held+1, held+2, held+3) // held+1 evicts w; nothing waits for it
						if err := w.Err(); !errors.Is(err, broadcast.ErrEvicted) {
							t.Errorf("Err() after the value that found it full = %v, want ErrEvicted (%s)", err, tc.reason)
						}
						checkStats(t, b, broadcast.Stats{Published: uint64(held + 3), Dropped: 1, Watchers: 1})
						checkDropped(t, "evicted watcher", w, 1)
						if d := diff(want, rp.take(t, w, -1)); d != "" {
							t.Errorf("the evicted watcher read (-want +got):\n%s", d)
						}
						if d := diff(testutil.Seq(1, held+4), readPaths[1].take(t, other, held+3)); d != "" {
							t.Errorf("the other watcher read (-want +got):\n%s", d)
						}
						w.Stop()
						if err := w.Err(); !errors.Is(err, broadcast.ErrEvicted) {
							t.Errorf("Err() after Stop of an evicted watcher = %v, want ErrEvicted kept (the first cause)", err)
						}
					})
				})
			}
		}
	}
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

// TestEvictPolicyString: Evict is a valid policy with a name.
func TestEvictPolicyString(t *testing.T) {
	if got := broadcast.Evict.String(); got != "Evict" {
		t.Errorf("Evict.String() = %q", got)
	}
}

// TestShutdownAbortReachesEvictedC: an evicted watcher is no longer
// registered, yet its C() goroutine still hands its queue over; when
// nobody reads it, Shutdown's ctx ending must still make that goroutine
// give up. The watcher (Evict, queue length 10) holds 9 values in its
// channel, 1 in the goroutine's blocked send and 10 queued; value 21
// evicts it (dropped). Shutdown then waits for a reader that never comes,
// its ctx ends, and the 11 values outside the channel are dropped,
// counted: the channel keeps 1..9 and is closed.
func TestShutdownAbortReachesEvictedC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newB(t)
		w := watch(t, b, with(broadcast.Evict, 10)...)
		ch := w.C()
		for v := 1; v <= 21; v++ {
			publish(t, b, v)
			synctest.Wait() // the goroutine takes what it can
		}
		if err := w.Err(); !errors.Is(err, broadcast.ErrEvicted) {
			t.Fatalf("Err() = %v, want ErrEvicted (value 21 found the queue full)", err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown = %v, want DeadlineExceeded (nobody reads the evicted watcher's 11 values beyond its channel)", err)
		}
		checkDropped(t, "evicted watcher after the abort", w, 12)
		var got []int
		for v := range ch {
			got = append(got, v)
		}
		if d := diff(testutil.Seq(1, 10), got); d != "" {
			t.Errorf("the channel after the abort (-want +got):\n%s", d)
		}
	})
}
