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

// latencyWatcherCounts are the sizes workload 6 runs at.
var latencyWatcherCounts = []int{1, 100, 1000}

// latencySampleBudget caps the samples recorded over all watchers (each
// watcher records up to latencySampleBudget/watchers values), so that a long
// run does not spend its memory on samples.
const latencySampleBudget = 2_000_000

// latencyRun is workload 6, shared by both systems: one value in flight at a
// time (publish, then wait until all n watchers received it), so that the
// latency measured is the delivery path's and not a queue's. Each watcher
// records now − (time just before Publish) for every value; p50-ns and p99-ns
// are over all (watcher, value) pairs. ns/op is the round trip: Publish until
// the last watcher has it.
type latencyRun struct {
	b       *testing.B
	n       int // watchers
	perW    int // samples per watcher
	base    time.Time
	sentAt  []int64 // sentAt[i]: ns since base just before value i was published
	pending atomic.Int32
	done    chan struct{}
	samples [][]float64
	wg      sync.WaitGroup
	stops   []func() // the watchers' Stop, called by finish

	failOnce sync.Once
	failed   chan struct{} // closed by fail
	err      error         // the first failure; read after failed is closed
}

// fail records the first failure and releases drive.
func (r *latencyRun) fail(err error) {
	r.failOnce.Do(func() {
		r.err = err
		close(r.failed)
	})
}

func newLatencyRun(b *testing.B, n int) *latencyRun {
	r := &latencyRun{
		b:       b,
		n:       n,
		perW:    latencySampleBudget / n,
		base:    time.Now(),
		sentAt:  make([]int64, b.N),
		done:    make(chan struct{}, 1),
		samples: make([][]float64, n),
		failed:  make(chan struct{}),
	}
	for i := range r.samples {
		r.samples[i] = make([]float64, 0, min(b.N, r.perW))
	}
	return r
}

// receiver returns watcher k's per-value callback.
func (r *latencyRun) receiver(k int) func(i int, ev watch.Event) error {
	return func(i int, ev watch.Event) error {
		lat := time.Since(r.base).Nanoseconds() - r.sentAt[i]
		if err := inOrder(i, ev); err != nil {
			r.fail(err)
		}
		if i < r.perW {
			r.samples[k] = append(r.samples[k], float64(lat))
		}
		if r.pending.Add(-1) == 0 {
			r.done <- struct{}{}
		}
		return nil
	}
}

// drive publishes b.N values one at a time.
func (r *latencyRun) drive(publish func(i int) error) {
	b := r.b
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		r.pending.Store(int32(r.n))
		r.sentAt[i] = time.Since(r.base).Nanoseconds()
		if err := publish(i); err != nil {
			b.Fatal(err)
		}
		select {
		case <-r.done:
		case <-r.failed:
			b.Fatal(r.err)
		}
	}
	b.StopTimer()
}

func (r *latencyRun) finish() {
	b := r.b
	b.Helper()
	r.wg.Wait()
	for _, stop := range r.stops {
		stop()
	}
	select {
	case <-r.failed:
		b.Fatal(r.err)
	default:
	}
	var all []float64
	for _, s := range r.samples {
		all = append(all, s...)
	}
	q := quantiles(all, 0.5, 0.99)
	b.ReportMetric(q[0], "p50-ns")
	b.ReportMetric(q[1], "p99-ns")
}

func BenchmarkLatency(b *testing.B) {
	b.Run("k8s", func(b *testing.B) {
		for _, n := range latencyWatcherCounts {
			b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { latencyK8s(b, n) })
		}
	})
	for _, rd := range readers {
		b.Run(rd.name, func(b *testing.B) {
			for _, n := range latencyWatcherCounts {
				b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { latencyHerald(b, n, rd) })
			}
		})
	}
	for _, claim := range []bool{false, true} {
		name := map[bool]string{false: "floor-ring", true: "floor-ring-claim"}[claim]
		b.Run(name, func(b *testing.B) {
			for _, n := range latencyWatcherCounts {
				b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { latencyRingFloor(b, n, claim) })
			}
		})
	}
	b.Run("floor-ring-lockfree", func(b *testing.B) {
		for _, n := range latencyWatcherCounts {
			b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { latencyLockFreeFloor(b, n) })
		}
	})
}

