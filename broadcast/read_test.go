package broadcast_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// TestAllBreakLeavesWatcherRegistered: breaking out of All() does not stop
// the watcher; the values after the one the loop saw come next, through
// either path.
func TestAllBreakLeavesWatcherRegistered(t *testing.T) {
	for _, rp := range readPaths {
		t.Run("then "+rp.name, func(t *testing.T) {
			b := newB(t)
			w := watch(t, b, with(broadcast.Drop, 10)...)
			publish(t, b, 1, 2, 3)
			var seen []int
			for v := range w.All() {
				seen = append(seen, v)
				break
			}
			if d := diff([]int{1}, seen); d != "" {
				t.Fatalf("first loop (-want +got):\n%s", d)
			}
			checkStats(t, b, broadcast.Stats{Published: 3, Watchers: 1})
			publish(t, b, 4)
			shutdown(t, b)
			if d := diff([]int{2, 3, 4}, rp.take(t, w, -1)); d != "" {
				t.Errorf("after the break (-want +got):\n%s", d)
			}
		})
	}
}

// numbered reads w through Seq until it ends (n < 0) or n values.
func numbered(t *testing.T, w *broadcast.Watcher[int], n int) (seqs []uint64, vs []int) {
	t.Helper()
	for s, v := range w.Seq() {
		seqs, vs = append(seqs, s), append(vs, v)
		if len(vs) == n {
			break
		}
	}
	return seqs, vs
}

// TestSequenceNumbers: guarantee 8. The n-th accepted value has number n, a
// TryPublish that returns false takes none, Stats().Published is the last
// number, prefix values have 0, and a gap in the numbers is exactly the
// values the watcher lost.
func TestSequenceNumbers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newB(t)
		publish(t, b, 100) // number 1, watched by nobody
		blocker := watch(t, b, with(broadcast.Block, 1)...)
		w, err := b.WatchWithPrefix([]int{-1}, with(broadcast.Drop, 2)...)
		if err != nil {
			t.Fatal(err)
		}
		publish(t, b, 101) // 2: fills the blocker
		if ok, err := b.TryPublish(999); ok || err != nil {
			t.Fatalf("TryPublish with a full Block watcher = (%v, %v), want (false, nil)", ok, err)
		}
		readPaths[1].take(t, blocker, 1)
		blocker.Stop()
		publish(t, b, 102, 103, 104) // 3, 4, 5: w (queue 2) drops 103 and 104
		if got := b.Stats().Published; got != 5 {
			t.Errorf("Stats().Published = %d, want 5 (the TryPublish that failed takes no number)", got)
		}
		shutdown(t, b)
		seqs, vs := numbered(t, w, -1)
		if d := diff([]uint64{0, 2, 3}, seqs); d != "" {
			t.Errorf("sequence numbers (-want +got):\n%s", d)
		}
		if d := diff([]int{-1, 101, 102}, vs); d != "" {
			t.Errorf("values (-want +got):\n%s", d)
		}
		if got := w.Dropped(); got != uint64(b.Stats().Published-seqs[len(seqs)-1]) {
			t.Errorf("Dropped() = %d, want the %d values after the last number received", got, b.Stats().Published-seqs[len(seqs)-1])
		}
	})
}

// TestSeqShowsGaps: a DropOldest watcher that falls behind sees, through
// Seq, exactly how many values it lost between two it received.
func TestSeqShowsGaps(t *testing.T) {
	b := newB(t)
	w := watch(t, b, with(broadcast.DropOldest, 3)...)
	publish(t, b, testutil.Seq(1, 11)...)
	shutdown(t, b)
	seqs, vs := numbered(t, w, -1)
	if d := diff([]uint64{8, 9, 10}, seqs); d != "" {
		t.Errorf("sequence numbers (-want +got):\n%s", d)
	}
	if d := diff([]int{8, 9, 10}, vs); d != "" {
		t.Errorf("values (-want +got):\n%s", d)
	}
	if w.Dropped() != seqs[0]-1 {
		t.Errorf("Dropped() = %d, want %d: the gap before the first number", w.Dropped(), seqs[0]-1)
	}
}

