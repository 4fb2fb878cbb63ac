package bench

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/watch"

	"github.com/heraldgo/herald/broadcast"
)

var watcherCounts = []int{1, 10, 100, 1000}

// BenchmarkFanout is workload 1: one publisher, N watchers each draining in
// its own goroutine, lossless (k8s WaitIfChannelFull, herald Block), queue
// length 1000. One op is one published value, and the clock runs until every
// watcher has received every value, checked in order. The clock starts after
// one warm-up value has reached every watcher and stops before the watchers
// are stopped, so allocs/op is what publishing and delivering cost. The
// floors (floorReaders) run the same readers without a broadcaster.
func BenchmarkFanout(b *testing.B) {
	b.Run("k8s", func(b *testing.B) {
		for _, n := range watcherCounts {
			b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { fanoutK8s(b, n) })
		}
	})
	for _, r := range readers {
		b.Run(r.name, func(b *testing.B) {
			for _, n := range watcherCounts {
				b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { fanoutHerald(b, n, r) })
			}
		})
	}
	for _, claim := range []bool{false, true} {
		name := map[bool]string{false: "floor-ring", true: "floor-ring-claim"}[claim]
		b.Run(name, func(b *testing.B) {
			for _, n := range watcherCounts {
				b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { fanoutRingFloor(b, n, claim) })
			}
		})
	}
	for _, name := range floorReaders {
		b.Run(name, func(b *testing.B) {
			for _, n := range watcherCounts {
				b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { fanoutFloor(b, n, name == "floor-chan") })
			}
		})
	}
}

