package broadcast_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

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

// TestHistoryOptionMisuse: WithHistory given to a Watch method, or n < 0,
// panics with a "broadcast:" message.
func TestHistoryOptionMisuse(t *testing.T) {
	b := newB(t)
	for name, f := range map[string]func(){
		"WithHistory(-1)":           func() { broadcast.WithHistory(-1) },
		"Watch(WithHistory(1))":     func() { b.Watch(broadcast.WithHistory(1)) },
		"WatchFrom(WithHistory(1))": func() { b.WatchFrom(0, broadcast.WithHistory(1)) },
	} {
		msg, panicked := testutil.PanicMessage(f)
		if !panicked || !strings.HasPrefix(msg, "broadcast:") {
			t.Errorf("%s: panicked %v with %q, want a \"broadcast:\" panic", name, panicked, msg)
		}
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