func hostileReadCases() []hostileCase {
	return []hostileCase{
		{
			name: "C() after breaking out of All()",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(3))
				hPub(t, b, 1, 2, 3)
				for v := range w.All() {
					r.Values = append(r.Values, v)
					break
				}
				hPub(t, b, 4, 5) // 5 pushes 2 out
				hShutdown(t, b)
				r.Other = hC(t, w)
				r.Dropped = []uint64{w.Dropped()}
			},
			want: hostileResult{Values: []int{1}, Other: []int{3, 4, 5}, Dropped: []uint64{1}},
		},
		{
			name: "All() twice in a row, the first broken out of",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				hPub(t, b, 1, 2, 3)
				for v := range w.All() {
					r.Values = append(r.Values, v)
					if v == 2 {
						break
					}
				}
				hPub(t, b, 4)
				hShutdown(t, b)
				r.Other = hAll(t, w)
			},
			want: hostileResult{Values: []int{1, 2}, Other: []int{3, 4}},
		},
		{
			name: "two All() loops at once share the values",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(3)...)
				var res [2]chan []int
				for i := range res {
					res[i] = make(chan []int, 1)
					go func() {
						var got []int
						for v := range w.All() {
							got = append(got, v)
						}
						res[i] <- got
					}()
				}
				hPub(t, b, testutil.Seq(0, 100)...)
				hShutdown(t, b)
				a, c := <-res[0], <-res[1]
				r.Strings = []string{fmt.Sprint(slices.IsSorted(a)), fmt.Sprint(slices.IsSorted(c))}
				r.Values = slices.Sorted(slices.Values(append(a, c...)))
			},
			want: hostileResult{Strings: []string{"true", "true"}, Values: testutil.Seq(0, 100)},
		},
		{
			name: "C() and All() of a watcher stopped before any read",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				hPub(t, b, 1)
				w.Stop()
				r.Values, r.Other = hAll(t, w), hC(t, w)
				r.Stats = b.Stats()
			},
			want: hostileResult{Stats: broadcast.Stats{Published: 1}},
		},
	}
}

// hostileReentrantCases: calls into the broadcaster from the goroutine that
// reads a watcher, inside its All() loop or its range over C().
func hostileReentrantCases(path string) []hostileCase {
	in := " from inside the " + path + " loop"
	// room is how many values a Block watcher of queue length 1 takes
	// while its reader is inside the loop body with the first: 1 in its
	// queue, on both read paths (guarantee 3).
	const room = 1
	return []hostileCase{
		{
			name: "Publish and Shutdown" + in,
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, broadcast.WithQueueLength(10))
				hPub(t, b, 1)
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					if v < 5 {
						r.Errs = append(r.Errs, hostileErr(b.Publish(v+1)))
					} else {
						r.Errs = append(r.Errs, hostileErr(b.Shutdown(context.Background())))
					}
					return true
				})
				r.Stats = b.Stats()
			},
			want: hostileResult{Values: []int{1, 2, 3, 4, 5}, Errs: []string{"nil", "nil", "nil", "nil", "nil"}, Stats: broadcast.Stats{Published: 5}},
		},
		{
			// The reader of a full Block watcher cannot make room while it
			// publishes: TryPublish says so.
			name: "TryPublish" + in + " of a Block watcher",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					switch v {
					case 1:
						for x := 2; x <= room+2; x++ { // 2 .. room+1 fit in the room left, room+2 does not
							ok, err := b.TryPublish(x)
							r.Ok = append(r.Ok, ok)
							r.Errs = append(r.Errs, hostileErr(err))
							synctest.Wait()
						}
					case room + 1:
						r.Errs = append(r.Errs, hostileErr(b.Shutdown(context.Background())))
					}
					return true
				})
				r.Stats = b.Stats()
			},
			want: hostileResult{
				Values: testutil.Seq(1, room+2),
				Ok:     append(slices.Repeat([]bool{true}, room), false),
				Errs:   slices.Repeat([]string{"nil"}, room+2),
				Stats:  broadcast.Stats{Published: uint64(room + 1)},
			},
		},
		{
			// The same with a wait: PublishContext returns at its deadline,
			// the value goes to the other watcher and is counted as dropped
			// for the full one. (Publish, which has no deadline, would wait
			// forever: the reader it waits for is itself.)
			name: "PublishContext with a deadline" + in + " of a Block watcher",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				other := hWatch(t, b, broadcast.WithQueueLength(10))
				hPub(t, b, 1)
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					switch v {
					case 1:
						for x := 2; x <= room+2; x++ {
							ctx, cancel := context.WithTimeout(context.Background(), time.Second)
							start := time.Now()
							r.Errs = append(r.Errs, hostileErr(b.PublishContext(ctx, x)))
							r.Elapsed += time.Since(start)
							cancel()
							synctest.Wait()
						}
					case room + 1:
						r.Errs = append(r.Errs, hostileErr(b.Shutdown(context.Background())))
					}
					return true
				})
				r.Other = hC(t, other)
				r.Dropped = []uint64{w.Dropped(), other.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{
				Values:  testutil.Seq(1, room+2),
				Other:   testutil.Seq(1, room+3),
				Errs:    append(append(slices.Repeat([]string{"nil"}, room), "DeadlineExceeded"), "nil"),
				Elapsed: time.Second, Dropped: []uint64{1, 0},
				Stats: broadcast.Stats{Published: uint64(room + 2), Dropped: 1},
			},
		},
		{
			name: "Watch, Stats and Stop" + in,
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b)
				hPub(t, b, 1, 2, 3)
				var late *broadcast.Watcher[int]
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					switch v {
					case 1:
						late = hWatch(t, b)
						hPub(t, b, 4)
						st := b.Stats()
						r.Strings = append(r.Strings, fmt.Sprintf("%+v", st))
					case 2:
						w.Stop()
						r.Strings = append(r.Strings, fmt.Sprintf("%+v", b.Stats()))
						hPub(t, b, 5)
					}
					return true
				})
				hShutdown(t, b)
				r.Other = hC(t, late)
				r.Stats = b.Stats()
			},
			want: hostileResult{
				// The loop ends at once after Stop, on both paths.
				Values:  []int{1, 2},
				Other:   []int{4, 5},
				Strings: []string{"{Published:4 Dropped:0 Watchers:2}", "{Published:4 Dropped:0 Watchers:1}"},
				Stats:   broadcast.Stats{Published: 5},
			},
		},
		{
			// Shutdown from the reader of a full Block watcher while a
			// Publish waits for it cannot complete the delivery: it returns
			// at its deadline, the Publish gives up, and the reader then
			// reads what was queued before its loop ends, on both read
			// paths (guarantee 6: Shutdown waits for no reader).
			name: "Shutdown with a deadline" + in + " while a Publish waits for that watcher",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w := hWatch(t, b, hBlock(1)...)
				hPub(t, b, 1)
				var pubs []<-chan error
				hLoop(path, w, func(v int) bool {
					r.Values = append(r.Values, v)
					if v != 1 {
						return true
					}
					for x := 2; x <= room+2; x++ { // 2 .. room+1 fit, room+2 waits for room
						pubs = append(pubs, hAsync(func() error { return b.Publish(x) }))
						synctest.Wait()
					}
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					defer cancel()
					start := time.Now()
					r.Errs = append(r.Errs, hostileErr(b.Shutdown(ctx)))
					r.Elapsed = time.Since(start)
					return true
				})
				for _, p := range pubs {
					r.Errs = append(r.Errs, hostileErr(<-p))
				}
				r.Dropped = []uint64{w.Dropped()}
				r.Stats = b.Stats()
			},
			want: hostileResult{
				Values:  []int{1, 2},
				Errs:    append(append([]string{"DeadlineExceeded"}, slices.Repeat([]string{"nil"}, room)...), "ErrClosed"),
				Elapsed: 2 * time.Second,
				Dropped: []uint64{1},
				Stats:   broadcast.Stats{Published: uint64(room + 2), Dropped: 1},
			},
		},
	}
}

