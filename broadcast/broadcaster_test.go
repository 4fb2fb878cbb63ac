package broadcast_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// --- Guarantee 1 ---------------------------------------------------------

// TestRegistrationBarrier covers guarantee 1 with a publisher running while
// Watch is called: no value whose Publish returned before Watch was called
// arrives, every value whose Publish started after Watch returned arrives, and
// (the barrier is linearizable) what arrives is one gap-free run up to the
// last value. Values in flight during Watch are not asserted either way.
func TestRegistrationBarrier(t *testing.T) {
	const (
		warmup   = 100  // values published before Watch is attempted
		maxAhead = 1000 // how far the publisher may run ahead of Watch
		tail     = 200  // values published after the publisher saw Watch return
	)
	for _, pc := range policyCases {
		for _, rp := range readPaths {
			t.Run(pc.name+"/"+rp.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					qlen := 4
					if pc.name == "Drop" || pc.name == "DropOldest" {
						// Large enough never to fill: this test is about the barrier.
						qlen = maxAhead + tail + 10
					}
					b := newB(t)
					var started, finished atomic.Int64
					started.Store(-1)
					finished.Store(-1)
					ready := make(chan struct{})
					watched := make(chan struct{})
					pubErr := make(chan error, 1)
					go func() {
						last := -1
						for i := 0; ; i++ {
							if i == warmup+maxAhead {
								<-watched
							}
							started.Store(int64(i))
							if err := b.Publish(i); err != nil {
								pubErr <- err
								return
							}
							finished.Store(int64(i))
							if i == warmup {
								close(ready)
							}
							if last < 0 {
								select {
								case <-watched:
									last = i + tail
								default:
								}
							}
							if last >= 0 && i >= last {
								pubErr <- nil
								return
							}
						}
					}()

					<-ready
					before := int(finished.Load()) // Publish of 0..before returned before Watch was called
					w := watch(t, b, with(pc.p, qlen)...)
					after := int(started.Load()) // Publish of after+1.. started after Watch returned
					close(watched)
					got := reader(w, rp, 0)
					if err := <-pubErr; err != nil {
						t.Fatalf("Publish: %v", err)
					}
					final := int(finished.Load())
					shutdown(t, b)
					vs := <-got

					if len(vs) == 0 {
						t.Fatalf("watcher received nothing; want at least %d..%d", after+1, final)
					}
					if slices.Contains(vs, 0) {
						// 0 was published first, long before Watch: it is
						// also what a ring slot never written holds
						// (TestRegressionWatchDuringIdlePublishes).
						t.Fatalf("the watcher received 0, published long before Watch (received %v...)", vs[:min(len(vs), 5)])
					}
					if vs[0] <= before {
						t.Errorf("watcher received %d, published before Watch was called (last such value %d)", vs[0], before)
					}
					if vs[0] > after+1 {
						t.Errorf("watcher's first value is %d; want every value from %d on (published after Watch returned)", vs[0], after+1)
					}
					if d := diff(testutil.Seq(vs[0], final+1), vs); d != "" {
						t.Errorf("stream is not every value from its first to the last published (-want +got):\n%s", d)
					}
					checkDropped(t, "w", w, 0)
				})
			})
		}
	}
}

// --- Guarantee 5 ---------------------------------------------------------

