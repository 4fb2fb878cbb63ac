package bench

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/heraldgo/herald/broadcast"
)

// BenchmarkChurn is workload 3: Watch() then Stop() while a publisher
// publishes flat out on another goroutine (policy Drop / DropIfChannelFull,
// as event recording uses). allocs/op counts every allocation in the process
// during the loop, the publisher's included (it makes none on either system:
// see BenchmarkPublishIdle). publish-ns is the publisher's time per value
// meanwhile: how much the churn holds the publisher up.
func BenchmarkChurn(b *testing.B) {
	b.Run("k8s", func(b *testing.B) {
		// Not newK8s: here the constructor with the short incoming queue (25)
		// is the faster one for k8s, since its Watch and Stop wait behind
		// every queued event (1.5-2x faster than with the long queue here).
		m := watch.NewBroadcaster(queueLength, watch.DropIfChannelFull)
		var stop atomic.Bool
		var published atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			ev := eventAt(0)
			for n := int64(1); !stop.Load(); n++ {
				if err := m.Action(ev.Type, ev.Object); err != nil {
					panic(err)
				}
				published.Store(n)
			}
		})
		b.ReportAllocs()
		start, t0 := published.Load(), time.Now()
		for b.Loop() {
			w, err := m.Watch()
			if err != nil {
				b.Fatal(err)
			}
			w.Stop()
		}
		pub, took := published.Load()-start, time.Since(t0)
		stop.Store(true)
		wg.Wait()
		m.Shutdown()
		reportPublisher(b, pub, took)
	})
	b.Run("herald", func(b *testing.B) {
		hb := newHerald(broadcast.Drop)
		var stop atomic.Bool
		var published atomic.Int64
		var wg sync.WaitGroup
		wg.Go(func() {
			ev := eventAt(0)
			for n := int64(1); !stop.Load(); n++ {
				if err := hb.Publish(ev); err != nil {
					panic(err)
				}
				published.Store(n)
			}
		})
		b.ReportAllocs()
		start, t0 := published.Load(), time.Now()
		for b.Loop() {
			w, err := hb.Watch()
			if err != nil {
				b.Fatal(err)
			}
			w.Stop()
		}
		pub, took := published.Load()-start, time.Since(t0)
		stop.Store(true)
		wg.Wait()
		shutdownHerald(b, hb)
		reportPublisher(b, pub, took)
	})
}

func reportPublisher(b *testing.B, published int64, took time.Duration) {
	b.Helper()
	if published == 0 {
		published = 1 // a run too short for the publisher to get one value through
	}
	b.ReportMetric(float64(took.Nanoseconds())/float64(published), "publish-ns")
}
