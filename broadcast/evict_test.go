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
// With C() called first it holds the same (guarantee 3).
func TestEvict(t *testing.T) {
	cases := []struct {
		name   string
		prefix []int
		want   []int // what the evicted watcher reads, on both read paths
		reason string
	}{
		{"no prefix", nil, []int{1, 2, 3}, "queue length 3: value 4 finds it full"},
		{"prefix", []int{-2, -1}, []int{-2, -1, 1, 2, 3}, "the prefix does not count against the queue length (guarantee 5)"},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			for _, cFirst := range []bool{false, true} {
				name := tc.name + "/" + rp.name
				want := tc.want
				if cFirst {
					name += "/C-called-first"
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