// TestWatchWithPrefix covers guarantee 5: the prefix comes first and is never
// dropped, the watcher holds the prefix plus its queue length, and after the
// prefix it behaves as Watch (barrier and policy included).
func TestWatchWithPrefix(t *testing.T) {
	prefix := []int{-1, -2, -3}
	cases := []struct {
		name    string
		p       broadcast.Policy
		prefix  []int
		want    []int
		dropped uint64
		wait    time.Duration
	}{
		{"Drop", broadcast.Drop, prefix, []int{-1, -2, -3, 1, 2}, 3, 0},
		{"DropOldest", broadcast.DropOldest, prefix, []int{-1, -2, -3, 4, 5}, 3, 0},
		{"BlockFor", broadcast.BlockFor(time.Second), prefix, []int{-1, -2, -3, 1, 2}, 3, 3 * time.Second},
		{"Drop/nil prefix", broadcast.Drop, nil, []int{1, 2}, 3, 0},
		{"DropOldest/empty prefix", broadcast.DropOldest, []int{}, []int{4, 5}, 3, 0},
		{"Drop/long prefix", broadcast.Drop, testutil.Seq(100, 110), append(testutil.Seq(100, 110), 1, 2), 3, 0},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			t.Run(tc.name+"/"+rp.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newB(t)
					publish(t, b, 0) // before the watcher: not part of its stream
					w, err := b.WatchWithPrefix(tc.prefix, with(tc.p, 2)...)
					if err != nil {
						t.Fatalf("WatchWithPrefix: %v", err)
					}
					start := time.Now()
					publish(t, b, 1, 2, 3, 4, 5)
					if got := time.Since(start); got != tc.wait {
						t.Errorf("publishing took %v, want %v", got, tc.wait)
					}
					checkDropped(t, "w", w, tc.dropped)
					shutdown(t, b)
					if d := diff(tc.want, rp.take(t, w, -1)); d != "" {
						t.Errorf("stream (-want +got):\n%s", d)
					}
					checkStats(t, b, broadcast.Stats{Published: 6, Dropped: tc.dropped, Watchers: 0})
				})
			})
		}
	}

	// Block: the prefix does not count against the queue length, on both
	// read paths (guarantees 3 and 5).
	for _, rp := range readPaths {
		t.Run("Block/"+rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				w, err := b.WatchWithPrefix(prefix, with(broadcast.Block, 2)...)
				if err != nil {
					t.Fatalf("WatchWithPrefix: %v", err)
				}
				publishNoWait(t, b, 1, 2)
				pub := async(func() error { return b.Publish(3) })
				synctest.Wait()
				if _, ok := returned(pub); ok {
					t.Fatal("Publish(3) returned with prefix + queue length held; want it to wait")
				}
				if d := diff([]int{-1, -2, -3, 1}, rp.take(t, w, 4)); d != "" {
					t.Fatalf("read (-want +got):\n%s", d)
				}
				if err := <-pub; err != nil {
					t.Fatalf("Publish(3): %v", err)
				}
				var rest []int
				if rp.name == "C" {
					rest = shutdownThenRead(t, b, w, rp)
				} else {
					shutdown(t, b)
					rest = rp.take(t, w, -1)
				}
				if d := diff([]int{2, 3}, rest); d != "" {
					t.Errorf("after Shutdown (-want +got):\n%s", d)
				}
				checkDropped(t, "w", w, 0)
			})
		})
	}

	t.Run("prefix first with a live reader", func(t *testing.T) {
		b := newB(t)
		w, err := b.WatchWithPrefix(testutil.Seq(-50, 0), with(broadcast.Block, 1)...)
		if err != nil {
			t.Fatalf("WatchWithPrefix: %v", err)
		}
		got := reader(w, readPaths[0], 0)
		publish(t, b, testutil.Seq(0, 100)...)
		shutdown(t, b)
		if d := diff(testutil.Seq(-50, 100), <-got); d != "" {
			t.Errorf("stream (-want +got):\n%s", d)
		}
	})
}

// --- Documented semantics beyond the numbered guarantees ----------------

