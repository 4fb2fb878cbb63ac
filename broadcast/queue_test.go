package broadcast_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// --- Guarantee 3 ---------------------------------------------------------

// queueRead is how a never-reading watcher is finally read: whether C() is
// called as soon as it is registered (its channel is then the whole queue),
// and which path reads it after Shutdown.
type queueRead struct {
	name  string
	early bool // C() called right after Watch, before anything is published
	rp    readPath
}

var queueReads = []queueRead{
	{"All", false, readPaths[1]},              // C() never called
	{"C", true, readPaths[0]},                 // C() first, read through it
	{"C-after-Shutdown", false, readPaths[0]}, // C() first called to read, after Shutdown
	{"C-called-then-All", true, readPaths[1]}, // C() first, read through All
}

// TestWatcherQueue covers guarantee 3 for a watcher nobody reads until
// Shutdown, per policy, on every read path: it holds exactly its queue
// length (the first values under Drop and BlockFor, the last under
// DropOldest), C()'s channel is that queue and holds the same values as
// All() does, Len() counts exactly what it holds, and every value it lost is
// counted (received + Dropped() == published to it). With guarantee 6 on
// top: Shutdown, with nothing reading while it runs, returns nil at once,
// every held value stays readable after it, then C() is closed and All()
// ends.
//
// It merges what TestNeverReadingWatcher, TestNeverReadingWatcherHoldsQueueLength
// (internal), TestQueueReadableAfterShutdown, TestShutdown's "queued values
// readable" and the hostile "C() watcher holding 200 values" case checked
// one by one; each case says why it is here.
func TestWatcherQueue(t *testing.T) {
	cases := []struct {
		name    string
		policy  broadcast.Policy
		qlen    int
		n       int   // values published after Watch: 1..n (-1 is published before it)
		want    []int // what the watcher holds, in order
		dropped uint64
		// publishedTo is how many values were published to it, if not n
		// (Evict: none after the one that evicted it).
		publishedTo int
		// wait is how long each Publish that finds the watcher full takes.
		wait time.Duration
		// watchers is Stats().Watchers before Shutdown.
		watchers int
		reason   string
	}{
		{
			name: "Drop, queue 3, 10 published", policy: broadcast.Drop, qlen: 3, n: 10,
			want: []int{1, 2, 3}, dropped: 7, watchers: 1,
			reason: "Drop keeps the first values, exactly the queue length, and counts the rest; the value published before Watch never arrives (guarantee 1)",
		},
		{
			name: "DropOldest, queue 3, 10 published", policy: broadcast.DropOldest, qlen: 3, n: 10,
			want: []int{8, 9, 10}, dropped: 7, watchers: 1,
			reason: "DropOldest keeps the last values; issue 27: through C() it kept the oldest value the forwarder held (1, then 21..28 of 30)",
		},
		{
			name: "BlockFor(1s), queue 3, 10 published", policy: broadcast.BlockFor(time.Second), qlen: 3, n: 10,
			want: []int{1, 2, 3}, dropped: 7, wait: time.Second, watchers: 1,
			reason: "BlockFor waits its d for each value that finds the watcher full, then drops it as Drop",
		},
		{
			name: "Evict, queue 3, 10 published", policy: broadcast.Evict, qlen: 3, n: 10,
			want: []int{1, 2, 3}, dropped: 1, publishedTo: 4, watchers: 0,
			reason: "an evicted watcher keeps what it held, readable after Shutdown (guarantee 10); the value that found it full is counted, later ones are not for it",
		},
		{
			name: "Block, queue 100, 100 published", policy: broadcast.Block, qlen: 100, n: 100,
			want: testutil.Seq(1, 101), watchers: 1,
			reason: "issue 27: through C() only 63 of 100 survived a Shutdown nobody read through, 37 counted dropped",
		},
		{
			name: "Drop, queue 200, 200 published", policy: broadcast.Drop, qlen: 200, n: 200,
			want: testutil.Seq(1, 201), watchers: 1,
			reason: "a full Drop watcher, the default policy, loses nothing it holds; issue 27: through C() it kept ChannelBuffer-1 values and dropped the rest at Shutdown's deadline",
		},
		{
			name: "Block, queue 1, 1 published", policy: broadcast.Block, qlen: 1, n: 1,
			want: []int{1}, watchers: 1,
			reason: "issue 27: with queue length 1 C()'s channel had no buffer and nothing survived Shutdown",
		},
		{
			name: "Drop, queue 1500, 5000 published", policy: broadcast.Drop, qlen: 1500, n: 5000,
			want: testutil.Seq(1, 1501), dropped: 3500, watchers: 1,
			reason: "a watcher that falls more than a lap behind the shared ring still holds its first 1500",
		},
		{
			name: "DropOldest, queue 1500, 5000 published", policy: broadcast.DropOldest, qlen: 1500, n: 5000,
			want: testutil.Seq(3501, 5001), dropped: 3500, watchers: 1,
			reason: "a watcher lapped by the shared ring still holds exactly the last 1500",
		},
		{
			name: "Drop, queue 6, 5 published", policy: broadcast.Drop, qlen: 6, n: 5,
			want: testutil.Seq(1, 6), watchers: 1,
			reason: "a watcher with room holds everything; guarantee 6: all of it readable after Shutdown",
		},
		{
			name: "DropOldest, queue 6, 5 published", policy: broadcast.DropOldest, qlen: 6, n: 5,
			want: testutil.Seq(1, 6), watchers: 1,
			reason: "DropOldest discards nothing while there is room",
		},
		{
			name: "Block, queue 6, 5 published", policy: broadcast.Block, qlen: 6, n: 5,
			want: testutil.Seq(1, 6), watchers: 1,
			reason: "a Block watcher with room never makes Shutdown wait",
		},
		{
			name: "BlockFor(1h), queue 6, 5 published", policy: broadcast.BlockFor(time.Hour), qlen: 6, n: 5,
			want: testutil.Seq(1, 6), watchers: 1,
			reason: "a BlockFor watcher with room never makes a Publish or Shutdown wait",
		},
	}
	for _, tc := range cases {
		for _, rd := range queueReads {
			t.Run(tc.name+"/"+rd.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					publishedTo := tc.n
					if tc.publishedTo != 0 {
						publishedTo = tc.publishedTo
					}
					b := newB(t)
					publish(t, b, -1) // before Watch: never seen
					w := watch(t, b, with(tc.policy, tc.qlen)...)
					var c <-chan int
					if rd.early {
						c = w.C()
						if cap(c) != tc.qlen {
							t.Fatalf("cap(C()) = %d, want %d, the queue length: %s", cap(c), tc.qlen, tc.reason)
						}
					}
					start := time.Now()
					for v := 1; v <= tc.n; v++ {
						publish(t, b, v)
					}
					if got, want := time.Since(start), time.Duration(tc.dropped)*tc.wait; got != want {
						t.Errorf("publishing took %v, want %v: %s", got, want, tc.reason)
					}
					checkDropped(t, "w", w, tc.dropped)
					checkStats(t, b, broadcast.Stats{Published: uint64(tc.n + 1), Dropped: tc.dropped, Watchers: tc.watchers})
					if got := w.Len(); got != len(tc.want) {
						t.Errorf("Len() before Shutdown = %d, want %d: %s", got, len(tc.want), tc.reason)
					}

					// Nothing reads while Shutdown runs (guarantee 6): it
					// returns nil at once, well within its deadline.
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					start = time.Now()
					if err := b.Shutdown(ctx); err != nil {
						t.Errorf("Shutdown with nobody reading = %v, want nil: %s", err, tc.reason)
					}
					if got := time.Since(start); got != 0 {
						t.Errorf("Shutdown took %v, want no wait: it waits for no reader", got)
					}
					if got := w.Len(); got != len(tc.want) {
						t.Errorf("Len() after Shutdown = %d, want %d: %s", got, len(tc.want), tc.reason)
					}
					checkStats(t, b, broadcast.Stats{Published: uint64(tc.n + 1), Dropped: tc.dropped})

					got := rd.rp.take(t, w, -1) // ends only if the watcher ends after its values
					if d := diff(tc.want, got); d != "" {
						t.Errorf("values read after Shutdown (-want +got):\n%s%s", d, tc.reason)
					}
					checkDropped(t, "w", w, tc.dropped)
					if r := uint64(len(got)) + w.Dropped(); r != uint64(publishedTo) {
						t.Errorf("received %d + Dropped() %d = %d, want %d published to it", len(got), w.Dropped(), r, publishedTo)
					}
					if got := w.Len(); got != 0 {
						t.Errorf("Len() once read = %d, want 0", got)
					}
					synctest.Wait()
					if closed, extra := isClosedNow(w.C()); !closed || extra != nil {
						t.Errorf("C() once read: closed %v, extra %v; want closed, nothing more", closed, extra)
					}
					if rd.early && w.C() != c {
						t.Error("C() returned a different channel after Shutdown")
					}
					if again := rd.rp.take(t, w, -1); again != nil {
						t.Errorf("a second read after Shutdown yielded %v", again)
					}
				})
			})
		}
	}

	// Watchers registered at different times, each with its own policy and
	// queue length, each hold their own queue of the same stream.
	t.Run("several watchers", func(t *testing.T) {
		b := newB(t)
		a := watch(t, b, with(broadcast.Drop, 2)...)
		o := watch(t, b, with(broadcast.DropOldest, 4)...)
		publish(t, b, 1, 2, 3)
		l := watch(t, b, with(broadcast.Drop, 1)...)
		publish(t, b, 4, 5, 6, 7, 8)
		checkDropped(t, "a", a, 6)
		checkDropped(t, "o", o, 4)
		checkDropped(t, "l", l, 4)
		checkStats(t, b, broadcast.Stats{Published: 8, Dropped: 14, Watchers: 3})
		shutdown(t, b)
		for _, c := range []struct {
			name string
			w    *broadcast.Watcher[int]
			want []int
		}{{"a", a, []int{1, 2}}, {"o", o, []int{5, 6, 7, 8}}, {"l", l, []int{4}}} {
			if d := diff(c.want, testutil.Drain(t, c.w.C(), guard)); d != "" {
				t.Errorf("%s held (-want +got):\n%s", c.name, d)
			}
		}
	})
}

