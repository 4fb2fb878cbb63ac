package bench

import (
	"runtime"
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/heraldgo/herald/broadcast"
)

// idleWatchers is how many watchers workload 4 registers (HERALD_BENCH_IDLE
// overrides it).
var idleWatchers = envInt("HERALD_BENCH_IDLE", 5000)

// footprint is the process's memory at one point, after two full GCs.
type footprint struct {
	heap       uint64 // runtime.MemStats.HeapAlloc: live heap objects
	stack      uint64 // runtime.MemStats.StackInuse: goroutine stacks
	goroutines int
}

func measure() footprint {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return footprint{ms.HeapAlloc, ms.StackInuse, runtime.NumGoroutine()}
}

// report records after-before per watcher. Heap and goroutine stacks are
// reported separately: Go accounts stacks outside HeapAlloc, so a design that
// parks a goroutine per watcher would look free in heap-B/watcher alone.
func (before footprint) report(b *testing.B, after footprint, n int) {
	b.Helper()
	per := func(x, y uint64) float64 { return (float64(x) - float64(y)) / float64(n) }
	b.ReportMetric(per(after.heap, before.heap), "heap-B/watcher")
	b.ReportMetric(per(after.stack, before.stack), "stack-B/watcher")
	b.ReportMetric(float64(after.goroutines-before.goroutines)/float64(n), "goroutines/watcher")
}

// BenchmarkIdleWatcher is workload 4: the memory one registered, idle watcher
// costs at queue length 1000, over idleWatchers of them. herald is measured
// right after Watch and, in herald-C, after C() was called on each watcher
// (C() may build the channel lazily). The time per op is meaningless here;
// the driver runs it with -benchtime 1x.
func BenchmarkIdleWatcher(b *testing.B) {
	n := idleWatchers
	b.Run("k8s", func(b *testing.B) {
		for range b.N {
			m := newK8s(watch.DropIfChannelFull)
			ws := make([]watch.Interface, 0, n)
			before := measure()
			for range n {
				w, err := m.Watch()
				if err != nil {
					b.Fatal(err)
				}
				ws = append(ws, w)
			}
			for _, w := range ws {
				_ = w.ResultChan() // the same call herald-C makes; free here
			}
			after := measure()
			before.report(b, after, n)
			for _, w := range ws {
				w.Stop()
			}
			m.Shutdown()
		}
	})
	for _, callC := range []bool{false, true} {
		name := "herald"
		if callC {
			name = "herald-C"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				hb := newHerald(broadcast.Drop)
				ws := make([]*broadcast.Watcher[watch.Event], 0, n)
				before := measure()
				for range n {
					w, err := hb.Watch()
					if err != nil {
						b.Fatal(err)
					}
					ws = append(ws, w)
				}
				if callC {
					for _, w := range ws {
						_ = w.C()
					}
				}
				after := measure()
				before.report(b, after, n)
				for _, w := range ws {
					w.Stop()
				}
				shutdownHerald(b, hb)
			}
		})
	}
}