// TestRegressionParkedWatcherRetained: a watcher whose All() reader was parked
// (caught up, waiting for a value) stays on the broadcaster's parked list
// until the next Publish wakes it. After Stop it is unregistered but still
// referenced until then; after Shutdown there is no next Publish, so every
// such watcher, with its private queue's buffer (deque.pop never shrinks
// it), lives as long as the broadcaster. Stop and Shutdown should take the
// watcher off the parked list. (The soak's heap check sees this: 0.6 MiB
// more after the long form, 115 watchers alive at its Shutdown.)
func TestRegressionParkedWatcherRetained(t *testing.T) {
	for _, how := range []string{"Stop", "Shutdown"} {
		t.Run(how, func(t *testing.T) {
			var collected atomic.Bool
			var b *broadcast.Broadcaster[int]
			synctest.Test(t, func(t *testing.T) {
				b = broadcast.New[int]()
				func() {
					w, err := b.Watch()
					if err != nil {
						t.Fatal(err)
					}
					done := make(chan struct{})
					go func() {
						defer close(done)
						for range w.All() {
						}
					}()
					synctest.Wait() // the reader is parked
					if how == "Stop" {
						w.Stop()
					} else {
						pendingShutdown(t, b)
					}
					<-done
					runtime.AddCleanup(w, func(c *atomic.Bool) { c.Store(true) }, &collected)
				}()
			})
			for i := 0; i < 100 && !collected.Load(); i++ {
				runtime.GC()
				time.Sleep(10 * time.Millisecond)
			}
			if !collected.Load() {
				t.Errorf("after %s, the watcher (unreachable for the caller) is still referenced by its broadcaster", how)
			}
			runtime.KeepAlive(b)
		})
	}
}

// TestHostileRead: C() and All() mixed, broken out of, and called again.
func TestHostileRead(t *testing.T) { runHostile(t, hostileReadCases()) }

// TestHostileReentrant: calls into the broadcaster from inside a reading
// loop, on both read paths.
func TestHostileReentrant(t *testing.T) {
	runHostile(t, append(hostileReentrantCases("All"), hostileReentrantCases("C")...))
}
