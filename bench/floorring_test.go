package bench

import (
	"fmt"
	"iter"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/watch"
)

// fanoutRingFloor is workload 1 on the floor of All()'s design: what is
// left of it when herald's policies, claims, queues and ends are taken
// away. One publisher writes a shared ring of ringSize slots under one
// mutex and stores the tail; each of n readers yields straight from the
// ring with no lock and publishes how far it has read once per batch of up
// to 64 values; a reader that caught up parks on a wake channel of its own
// under the mutex, and the publisher wakes the parked readers after
// releasing it. The publisher never laps a reader: before a value that
// would overwrite an unread slot, it waits for the slowest reader, as a
// Block watcher makes it do. Every delivery is checked by the same reader
// loop as the other systems'. With claim, each reader also does what an
// All() loop does to keep guarantee 3 exact: it copies each batch under a
// mutex of its own and claims each value with a CAS just before yielding
// it (read.go); the difference between the two is what that costs.
func fanoutRingFloor(b *testing.B, n int, claim bool) {
	want := b.N + 1
	f := &fanRing{pos: make([]readerPos, n), room: make(chan struct{}, 1), claim: claim}
	for i := range f.pos {
		f.pos[i].Store(1) // the next sequence number each reader reads
		f.pos[i].claimed.Store(1)
	}
	var wg, warm sync.WaitGroup
	warm.Add(n)
	errs := make(chan error, n)
	for k := range n {
		each, warmed := warmThenInOrder(&warm)
		wg.Go(func() {
			defer warmed()
			if got, err := readSeq(f.values(k, want))(want, each); err != nil {
				errs <- fmt.Errorf("reader %d: %d of %d: %w", k, got, want, err)
			}
		})
	}
	f.publish(eventAt(0))
	warm.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i < want; i++ {
		f.publish(eventAt(i))
	}
	wg.Wait()
	b.StopTimer()
	if err := firstError(errs); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
}

type fanRing struct {
	tail       atomic.Uint64 // the last sequence number written
	pos        []readerPos
	roomWanted atomic.Bool   // the publisher waits for a reader to move on
	room       chan struct{} // cap 1
	bound      uint64        // the publisher's: no slot before this needs a look at pos
	claim      bool          // readers copy under a mutex and claim with a CAS

	mu     sync.Mutex
	slots  [ringSize]watch.Event
	parked []chan struct{} // guarded by mu
	woken  []chan struct{} // the publisher's
}

// readerPos is how far one reader has read, alone on its cache line, as
// each watcher's position is in a Watcher of its own; with claim, also
// the reader's mutex and its claimed position (a Watcher's mu and next).
type readerPos struct {
	atomic.Uint64
	mu      sync.Mutex
	claimed atomic.Uint64
	_       [40]byte
}

// publish writes v as the next value, once no reader would lose a slot.
func (f *fanRing) publish(v watch.Event) {
	s := f.tail.Load() + 1 // one publisher
	for s >= f.bound {
		f.roomWanted.Store(true)
		slowest := f.tail.Load() + 1
		for i := range f.pos {
			slowest = min(slowest, f.pos[i].Load())
		}
		f.bound = slowest + ringSize
		if s < f.bound {
			f.roomWanted.Store(false)
			break
		}
		<-f.room // a reader stores its pos, then looks at roomWanted
	}
	f.mu.Lock()
	f.slots[s%ringSize] = v
	f.tail.Store(s)
	f.woken = append(f.woken[:0], f.parked...)
	clear(f.parked)
	f.parked = f.parked[:0]
	f.mu.Unlock()
	for _, w := range f.woken {
		select {
		case w <- struct{}{}:
		default:
		}
	}
}

// values is reader k's stream of want values.
func (f *fanRing) values(k, want int) iter.Seq[watch.Event] {
	return func(yield func(watch.Event) bool) {
		wake := make(chan struct{}, 1)
		next := uint64(1)
		defer func() { // done, or failed: the publisher no longer waits for k
			f.pos[k].Store(math.MaxUint64)
			select {
			case f.room <- struct{}{}:
			default:
			}
		}()
		var batch []watch.Event
		for got := 0; got < want; {
			t := min(f.tail.Load(), next+63)
			if f.claim {
				rp := &f.pos[k]
				rp.mu.Lock()
				batch = batch[:0]
				for q := next; q <= t; q++ {
					batch = append(batch, f.slots[q%ringSize])
				}
				rp.mu.Unlock()
				for _, v := range batch {
					if !rp.claimed.CompareAndSwap(next, next+1) {
						panic("floor-ring-claim: a claim failed with one reader")
					}
					next++
					got++
					if !yield(v) {
						return
					}
				}
			}
			for ; next <= t; next++ {
				got++
				if !yield(f.slots[next%ringSize]) {
					return
				}
			}
			f.pos[k].Store(next)
			if f.roomWanted.Load() && f.roomWanted.CompareAndSwap(true, false) {
				select {
				case f.room <- struct{}{}:
				default:
				}
			}
			if got == want || f.tail.Load() >= next {
				continue
			}
			f.mu.Lock()
			idle := f.tail.Load() < next
			if idle {
				f.parked = append(f.parked, wake)
			}
			f.mu.Unlock()
			if idle {
				<-wake
			}
		}
	}
}
