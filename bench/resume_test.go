package bench

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/heraldgo/herald/broadcast"
)

// BenchmarkResume is workload 9: what resuming costs, herald alone
// (Kubernetes' watch.Broadcaster keeps no history and cannot resume), each
// figure next to herald's own baseline: Publish with WithHistory(1000)
// against without, with no watcher and with one full Drop watcher nobody
// reads; WatchFrom(1) replaying 1000 kept values against Watch (both then
// Stop); and a reader evicted with a queue of 100 that resumes from a
// history of 10 000 and reads every kept value through Seq, against a
// reader that reads the same 10 000 values queued for it live (ns/op is
// per value there).
func BenchmarkResume(b *testing.B) {
	b.Run("herald", func(b *testing.B) {
		for _, watchers := range []int{0, 1} {
			for _, hist := range []int{0, 1000} {
				b.Run(fmt.Sprintf("publish/watchers=%d/history=%d", watchers, hist), func(b *testing.B) {
					resumePublish(b, watchers, hist)
				})
			}
		}
		for _, replay := range []bool{false, true} {
			b.Run(fmt.Sprintf("watch/replay=%v", replay), func(b *testing.B) { resumeWatch(b, replay) })
		}
		b.Run("read/live", func(b *testing.B) { resumeRead(b, false) })
		b.Run("read/catch-up", func(b *testing.B) { resumeRead(b, true) })
	})
}

func resumePublish(b *testing.B, watchers, hist int) {
	hb := broadcast.New[watch.Event](broadcast.WithHistory(hist))
	for range watchers {
		if _, err := hb.Watch(broadcast.WithQueueLength(10)); err != nil {
			b.Fatal(err)
		}
	}
	ev := eventAt(0)
	b.ReportAllocs()
	for b.Loop() {
		if err := hb.Publish(ev); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	_ = hb.Shutdown(context.Background()) // the unread watcher holds its queue: nothing to wait for
}

func resumeWatch(b *testing.B, replay bool) {
	hb := broadcast.New[watch.Event](broadcast.WithHistory(1000))
	for i := range 1000 {
		if err := hb.Publish(eventAt(i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		var w *broadcast.Watcher[watch.Event]
		var err error
		if replay {
			w, err = hb.WatchFrom(1)
		} else {
			w, err = hb.Watch()
		}
		if err != nil {
			b.Fatal(err)
		}
		w.Stop()
	}
	b.StopTimer()
	shutdownHerald(b, hb)
}

// resumeRead measures reading 10 000 values per round through Seq, per
// value: queued for a watcher live (queue 10 000), or replayed by
// WatchFrom after the watcher reading them was evicted (queue 100).
func resumeRead(b *testing.B, catchUp bool) {
	const kept = 10_000
	hb := broadcast.New[watch.Event](broadcast.WithHistory(kept))
	defer shutdownHerald(b, hb)
	b.ReportAllocs()
	b.ResetTimer()
	for round := 0; round*kept < b.N; round++ {
		b.StopTimer()
		opts := []broadcast.Option{broadcast.WithQueueLength(kept), broadcast.WithPolicy(broadcast.Block)}
		if catchUp {
			opts = []broadcast.Option{broadcast.WithQueueLength(100), broadcast.WithPolicy(broadcast.Evict)}
		}
		w, err := hb.Watch(opts...)
		if err != nil {
			b.Fatal(err)
		}
		first := hb.Stats().Published + 1
		for i := range kept {
			if err := hb.Publish(eventAt(i)); err != nil {
				b.Fatal(err)
			}
		}
		if catchUp {
			if w.Err() != broadcast.ErrEvicted {
				b.Fatalf("the reader was not evicted: Err() = %v", w.Err())
			}
			w.Stop()
		}
		b.StartTimer()
		if catchUp {
			if w, err = hb.WatchFrom(first); err != nil {
				b.Fatal(err)
			}
		}
		want := first
		for s := range w.Seq() {
			if s != want {
				b.Fatalf("sequence number %d, want %d", s, want)
			}
			if want++; want == first+kept {
				break
			}
		}
		w.Stop()
		if want != first+kept {
			b.Fatalf("read up to %d, want %d", want, first+kept)
		}
	}
	b.StopTimer()
	// ns/op is per value only if every round reads kept of them.
	rounds := (b.N + kept - 1) / kept
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(rounds*kept), "ns/value")
}
