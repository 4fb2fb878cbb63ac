package broadcast_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

type resumeSoakConfig struct {
	name       string
	publishers int
	values     int // in total
	history    int
	resumers   int // Evict readers that resume after each eviction
	queue      int // their queue length
}

var (
	resumeSoakShort = resumeSoakConfig{name: "short", publishers: 2, values: 20_000, history: 2_000, resumers: 6, queue: 16}
	resumeSoakLong  = resumeSoakConfig{name: "long", publishers: 4, values: 2_000_000, history: 5_000, resumers: 20, queue: 64}
)

// TestSoakResume: publishers run flat out on a broadcaster with a history;
// readers with the Evict policy and a small queue, slowed down now and then,
// are evicted, and resume with WatchFrom(last seq + 1) (or, if that is no
// longer kept, WatchFrom(0): everything still kept). Checked against a
// lossless reference reader: every reader sees every sequence number at
// most once, in increasing order, each with the value the reference saw;
// a gap only where it resumed after values were no longer kept; and the
// last value. HERALD_SOAK=1 runs the long form.
func TestSoakResume(t *testing.T) {
	cfg := resumeSoakShort
	if os.Getenv("HERALD_SOAK") == "1" {
		cfg = resumeSoakLong
	}
	b := broadcast.New[int](broadcast.WithHistory(cfg.history))
	total := uint64(cfg.values / cfg.publishers * cfg.publishers)
	ref := make([]int, total+1) // ref[seq] = value
	refW, err := b.Watch(broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for s, v := range refW.Seq() {
			ref[s] = v
		}
	})

	type result struct {
		progress   atomic.Uint64 // last, for the main goroutine
		got        map[uint64]int
		last       uint64
		evictions  int
		fallbacks  int
		fallbackAt map[uint64]bool // first seq of a session that could not resume where it stopped
	}
	results := make([]*result, cfg.resumers)
	var bad atomic.Int32
	fail := func(format string, args ...any) {
		if bad.Add(1) <= 10 {
			t.Errorf(format, args...)
		}
	}
	for i := range cfg.resumers {
		r := &result{got: map[uint64]int{}, fallbackAt: map[uint64]bool{}}
		results[i] = r
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		wg.Go(func() {
			opts := []broadcast.Option{broadcast.WithPolicy(broadcast.Evict), broadcast.WithQueueLength(cfg.queue)}
			w, err := b.WatchFrom(0, opts...)
			fellBack := false
			for err == nil {
				first := true
				for s, v := range w.Seq() {
					switch {
					case s <= r.last && r.last != 0:
						fail("reader %d: sequence number %d after %d: repeated or out of order", i, s, r.last)
					case r.last != 0 && s != r.last+1 && !(first && fellBack):
						fail("reader %d: gap %d..%d inside a session", i, r.last+1, s-1)
					}
					if first && fellBack {
						r.fallbackAt[s] = true
					}
					first = false
					r.got[s], r.last = v, s
					r.progress.Store(s)
					if rng.IntN(500) == 0 {
						time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond) // fall behind
					}
				}
				if errors.Is(w.Err(), broadcast.ErrClosed) {
					return
				}
				if !errors.Is(w.Err(), broadcast.ErrEvicted) {
					fail("reader %d: ended with Err() = %v", i, w.Err())
					return
				}
				r.evictions++
				w, err = b.WatchFrom(r.last+1, opts...)
				fellBack = errors.Is(err, broadcast.ErrOutOfRange)
				if fellBack {
					r.fallbacks++
					w, err = b.WatchFrom(0, opts...)
				}
			}
			if !errors.Is(err, broadcast.ErrClosed) {
				fail("reader %d: WatchFrom: %v", i, err)
			}
		})
	}
	var pubs sync.WaitGroup
	for p := range cfg.publishers {
		pubs.Go(func() {
			for k := range cfg.values / cfg.publishers {
				if err := b.Publish(p*cfg.values + k); err != nil {
					fail("Publish: %v", err)
					return
				}
			}
		})
	}
	pubs.Wait()
	// A watcher cannot resume after Shutdown began (WatchFrom returns
	// ErrClosed): let every reader reach the last value first.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		done := true
		for _, r := range results {
			done = done && r.progress.Load() == total
		}
		if done {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	wg.Wait()

	evictions, fallbacks := 0, 0
	for i, r := range results {
		evictions += r.evictions
		fallbacks += r.fallbacks
		for s, v := range r.got {
			if ref[s] != v {
				fail("reader %d: sequence number %d carried %d, the reference saw %d", i, s, v, ref[s])
			}
		}
		if r.last != total {
			fail("reader %d: last sequence number %d, want %d", i, r.last, total)
		}
	}
	t.Logf("resume soak %s: %d values, %d readers, %d evictions, %d resumptions past the history", cfg.name, total, cfg.resumers, evictions, fallbacks)
	if evictions == 0 {
		t.Errorf("no reader was evicted: the soak did not exercise resumption")
	}
}