// latencyRingFloor is the floor of All()'s design for one value in flight:
// a shared ring written under one mutex, each reader copying from it with
// no lock and parking on a wake channel of its own under that mutex, the
// publisher waking the parked readers after releasing it. It has none of
// herald's policies, claims or ends, and no protection against lapping
// (one value is in flight), so no All() reader can wake faster. With
// claim, each reader also copies under a mutex of its own and claims each
// value with a CAS, as an All() loop does for guarantee 3 (see
// fanoutRingFloor).
func latencyRingFloor(b *testing.B, n int, claim bool) {
	r := newLatencyRun(b, n)
	f := &ringFloor{}
	for k := range n {
		each := r.receiver(k)
		r.wg.Go(func() {
			wake := make(chan struct{}, 1)
			next := uint64(1)
			rp := &readerPos{}
			rp.claimed.Store(1)
			var batch []watch.Event
			for got := 0; got < b.N && claim; {
				rp.mu.Lock()
				batch = batch[:0]
				for t := f.tail.Load(); next+uint64(len(batch)) <= t; {
					batch = append(batch, f.slots[(next+uint64(len(batch)))%ringSize])
				}
				rp.mu.Unlock()
				for _, v := range batch {
					if !rp.claimed.CompareAndSwap(next, next+1) {
						panic("floor-ring-claim: a claim failed with one reader")
					}
					next++
					if err := each(got, v); err != nil {
						r.fail(err)
						return
					}
					got++
				}
				if got < b.N && f.park(next, wake) {
					<-wake
				}
			}
			for got := 0; got < b.N && !claim; {
				for t := f.tail.Load(); next <= t && got < b.N; next++ {
					if err := each(got, f.slots[next%ringSize]); err != nil {
						r.fail(err)
						return
					}
					got++
				}
				if f.park(next, wake) && got < b.N {
					<-wake
				}
			}
		})
	}
	var woken []chan struct{} // the publisher's: one publisher
	r.drive(func(i int) error {
		f.mu.Lock()
		s := f.tail.Load() + 1
		f.slots[s%ringSize] = eventAt(i)
		f.tail.Store(s)
		woken = append(woken[:0], f.parked...)
		clear(f.parked)
		f.parked = f.parked[:0]
		f.mu.Unlock()
		for _, w := range woken {
			select {
			case w <- struct{}{}:
			default:
			}
		}
		return nil
	})
	r.finish()
}

// latencyLockFreeFloor is floor-ring with no lock at all: a reader parks
// by pushing its node onto a stack with a CAS (once; it stays there until a
// publisher takes the stack), then loads the tail again and waits; the
// publisher stores the tail, takes the whole stack with a swap and wakes
// every node on it. It is the "per-reader parking without a shared lock"
// that All() could use instead of parking under the broadcaster's mutex,
// measured before building it (issue 27): it would cost All() two atomic
// fields and a node protocol.
func latencyLockFreeFloor(b *testing.B, n int) {
	r := newLatencyRun(b, n)
	var tail atomic.Uint64
	var stack atomic.Pointer[floorNode]
	var slots [ringSize]watch.Event
	for k := range n {
		each := r.receiver(k)
		r.wg.Go(func() {
			nd := &floorNode{wake: make(chan struct{}, 1)}
			next := uint64(1)
			for got := 0; got < b.N; {
				for t := tail.Load(); next <= t && got < b.N; next++ {
					if err := each(got, slots[next%ringSize]); err != nil {
						r.fail(err)
						return
					}
					got++
				}
				if got == b.N {
					return
				}
				if !nd.listed.Load() {
					nd.listed.Store(true)
					for {
						nd.next = stack.Load()
						if stack.CompareAndSwap(nd.next, nd) {
							break
						}
					}
				}
				// The push came before this load, and the publisher swaps
				// the stack after storing the tail: either this sees the
				// value or the publisher sees the node.
				if tail.Load() < next {
					<-nd.wake
				}
			}
		})
	}
	r.drive(func(i int) error {
		s := tail.Load() + 1 // one publisher
		slots[s%ringSize] = eventAt(i)
		tail.Store(s)
		for nd := stack.Swap(nil); nd != nil; {
			next := nd.next // read before the node may be pushed again
			nd.listed.Store(false)
			select {
			case nd.wake <- struct{}{}:
			default:
			}
			nd = next
		}
		return nil
	})
	r.finish()
}

// floorNode is a parked reader of latencyLockFreeFloor.
type floorNode struct {
	wake   chan struct{} // cap 1
	next   *floorNode    // written by its reader before the push
	listed atomic.Bool   // on the stack: pushed, not yet taken
}

// park adds wake to the parked readers if the tail is still before next,
// and says whether it did.
func (f *ringFloor) park(next uint64, wake chan struct{}) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	idle := f.tail.Load() < next
	if idle {
		f.parked = append(f.parked, wake)
	}
	return idle
}

type ringFloor struct {
	mu     sync.Mutex
	tail   atomic.Uint64
	slots  [ringSize]watch.Event
	parked []chan struct{} // guarded by mu
}

func latencyK8s(b *testing.B, n int) {
	r := newLatencyRun(b, n)
	m := newK8s(watch.WaitIfChannelFull)
	for k := range n {
		w, err := m.Watch()
		if err != nil {
			b.Fatal(err)
		}
		r.stops = append(r.stops, w.Stop)
		each := r.receiver(k)
		r.wg.Go(func() {
			if got, err := readK8s(w, b.N, each); err != nil {
				r.fail(fmt.Errorf("k8s watcher: %d of %d: %w", got, b.N, err))
				w.Stop()
			}
		})
	}
	r.drive(func(i int) error { return m.Action(watch.Added, eventAt(i).Object) })
	r.finish()
	m.Shutdown()
}

func latencyHerald(b *testing.B, n int, rd reader) {
	r := newLatencyRun(b, n)
	hb := newHerald(broadcast.Block)
	for k := range n {
		w, err := hb.Watch()
		if err != nil {
			b.Fatal(err)
		}
		r.stops = append(r.stops, w.Stop)
		each, read := r.receiver(k), rd.open(w)
		r.wg.Go(func() {
			if got, err := read(b.N, each); err != nil {
				r.fail(fmt.Errorf("%s watcher: %d of %d: %w", rd.name, got, b.N, err))
				w.Stop()
			}
		})
	}
	r.drive(func(i int) error { return hb.Publish(eventAt(i)) })
	r.finish()
	shutdownHerald(b, hb)
}
