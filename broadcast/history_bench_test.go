package broadcast

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkPublishHistory: Publish with WithHistory(1000) against without,
// with no watcher and with one full Drop watcher nobody reads (both take the
// lock then). History costs a ring write per publish and, with no watcher,
// the lock that an unwatched Publish otherwise skips.
func BenchmarkPublishHistory(b *testing.B) {
	for _, watchers := range []int{0, 1} {
		for _, hist := range []int{0, 1000} {
			b.Run(fmt.Sprintf("watchers=%d/history=%d", watchers, hist), func(b *testing.B) {
				br := New[event](WithHistory(hist))
				for range watchers {
					if _, err := br.Watch(WithQueueLength(10)); err != nil {
						b.Fatal(err)
					}
				}
				ev := event{Type: "ADDED"}
				b.ReportAllocs()
				for b.Loop() {
					_ = br.Publish(ev)
				}
				_ = br.Shutdown(context.Background())
			})
		}
	}
}

// BenchmarkWatchFrom: registering with a replay of 1000 kept values (the
// watcher's cursor starts at the first of them in the ring: nothing is
// copied), against a plain Watch; both Stop.
func BenchmarkWatchFrom(b *testing.B) {
	for _, replay := range []bool{false, true} {
		b.Run(fmt.Sprintf("replay=%v", replay), func(b *testing.B) {
			br := New[event](WithHistory(1000))
			for range 1000 {
				_ = br.Publish(event{Type: "ADDED"})
			}
			b.ReportAllocs()
			for b.Loop() {
				var w *Watcher[event]
				var err error
				if replay {
					w, err = br.WatchFrom(1)
				} else {
					w, err = br.Watch()
				}
				if err != nil {
					b.Fatal(err)
				}
				w.Stop()
			}
			_ = br.Shutdown(context.Background())
		})
	}
}

// BenchmarkEvictedCatchUp: a reader evicted with a queue of 100 resumes
// from a history of 10 000 values and reads them all: ns/op is per value
// caught up (WatchFrom, replay, read through Seq, Stop included).
func BenchmarkEvictedCatchUp(b *testing.B) {
	const kept = 10000
	br := New[event](WithHistory(kept))
	w, err := br.Watch(WithPolicy(Evict), WithQueueLength(100))
	if err != nil {
		b.Fatal(err)
	}
	for range kept {
		_ = br.Publish(event{Type: "ADDED"})
	}
	if w.Err() != ErrEvicted {
		b.Fatalf("Err() = %v, want ErrEvicted", w.Err())
	}
	var last uint64
	for s := range w.Seq() {
		last = s
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N/(kept-int(last)) + 1 {
		r, err := br.WatchFrom(last + 1)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for range r.Seq() {
			if n++; n == kept-int(last) {
				break
			}
		}
		r.Stop()
	}
	b.StopTimer()
	_ = br.Shutdown(context.Background())
}
