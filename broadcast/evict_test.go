package broadcast_test

import (
	"errors"
	"testing"
	"testing/synctest"

	"github.com/heraldgo/herald/broadcast"
)

// TestEvict: guarantee 10 on both read paths, with and without a prefix,
// with C() called before the values arrive and after. An Evict watcher that
// never reads holds its queue; the value that finds it full is dropped
// (counted) and ends it: it keeps what it holds, readable in order, then
// ends with Err() == ErrEvicted; it leaves Stats().Watchers, and neither the
// publisher nor another watcher waits for it.
func TestEvict(t *testing.T) {
	cases := []struct {
		name   string
		prefix []int
		want   []int // what the evicted watcher reads
		reason string
	}{
		{"no prefix", nil, []int{1, 2, 3}, "queue length 3: value 4 finds it full"},
		{"prefix", []int{-2, -1}, []int{-2, -1, 1, 2, 3}, "the prefix does not count against the queue length (guarantee 5)"},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			for _, cFirst := range []bool{false, true} {
				name := tc.name + "/" + rp.name
				if cFirst {
					name += "/C-called-first"
				}
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
						publish(t, b, 1, 2, 3)
						synctest.Wait()
						if err := w.Err(); err != nil {
							t.Fatalf("Err() before eviction = %v, want nil (%s)", err, tc.reason)
						}
						publish(t, b, 4, 5, 6) // 4 evicts w; nothing waits for it
						if err := w.Err(); !errors.Is(err, broadcast.ErrEvicted) {
							t.Errorf("Err() after the value that found it full = %v, want ErrEvicted", err)
						}
						checkStats(t, b, broadcast.Stats{Published: 6, Dropped: 1, Watchers: 1})
						checkDropped(t, "evicted watcher", w, 1)
						if d := diff(tc.want, rp.take(t, w, -1)); d != "" {
							t.Errorf("the evicted watcher read (-want +got):\n%s", d)
						}
						if d := diff([]int{1, 2, 3, 4, 5, 6}, readPaths[1].take(t, other, 6)); d != "" {
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