// TestStats checks Published, Dropped (stopped watchers included) and
// Watchers through a watcher's whole life.
func TestStats(t *testing.T) {
	b := newB(t)
	checkStats(t, b, broadcast.Stats{})
	publish(t, b, 0) // accepted with no watcher
	checkStats(t, b, broadcast.Stats{Published: 1})
	d := watch(t, b, with(broadcast.Drop, 2)...)
	o := watch(t, b, with(broadcast.DropOldest, 2)...)
	checkStats(t, b, broadcast.Stats{Published: 1, Watchers: 2})
	publish(t, b, 1, 2, 3, 4, 5)
	checkStats(t, b, broadcast.Stats{Published: 6, Dropped: 6, Watchers: 2})
	d.Stop()
	checkStats(t, b, broadcast.Stats{Published: 6, Dropped: 6, Watchers: 1})
	checkDropped(t, "d", d, 3)
	publish(t, b, 6)
	if ok, err := b.TryPublish(7); !ok || err != nil {
		t.Fatalf("TryPublish = (%v, %v), want (true, nil)", ok, err)
	}
	checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 8, Watchers: 1})
	checkDropped(t, "d", d, 3)
	checkDropped(t, "o", o, 5)
	done, cancel := context.WithCancel(context.Background())
	cancel()
	_ = b.PublishContext(done, 8)
	checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 8, Watchers: 1})
	shutdown(t, b)
	checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 8, Watchers: 0})
	if d := diff([]int{6, 7}, testutil.Drain(t, o.C(), guard)); d != "" {
		t.Errorf("DropOldest watcher (-want +got):\n%s", d)
	}
}

// TestWatchFrom: guarantee 9 on both read paths, under every policy. The
// history is kept with no watcher; WatchFrom replays from seq (or
// everything kept for 0), then goes on live; replayed values do not count
// against the queue length and are never dropped or evicted.
func TestWatchFrom(t *testing.T) {
	policies := append(policyCases[:len(policyCases):len(policyCases)], struct {
		name string
		p    broadcast.Policy
	}{"Evict", broadcast.Evict})
	cases := []struct {
		name   string
		from   uint64
		want   []int
		reason string
	}{
		{"from the oldest kept", 3, []int{3, 4, 5, 6, 7, 8}, "history 4 keeps 3..6 of 6"},
		{"from 0", 0, []int{3, 4, 5, 6, 7, 8}, "0 replays everything kept"},
		{"from the middle", 5, []int{5, 6, 7, 8}, "replay from 5"},
		{"from Published+1", 7, []int{7, 8}, "nothing to replay: live only"},
	}
	for _, pc := range policies {
		for _, rp := range readPaths {
			for _, tc := range cases {
				t.Run(pc.name+"/"+rp.name+"/"+tc.name, func(t *testing.T) {
					b := newB(t, broadcast.WithHistory(4))
					publish(t, b, 1, 2, 3, 4, 5, 6)
					// Queue length 2: the replay (up to 4 values) must not count.
					w, err := b.WatchFrom(tc.from, with(pc.p, 2)...)
					if err != nil {
						t.Fatalf("WatchFrom(%d): %v", tc.from, err)
					}
					publish(t, b, 7, 8)
					shutdown(t, b)
					if d := diff(tc.want, rp.take(t, w, -1)); d != "" {
						t.Errorf("%s: read (-want +got):\n%s", tc.reason, d)
					}
					checkDropped(t, "w", w, 0)
					if err := w.Err(); !errors.Is(err, broadcast.ErrClosed) {
						t.Errorf("Err() = %v, want ErrClosed (not evicted: the replay does not count)", err)
					}
				})
			}
		}
	}
}

// TestWatchFromNumbers: replayed values carry their own sequence numbers.
func TestWatchFromNumbers(t *testing.T) {
	b := newB(t, broadcast.WithHistory(3))
	publish(t, b, 10, 20, 30, 40)
	w, err := b.WatchFrom(3)
	if err != nil {
		t.Fatal(err)
	}
	publish(t, b, 50)
	shutdown(t, b)
	seqs, vs := numbered(t, w, -1)
	if d := diff([]uint64{3, 4, 5}, seqs); d != "" {
		t.Errorf("sequence numbers (-want +got):\n%s", d)
	}
	if d := diff([]int{30, 40, 50}, vs); d != "" {
		t.Errorf("values (-want +got):\n%s", d)
	}
}