// TestLossyAfterReaderFreesRoom covers guarantee 3 across reads: a value read
// frees exactly one place, Drop keeps the oldest held values, DropOldest the
// newest, BlockFor drops like Drop after waiting.
// The same through C(), called at the first read with the queue full
// (restC and droppedC, if set, would say where it differs: nowhere now).
func TestLossyAfterReaderFreesRoom(t *testing.T) {
	type step struct {
		pub  []int         // values to publish, or
		read []int         // values a read must return
		wait time.Duration // how long the publishing takes
	}
	cases := []struct {
		name     string
		p        broadcast.Policy
		steps    []step
		rest     []int // what remains after Shutdown
		dropped  uint64
		restC    []int // through C(), if not rest
		droppedC uint64
	}{
		{"Drop/read one", broadcast.Drop, []step{{pub: []int{1, 2, 3}}, {read: []int{1}}, {pub: []int{4}}}, []int{2, 4}, 1, nil, 0},
		{"Drop/read all", broadcast.Drop, []step{{pub: []int{1, 2, 3}}, {read: []int{1, 2}}, {pub: []int{4, 5, 6}}}, []int{4, 5}, 2, nil, 0},
		{"DropOldest/read all", broadcast.DropOldest, []step{{pub: []int{1, 2, 3}}, {read: []int{2, 3}}, {pub: []int{4}}}, []int{4}, 1, nil, 0},
		{"DropOldest/read one", broadcast.DropOldest, []step{{pub: []int{1, 2, 3}}, {read: []int{2}}, {pub: []int{4, 5}}}, []int{4, 5}, 2, nil, 0},
		{"BlockFor/read one", broadcast.BlockFor(time.Second), []step{{pub: []int{1, 2, 3}, wait: time.Second}, {read: []int{1}}, {pub: []int{4}}}, []int{2, 4}, 1, nil, 0},
		{"Block/read one", broadcast.Block, []step{{pub: []int{1, 2}}, {read: []int{1}}, {pub: []int{3}}}, []int{2, 3}, 0, nil, 0},
	}
	for _, tc := range cases {
		for _, rp := range readPaths {
			t.Run(tc.name+"/"+rp.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					viaC := rp.name == "C"
					rest, dropped := tc.rest, tc.dropped
					if viaC && tc.restC != nil {
						rest, dropped = tc.restC, tc.droppedC
					}
					b := newB(t)
					w := watch(t, b, with(tc.p, 2)...)
					for _, s := range tc.steps {
						if s.read != nil {
							if d := diff(s.read, rp.take(t, w, len(s.read))); d != "" {
								t.Fatalf("read (-want +got):\n%s", d)
							}
							continue
						}
						start := time.Now()
						for _, v := range s.pub {
							if tc.p == broadcast.Block {
								publishNoWait(t, b, v)
							} else {
								publish(t, b, v)
							}
							synctest.Wait()
						}
						if got := time.Since(start); got != s.wait {
							t.Errorf("publishing %v took %v, want %v", s.pub, got, s.wait)
						}
					}
					checkDropped(t, "w", w, dropped)
					if l := w.Len(); l != len(rest) {
						t.Errorf("Len() = %d, want %d", l, len(rest))
					}
					got := shutdownThenRead(t, b, w, rp)
					if d := diff(rest, got); d != "" {
						t.Errorf("after Shutdown (-want +got):\n%s", d)
					}
					checkDropped(t, "w", w, dropped)
				})
			})
		}
	}
}