func fanoutK8s(b *testing.B, n int) {
	m := newK8s(watch.WaitIfChannelFull)
	want := b.N + 1 // value 0 warms every reader up, untimed
	errs := make(chan error, n)
	var wg, warm sync.WaitGroup
	warm.Add(n)
	ws := make([]watch.Interface, 0, n)
	for range n {
		w, err := m.Watch()
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
		each, warmed := warmThenInOrder(&warm)
		wg.Go(func() {
			defer warmed()
			if got, err := readK8s(w, want, each); err != nil {
				errs <- fmt.Errorf("k8s watcher: %d of %d: %w", got, want, err)
				w.Stop() // releases a publisher waiting on this watcher
			}
		})
	}
	if err := m.Action(watch.Added, eventAt(0).Object); err != nil {
		b.Fatal(err)
	}
	warm.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i < want; i++ {
		if err := m.Action(watch.Added, eventAt(i).Object); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	for _, w := range ws {
		w.Stop()
	}
	m.Shutdown()
	if err := firstError(errs); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
}

func fanoutHerald(b *testing.B, n int, r reader) {
	hb := newHerald(broadcast.Block)
	want := b.N + 1
	errs := make(chan error, n)
	var wg, warm sync.WaitGroup
	warm.Add(n)
	ws := make([]*broadcast.Watcher[watch.Event], 0, n)
	for range n {
		w, err := hb.Watch()
		if err != nil {
			b.Fatal(err)
		}
		ws = append(ws, w)
		read := r.open(w)
		each, warmed := warmThenInOrder(&warm)
		wg.Go(func() {
			defer warmed()
			if got, err := read(want, each); err != nil {
				errs <- fmt.Errorf("%s watcher: %d of %d: %w", r.name, got, want, err)
				w.Stop() // releases a publisher waiting on this watcher
			}
		})
	}
	if err := hb.Publish(eventAt(0)); err != nil {
		b.Fatal(err)
	}
	warm.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i < want; i++ {
		if err := hb.Publish(eventAt(i)); err != nil {
			b.Fatal(err)
		}
	}
	wg.Wait()
	b.StopTimer()
	for _, w := range ws {
		w.Stop()
	}
	shutdownHerald(b, hb)
	if err := firstError(errs); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
}

// warmThenInOrder returns one fan-out reader's per-value check, and warmed,
// which marks the reader warm (once; the reader defers it, so that a reader
// that fails before its first value does not leave the benchmark waiting).
// The first value is the warm-up, published before the clock starts so that
// every reader is past its start-up, allocations included.
func warmThenInOrder(warm *sync.WaitGroup) (each func(int, watch.Event) error, warmed func()) {
	warmed = sync.OnceFunc(warm.Done)
	return func(i int, ev watch.Event) error {
		if i == 0 {
			warmed()
		}
		return inOrder(i, ev)
	}, warmed
}

// BenchmarkPublishIdle is workload 2: publishing with no watcher registered
// (k8s: Action; its distribution loop still receives every event).
func BenchmarkPublishIdle(b *testing.B) {
	b.Run("k8s", func(b *testing.B) {
		m := newK8s(watch.DropIfChannelFull)
		ev := eventAt(0)
		b.ReportAllocs()
		for b.Loop() {
			if err := m.Action(ev.Type, ev.Object); err != nil {
				b.Fatal(err)
			}
		}
		m.Shutdown()
	})
	b.Run("herald", func(b *testing.B) {
		hb := newHerald(broadcast.Drop)
		ev := eventAt(0)
		b.ReportAllocs()
		for b.Loop() {
			if err := hb.Publish(ev); err != nil {
				b.Fatal(err)
			}
		}
		shutdownHerald(b, hb)
	})
	// The floor of a Publish under one mutex: what herald's does with no
	// watcher, less the checks (lock, store the sequence number, unlock).
	b.Run("floor-mutex", func(b *testing.B) {
		var mu sync.Mutex
		var tail atomic.Uint64
		b.ReportAllocs()
		for b.Loop() {
			mu.Lock()
			tail.Store(tail.Load() + 1)
			mu.Unlock()
		}
	})
}

// Lossy fan-out (workload 5): 100 watchers at Drop / DropIfChannelFull, of
// which 10 never read. ns/op is the publisher's time per Publish/Action;
// fast-delivered-% is the share of published values that the median fast
// watcher received (all of them drain until their stream closes at
// Shutdown), fast-values/s how many it received per second from the first
// Publish until it had drained; slow-held is what a never-reading watcher
// holds at the end.
const (
	lossyWatchers = 100
	lossySlow     = 10
)

func BenchmarkLossy(b *testing.B) {
	b.Run("k8s", func(b *testing.B) {
		m := newK8s(watch.DropIfChannelFull)
		fast := make([]int, 0, lossyWatchers-lossySlow)
		fastW := make([]watch.Interface, 0, lossyWatchers-lossySlow)
		var slow []watch.Interface
		var wg sync.WaitGroup
		for i := range lossyWatchers {
			w, err := m.Watch()
			if err != nil {
				b.Fatal(err)
			}
			if i%(lossyWatchers/lossySlow) == 0 {
				slow = append(slow, w)
				continue
			}
			fast = append(fast, 0)
			fastW = append(fastW, w)
		}
		for k, w := range fastW {
			wg.Go(func() {
				for range w.ResultChan() {
					fast[k]++
				}
			})
		}
		b.ReportAllocs()
		b.ResetTimer()
		t0 := time.Now()
		for i := range b.N {
			if err := m.Action(watch.Added, eventAt(i).Object); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		m.Shutdown() // distributes what is queued, then closes every ResultChan
		wg.Wait()
		took := time.Since(t0) // until every fast watcher has drained its stream
		held := 0
		for _, w := range slow {
			for range w.ResultChan() {
				held++
			}
		}
		reportLossy(b, fast, held/len(slow), took)
	})
	b.Run("herald-C", func(b *testing.B) {
		hb := newHerald(broadcast.Drop)
		fast := make([]int, 0, lossyWatchers-lossySlow)
		fastW := make([]*broadcast.Watcher[watch.Event], 0, lossyWatchers-lossySlow)
		var slow []*broadcast.Watcher[watch.Event]
		var wg sync.WaitGroup
		for i := range lossyWatchers {
			w, err := hb.Watch()
			if err != nil {
				b.Fatal(err)
			}
			if i%(lossyWatchers/lossySlow) == 0 {
				slow = append(slow, w)
				continue
			}
			fast = append(fast, 0)
			fastW = append(fastW, w)
		}
		for k, w := range fastW {
			ch := w.C() // before the clock starts, as for k8s's channel
			wg.Go(func() {
				for range ch {
					fast[k]++
				}
			})
		}
		b.ReportAllocs()
		b.ResetTimer()
		t0 := time.Now()
		for i := range b.N {
			if err := hb.Publish(eventAt(i)); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		shutdownHerald(b, hb) // delivers per policy, then closes every C()
		wg.Wait()
		took := time.Since(t0) // until every fast watcher has drained its stream
		held := 0
		for _, w := range slow {
			n := 0
			for range w.C() {
				n++
			}
			// Guarantee 3: received + Dropped() == published to it.
			if got := uint64(n) + w.Dropped(); got != uint64(b.N) {
				b.Fatalf("slow watcher: received %d + dropped %d != published %d", n, w.Dropped(), b.N)
			}
			if want := min(b.N, queueLength); n != want {
				b.Fatalf("slow watcher holds %d values, want %d", n, want)
			}
			held += n
		}
		for k, w := range fastW {
			if got := uint64(fast[k]) + w.Dropped(); got != uint64(b.N) {
				b.Fatalf("fast watcher: received %d + dropped %d != published %d", fast[k], w.Dropped(), b.N)
			}
		}
		reportLossy(b, fast, held/len(slow), took)
	})
}

func reportLossy(b *testing.B, fast []int, held int, took time.Duration) {
	b.Helper()
	share := make([]float64, len(fast))
	for i, n := range fast {
		share[i] = float64(n)
	}
	got := median(share)
	b.ReportMetric(100*got/float64(b.N), "fast-delivered-%")
	b.ReportMetric(got/took.Seconds(), "fast-values/s")
	b.ReportMetric(float64(held), "slow-held")
}

// floorReaders are workload 1's floors: its readers without a broadcaster,
// the part of every system's figure that is not the fan-out's. Each runs
// workload 1's reader loop and per-value check on values from memory:
// "floor-iter" through an iterator (readSeq, as All() is read),
// "floor-chan" through a channel of floorChanBuffer values filled by a
// goroutine of its own (readChan, as C() is read): what any design that
// gives each watcher a channel filled by a goroutine pays at least. (63,
// the buffer C() had when a forwarder goroutine filled it; C() is now the
// watcher's queue, written by the publisher.)
var floorReaders = []string{"floor-iter", "floor-chan"}

const floorChanBuffer = 63

func fanoutFloor(b *testing.B, n int, viaChan bool) {
	want := b.N + 1
	values := func(yield func(watch.Event) bool) {
		for i := range want {
			if !yield(eventAt(i)) {
				return
			}
		}
	}
	var wg, warm sync.WaitGroup
	warm.Add(n)
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		read := readSeq(values)
		var ch chan watch.Event
		if viaChan {
			ch = make(chan watch.Event, floorChanBuffer)
			wg.Go(func() {
				defer close(ch)
				<-start
				for ev := range values {
					ch <- ev
				}
			})
			read = readChan(ch)
		}
		// The same check as workload 1's readers; nobody waits for warm.
		each, _ := warmThenInOrder(&warm)
		wg.Go(func() {
			<-start
			if got, err := read(want, each); err != nil {
				errs <- fmt.Errorf("%d of %d: %w", got, want, err)
				if ch != nil {
					for range ch { // let the filler finish
					}
				}
			}
		})
	}
	b.ReportAllocs()
	b.ResetTimer()
	close(start)
	wg.Wait()
	b.StopTimer()
	if err := firstError(errs); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
}