// TestWatchFromOutOfRange: a seq older than the oldest kept value or beyond
// Published+1 returns an error wrapping ErrOutOfRange and registers nothing;
// without history only Published+1 (and 0) are in range.
func TestWatchFromOutOfRange(t *testing.T) {
	cases := []struct {
		name    string
		history int
		from    uint64
		ok      bool
	}{
		{"older than the oldest kept", 2, 2, false},
		{"the oldest kept", 2, 3, true},
		{"Published+1", 2, 5, true},
		{"beyond Published+1", 2, 6, false},
		{"no history, Published+1", 0, 5, true},
		{"no history, 0", 0, 0, true},
		{"no history, the last", 0, 4, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newB(t, broadcast.WithHistory(tc.history))
			publish(t, b, 1, 2, 3, 4)
			w, err := b.WatchFrom(tc.from)
			if tc.ok {
				if err != nil {
					t.Fatalf("WatchFrom(%d) = %v, want a watcher", tc.from, err)
				}
				w.Stop()
				return
			}
			if w != nil || !errors.Is(err, broadcast.ErrOutOfRange) {
				t.Errorf("WatchFrom(%d) = (%v, %v), want (nil, ErrOutOfRange)", tc.from, w, err)
			}
			checkStats(t, b, broadcast.Stats{Published: 4})
		})
	}
}

// TestWatchFromAtomic: WatchFrom while publishers run: every watcher sees
// consecutive sequence numbers from the one it asked for, nothing missed or
// repeated between the replay and the live values.
func TestWatchFromAtomic(t *testing.T) {
	const values, watchers = 3000, 20
	b := newB(t, broadcast.WithHistory(1000))
	var wg sync.WaitGroup
	wg.Go(func() {
		for v := 1; v <= values; v++ {
			if err := b.Publish(v); err != nil {
				t.Error(err)
				return
			}
		}
	})
	var ws []*broadcast.Watcher[int]
	for range watchers {
		// Kept unless the publisher runs 500 values ahead before WatchFrom
		// (half of Published, as before, was out of range for every
		// watcher once the publisher had passed 2000 before the first
		// WatchFrom: it failed now and then at GOMAXPROCS=8 under -race).
		from := b.Stats().Published
		from = max(from, 501) - 500
		w, err := b.WatchFrom(from, broadcast.WithPolicy(broadcast.Block))
		if errors.Is(err, broadcast.ErrOutOfRange) {
			continue // the publisher overtook it; nothing registered
		}
		if err != nil {
			t.Fatal(err)
		}
		ws = append(ws, w)
		wg.Go(func() {
			next := from
			for s, v := range w.Seq() {
				if s != next || v != int(s) {
					t.Errorf("watcher from %d: got number %d value %d, want %d", from, s, v, next)
					return
				}
				if next++; s == values {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, w := range ws {
		w.Stop()
	}
	if len(ws) == 0 {
		t.Fatal("no WatchFrom succeeded")
	}
}

// TestEvictAndResume: guarantee 10 with history: an evicted reader resumes
// with WatchFrom(last+1) and misses nothing still kept.
func TestEvictAndResume(t *testing.T) {
	b := newB(t, broadcast.WithHistory(100))
	w := watch(t, b, with(broadcast.Evict, 3)...)
	publish(t, b, testutil.Seq(1, 11)...) // 4 evicts w
	var got []int
	var last uint64
	for s, v := range w.Seq() {
		got, last = append(got, v), s
	}
	if !errors.Is(w.Err(), broadcast.ErrEvicted) {
		t.Fatalf("Err() = %v, want ErrEvicted", w.Err())
	}
	w2, err := b.WatchFrom(last+1, with(broadcast.Evict, 3)...)
	if err != nil {
		t.Fatalf("WatchFrom(%d): %v", last+1, err)
	}
	shutdown(t, b)
	for v := range w2.All() {
		got = append(got, v)
	}
	if d := diff(testutil.Seq(1, 11), got); d != "" {
		t.Errorf("evicted, then resumed (-want +got):\n%s", d)
	}
}

// TestWatchFromWithoutHistory: without WithHistory, WatchFrom of anything
// but the next value says plainly that nothing is kept (guarantee 9).
func TestWatchFromWithoutHistory(t *testing.T) {
	b := broadcast.New[int]()
	for i := range 5 {
		b.Publish(i)
	}
	_, err := b.WatchFrom(1)
	if !errors.Is(err, broadcast.ErrOutOfRange) || !strings.Contains(err.Error(), "keeps no history") {
		t.Errorf("WatchFrom(1) without history: %v; want broadcast.ErrOutOfRange saying there is no history", err)
	}
	w, err := b.WatchFrom(6)
	if err != nil {
		t.Fatalf("WatchFrom(Published+1) without history: %v", err)
	}
	w.Stop()
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func hostilePrefixCases() []hostileCase {
	const big = 100_000
	bigPrefix := func() []int {
		p := make([]int, big)
		for i := range p {
			p[i] = -big + i
		}
		return p
	}
	// summary describes vs as "<n> prefix values in order" plus the rest.
	summary := func(vs []int) []string {
		n := 0
		for n < len(vs) && vs[n] == -big+n {
			n++
		}
		return []string{fmt.Sprintf("%d prefix values in order", n), fmt.Sprint(vs[n:])}
	}
	var cases []hostileCase
	for _, prefix := range []struct {
		name string
		p    []int
	}{{"nil", nil}, {"empty", []int{}}} {
		cases = append(cases, hostileCase{
			name: "WatchWithPrefix(" + prefix.name + " prefix) is Watch",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				w, err := b.WatchWithPrefix(prefix.p, broadcast.WithQueueLength(1))
				r.Errs = append(r.Errs, hostileErr(err))
				hPub(t, b, 1, 2)
				hShutdown(t, b)
				r.Values = hAll(t, w)
				r.Dropped = []uint64{w.Dropped()}
			},
			want: hostileResult{Errs: []string{"nil"}, Values: []int{1}, Dropped: []uint64{1}},
		})
	}
	for _, pc := range []struct {
		name  string
		p     broadcast.Policy
		want  string
		wantC string // through C(): while its prefix is unread, DropOldest drops the new value (Watcher.C)
	}{{"Drop", broadcast.Drop, "[1]", "[1]"}, {"DropOldest", broadcast.DropOldest, "[3]", "[1]"}, {"Block", broadcast.Block, "[1]", "[1]"}} {
		for _, path := range []string{"All", "C"} {
			cases = append(cases, hostileCase{
				// The prefix is never dropped, however long: the watcher
				// holds it plus its queue length.
				name: fmt.Sprintf("WatchWithPrefix(%d values), %s queue 1, read through %s", big, pc.name, path),
				run: func(t *testing.T, r *hostileResult) {
					b := hNew(t)
					w, err := b.WatchWithPrefix(bigPrefix(), broadcast.WithPolicy(pc.p), broadcast.WithQueueLength(1))
					r.Errs = append(r.Errs, hostileErr(err))
					if path == "C" {
						w.C()
					}
					for v := 1; v <= 3; v++ {
						ok, err := b.TryPublish(v) // Block: only the first fits
						r.Ok = append(r.Ok, ok)
						r.Errs = append(r.Errs, hostileErr(err))
					}
					hShutdown(t, b) // nothing reads meanwhile (guarantee 6)
					var vs []int
					if path == "C" {
						vs = hC(t, w)
					} else {
						vs = hAll(t, w)
					}
					r.Strings = summary(vs)
					r.Dropped = []uint64{w.Dropped()}
				},
				want: hostileResult{
					Errs:    []string{"nil", "nil", "nil", "nil"},
					Ok:      []bool{true, pc.p != broadcast.Block, pc.p != broadcast.Block},
					Strings: []string{fmt.Sprintf("%d prefix values in order", big), map[string]string{"All": pc.want, "C": pc.wantC}[path]},
					Dropped: []uint64{map[bool]uint64{true: 0, false: 2}[pc.p == broadcast.Block]},
				},
			})
		}
	}
	cases = append(cases,
		hostileCase{
			name: "WatchWithPrefix copies the prefix",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				prefix := []int{-2, -1}
				w, err := b.WatchWithPrefix(prefix)
				r.Errs = append(r.Errs, hostileErr(err))
				prefix[0], prefix[1] = 100, 200
				hPub(t, b, 1)
				hShutdown(t, b)
				r.Values = hAll(t, w)
			},
			want: hostileResult{Errs: []string{"nil"}, Values: []int{-2, -1, 1}},
		},
		hostileCase{
			name: "WatchWithPrefix after Shutdown",
			run: func(t *testing.T, r *hostileResult) {
				b := hNew(t)
				hShutdown(t, b)
				w, err := b.WatchWithPrefix([]int{1})
				r.Errs = append(r.Errs, hostileErr(err))
				r.Strings = append(r.Strings, fmt.Sprint(w == nil))
			},
			want: hostileResult{Errs: []string{"ErrClosed"}, Strings: []string{"true"}},
		},
	)
	return cases
}

// TestZeroValues: a zero Broadcaster works as New() with no options (it
// used to count a Publish and then panic on Watch with a nil channel); a
// zero Watcher, which only Watch can make usable, panics on every method
// with the same "broadcast:" message.
func TestZeroValues(t *testing.T) {
	t.Run("Broadcaster works", func(t *testing.T) {
		var b broadcast.Broadcaster[int]
		if err := b.Publish(1); err != nil {
			t.Fatalf("Publish before any Watch: %v", err)
		}
		w, err := b.Watch(broadcast.WithQueueLength(2))
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		for v := range 4 {
			if err := b.Publish(10 + v); err != nil {
				t.Fatalf("Publish: %v", err)
			}
		}
		if got, want := b.Stats(), (broadcast.Stats{Published: 5, Dropped: 2, Watchers: 1}); got != want {
			t.Errorf("Stats() = %+v, want %+v (default policy Drop)", got, want)
		}
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if d := diff([]int{10, 11}, testutil.CollectSeq(t, w.All(), -1, guard)); d != "" {
			t.Errorf("values (-want +got):\n%s", d)
		}
		if err := b.Publish(3); !errors.Is(err, broadcast.ErrClosed) {
			t.Errorf("Publish after Shutdown = %v, want ErrClosed", err)
		}
	})
	// What a zero Broadcaster makes on first use (the channel that ends a
	// wait at Shutdown's deadline, the set of evicted watchers whose
	// context may still stop them) works as New's.
	t.Run("Broadcaster waits and evicts", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var b broadcast.Broadcaster[int]
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			evicted := watch(t, &b, broadcast.WithPolicy(broadcast.Evict), broadcast.WithQueueLength(1), broadcast.WithContext(ctx))
			full := watch(t, &b, with(broadcast.Block, 1)...)
			publish(t, &b, 1)
			p2 := async(func() error { return b.Publish(2) }) // waits for full
			synctest.Wait()
			p3 := async(func() error { return b.Publish(3) }) // waits for the turn
			synctest.Wait()
			sctx, scancel := context.WithTimeout(context.Background(), time.Second)
			defer scancel()
			sd := async(func() error { return b.Shutdown(sctx) })
			synctest.Wait()
			// From Shutdown's start: Publish(3) gives up waiting for the
			// turn; Publish(2) waits until the deadline.
			if err, ok := returned(p3); !ok || !errors.Is(err, broadcast.ErrClosed) {
				t.Errorf("Publish(3) once Shutdown began = %v, returned %v; want ErrClosed, true", err, ok)
			}
			if _, ok := returned(p2); ok {
				t.Error("Publish(2) returned before Shutdown's deadline")
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if err, ok := returned(sd); !ok || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Shutdown = %v, returned %v; want DeadlineExceeded, true", err, ok)
			}
			if err, ok := returned(p2); !ok || !errors.Is(err, broadcast.ErrClosed) {
				t.Errorf("Publish(2) = %v, returned %v; want ErrClosed, true", err, ok)
			}
			// Publish(2), given up, still committed: it evicted evicted.
			if err := evicted.Err(); !errors.Is(err, broadcast.ErrEvicted) {
				t.Errorf("evicted.Err() = %v, want ErrEvicted", err)
			}
			if d := diff([]int{1}, slices.Collect(full.All())); d != "" {
				t.Errorf("full watcher (-want +got):\n%s", d)
			}
			if d := diff([]int{1}, slices.Collect(evicted.All())); d != "" {
				t.Errorf("evicted watcher (-want +got):\n%s", d)
			}
			checkStats(t, &b, broadcast.Stats{Published: 2, Dropped: 2, Watchers: 0})
		})
	})
	t.Run("Watcher panics", func(t *testing.T) {
		var w broadcast.Watcher[int]
		for name, f := range map[string]func(){
			"Dropped": func() { w.Dropped() },
			"C":       func() { w.C() },
			"All": func() {
				for range w.All() {
					break
				}
			},
			"Stop": func() { w.Stop() },
		} {
			msg, panicked := testutil.PanicMessage(f)
			if want := "broadcast: a Watcher must come from Watch, WatchWithPrefix or WatchFrom"; !panicked || msg != want {
				t.Errorf("%s on a zero Watcher: panicked %v with %q, want a panic with %q", name, panicked, msg, want)
			}
		}
	})
}

// TestRegressionWatchDuringIdlePublishes: guarantee 1 with publishes running
// while Watch registers the broadcaster's first watcher. With no watcher,
// Publish only counts (a CAS on the tail word, nothing written to the
// ring) until Watch sets the watched bit. Watch reads the tail for the
// watcher's start before it sets that bit, and its live start after: a
// value published in between lies in the watcher's segment, exempt like a
// replayed one, but was never written to the ring, so the watcher yields
// whatever that slot holds: 0 here (a new ring), or a value of an earlier
// lap. Values are 1, 2, ...: a 0 is such a slot. TestRegistrationBarrier
// shows it too ("received 0, published before Watch was called"), about
// one run in two under -race -count=30.
func TestRegressionWatchDuringIdlePublishes(t *testing.T) {
	bad := 0
	for round := range 300 {
		b := broadcast.New[int]()
		stop := make(chan struct{})
		var pub sync.WaitGroup
		pub.Go(func() {
			for v := 1; ; v++ {
				select {
				case <-stop:
					return
				default:
				}
				if b.Publish(v) != nil {
					return
				}
			}
		})
		w, err := b.Watch()
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for v := range w.All() {
			if got = append(got, v); len(got) == 5 {
				break
			}
		}
		close(stop)
		pub.Wait()
		for i, v := range got {
			if v <= 0 || (i > 0 && v != got[i-1]+1) {
				bad++
				if bad <= 3 {
					t.Errorf("round %d: the first watcher read %v: %d was never published or breaks the order", round, got, v)
				}
				break
			}
		}
		w.Stop()
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if bad > 0 {
		t.Errorf("%d of 300 rounds read a slot never written", bad)
	}
}

// TestHostilePrefix: huge, empty and reused prefixes (guarantee 5).
func TestHostilePrefix(t *testing.T) { runHostile(t, hostilePrefixCases()) }
