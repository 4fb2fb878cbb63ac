package broadcast

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func seq(from, to int) []int {
	var s []int
	for i := from; i < to; i++ {
		s = append(s, i)
	}
	return s
}

func drainAll(w *Watcher[int]) []int {
	var got []int
	for v := range w.All() {
		got = append(got, v)
	}
	return got
}

func drainC(w *Watcher[int]) []int {
	var got []int
	for v := range w.C() {
		got = append(got, v)
	}
	return got
}

// Eager decisions: room freed by a read is used by the next publish only,
// on both read paths.
func TestDropDecidesAtPublishTime(t *testing.T) {
	t.Run("All", func(t *testing.T) {
		b := New[int]()
		w, _ := b.Watch(WithQueueLength(2))
		b.Publish(1)
		b.Publish(2)
		b.Publish(3) // dropped: full
		var first int
		for v := range w.All() {
			first = v
			break
		}
		b.Publish(4)
		b.Shutdown(context.Background())
		rest := drainAll(w)
		if diff := cmp.Diff([]int{1, 2, 4}, append([]int{first}, rest...)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if d := w.Dropped(); d != 1 {
			t.Errorf("Dropped() = %d, want 1", d)
		}
	})
	t.Run("C", func(t *testing.T) {
		b := New[int]()
		w, _ := b.Watch(WithQueueLength(2))
		ch := w.C()
		b.Publish(1)
		b.Publish(2)
		b.Publish(3) // dropped: full
		first := <-ch
		b.Publish(4)
		b.Publish(5) // dropped: full again
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]int{1, 2, 4}, append([]int{first}, drainC(w)...)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if d := w.Dropped(); d != 2 {
			t.Errorf("Dropped() = %d, want 2", d)
		}
	})
}

func TestBarrierAndTotalOrder(t *testing.T) {
	b := New[int](WithPolicy(Block))
	const pubs, per = 3, 2000
	var last [pubs]int
	var mu sync.Mutex
	type obs struct {
		w      *Watcher[int]
		before [pubs]int // values returned per publisher before Watch was called
		after  [pubs]int // values returned per publisher when Watch had returned
		got    []int
	}
	var ws []*obs
	var wg sync.WaitGroup
	for p := range pubs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				v := p*per + i
				if err := b.Publish(v); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				last[p] = i + 1
				mu.Unlock()
			}
		}()
	}
	var rwg sync.WaitGroup
	for range 8 {
		o := &obs{}
		mu.Lock()
		o.before = last
		mu.Unlock()
		w, err := b.Watch()
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		o.after = last
		mu.Unlock()
		o.w = w
		ws = append(ws, o)
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for v := range w.All() {
				o.got = append(o.got, v)
			}
		}()
		time.Sleep(100 * time.Microsecond) // spread registrations; not a correctness wait
	}
	wg.Wait()
	b.Shutdown(context.Background())
	rwg.Wait()
	pos := map[int]int{}
	for _, v := range ws[0].got {
		pos[v] = len(pos)
	}
	for _, o := range ws {
		zeros := 0
		for _, v := range o.got {
			if v == 0 {
				zeros++
			}
		}
		if zeros > 1 || (zeros == 1 && o.before[0] > 0) {
			// 0, publisher 0's first value, is also what a ring slot
			// never written holds (TestRegressionWatchDuringIdlePublishes).
			t.Fatalf("a watcher received 0 %d times (publisher 0 at %d when it called Watch)", zeros, o.before[0])
		}
	}
	for k, o := range ws {
		var prev [pubs]int
		for p := range prev {
			prev[p] = -1
		}
		seen := map[int]bool{}
		for _, v := range o.got {
			p, i := v/per, v%per
			if i < o.before[p] {
				t.Fatalf("watcher %d got %d, published before its Watch", k, v)
			}
			if i <= prev[p] {
				t.Fatalf("watcher %d: publisher %d order broken: %d after %d", k, p, i, prev[p])
			}
			if prev[p] >= 0 && i != prev[p]+1 {
				t.Fatalf("watcher %d: lost values of publisher %d between %d and %d (Block)", k, p, prev[p], i)
			}
			prev[p] = i
			seen[v] = true
		}
		for p := range pubs {
			// Values from index after+1 on were published entirely after
			// Watch returned: all of them must be there (contiguity was
			// checked above), so the stream must reach the last one.
			if o.after[p]+1 < per && prev[p] != per-1 {
				t.Fatalf("watcher %d: publisher %d ends at %d, want %d", k, p, prev[p], per-1)
			}
			if o.after[p]+1 < per && !seen[p*per+o.after[p]+1] {
				t.Fatalf("watcher %d: missing value %d of publisher %d published after Watch returned", k, o.after[p]+1, p)
			}
		}
		// same relative order as watcher 0 for common values
		lastPos := -1
		for _, v := range o.got {
			if q, ok := pos[v]; ok {
				if q < lastPos {
					t.Fatalf("watcher %d order differs from watcher 0 at %d", k, v)
				}
				lastPos = q
			}
		}
	}
}

func TestStopFromInsideLoop(t *testing.T) {
	b := New[int](WithPolicy(Block), WithQueueLength(1))
	w, _ := b.Watch()
	go func() {
		for i := range 10 {
			if b.Publish(i) != nil {
				return
			}
		}
	}()
	n := 0
	for range w.C() {
		n++
		if n == 1 {
			w.Stop()
		}
	}
	b.Shutdown(context.Background())
}

// BlockFor and PublishContext deadlines, in virtual time, on both read
// paths: a watcher read through C() holds its queue length, as through All.
func TestBlockForAndContextDeadline(t *testing.T) {
	for _, read := range []string{"All", "C"} {
		t.Run(read, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const k = 0 // (once a value C() held in flight)
				drain := func(w *Watcher[int]) <-chan []int {
					got := make(chan []int, 1)
					go func() {
						if read == "C" {
							got <- drainC(w)
						} else {
							got <- drainAll(w)
						}
					}()
					return got
				}
				b := New[int]()
				pub := func(v int, wait time.Duration) {
					t.Helper()
					start := time.Now()
					if err := b.Publish(v); err != nil {
						t.Fatal(err)
					}
					if d := time.Since(start); d != wait {
						t.Errorf("Publish(%d) waited %v, want %v", v, d, wait)
					}
					synctest.Wait()
				}
				w, _ := b.Watch(WithPolicy(BlockFor(time.Second)), WithQueueLength(1))
				if read == "C" {
					_ = w.C()
				}
				fast, _ := b.Watch()
				for v := 1; v <= 1+k; v++ {
					pub(v, 0) // w has room
				}
				pub(2+k, time.Second) // w full: BlockFor waits 1s, then drops
				if w.Dropped() != 1 {
					t.Errorf("Dropped()=%d, want 1", w.Dropped())
				}
				blk, _ := b.Watch(WithPolicy(Block), WithQueueLength(1))
				if read == "C" {
					_ = blk.C()
				}
				for v := 3 + k; v <= 3+2*k; v++ {
					pub(v, time.Second) // w full again: waits 1s, dropped for w; blk has room
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				start := time.Now()
				err := b.PublishContext(ctx, 4+2*k) // blk full: waits for ctx
				if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != 5*time.Second {
					t.Errorf("PublishContext = %v after %v, want DeadlineExceeded after 5s", err, time.Since(start))
				}
				if blk.Dropped() != 1 {
					t.Errorf("blk.Dropped()=%d, want 1", blk.Dropped())
				}
				if d := w.Dropped(); d != uint64(3+k) {
					t.Errorf("w.Dropped()=%d, want %d", d, 3+k)
				}
				// Nothing reads while Shutdown runs (guarantee 6).
				if err := b.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				gotW, gotBlk := drain(w), drain(blk)
				if diff := cmp.Diff(seq(1, 4+2*k+1), drainAll(fast)); diff != "" {
					t.Errorf("fast watcher (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(seq(1, 2+k), <-gotW); diff != "" {
					t.Errorf("BlockFor watcher (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(seq(3+k, 4+2*k), <-gotBlk); diff != "" {
					t.Errorf("Block watcher (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// Guarantee 6 with a wedged Block watcher and a deadline.
func TestShutdownDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int](WithPolicy(Block), WithQueueLength(1))
		w, _ := b.Watch()
		b.Publish(1)
		pubErr := make(chan error)
		go func() { pubErr <- b.Publish(2) }()
		synctest.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
		}
		if time.Since(start) != time.Minute {
			t.Errorf("Shutdown took %v, want 1m", time.Since(start))
		}
		if err := <-pubErr; !errors.Is(err, ErrClosed) {
			t.Errorf("waiting Publish = %v, want ErrClosed", err)
		}
		if diff := cmp.Diff([]int{1}, drainAll(w)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if err := b.Publish(3); !errors.Is(err, ErrClosed) {
			t.Errorf("Publish after Shutdown = %v", err)
		}
		if _, err := b.Watch(); !errors.Is(err, ErrClosed) {
			t.Errorf("Watch after Shutdown = %v", err)
		}
		if ok, err := b.TryPublish(3); ok || !errors.Is(err, ErrClosed) {
			t.Errorf("TryPublish after Shutdown = %v, %v", ok, err)
		}
		if err := b.Shutdown(context.Background()); err != nil {
			t.Errorf("second Shutdown = %v", err)
		}
	})
}

// Many goroutines publishing, watching, stopping while Shutdown runs.
func TestShutdownRaces(t *testing.T) {
	for range 20 {
		b := New[int]()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 200 {
					switch (g + i) % 4 {
					case 0:
						b.Publish(i)
					case 1:
						if w, err := b.Watch(WithPolicy(DropOldest), WithQueueLength(3)); err == nil {
							if i%2 == 0 {
								_ = w.C()
							}
							w.Stop()
							w.Stop()
						}
					case 2:
						if w, err := b.Watch(WithPolicy(BlockFor(time.Millisecond)), WithQueueLength(2)); err == nil {
							go w.Stop()
						}
					default:
						b.TryPublish(i)
					}
				}
			}()
		}
		b.Shutdown(context.Background())
		wg.Wait()
	}
}

func TestBadInput(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if s, ok := r.(string); !ok || !strings.HasPrefix(s, "broadcast: ") {
				t.Errorf("%s: recovered %v, want a panic starting with \"broadcast: \"", name, r)
			}
		}()
		f()
	}
	mustPanic("WithQueueLength(0)", func() { WithQueueLength(0) })
	mustPanic("WithQueueLength(-1)", func() { WithQueueLength(-1) })
	mustPanic("WithQueueLength(huge)", func() { WithQueueLength(MaxQueueLength + 1) })
	mustPanic("BlockFor(0)", func() { BlockFor(0) })
	mustPanic("BlockFor(-1)", func() { BlockFor(-time.Second) })
	mustPanic("WithPolicy(zero)", func() { WithPolicy(Policy{}) })

	b := New[int](nil)
	w, err := b.Watch(nil, WithQueueLength(1))
	if err != nil {
		t.Fatal(err)
	}
	//lint:ignore SA1012 testing the nil check
	if err := b.PublishContext(nil, 1); err == nil { //nolint:staticcheck
		t.Error("PublishContext(nil) returned nil")
	}
	//lint:ignore SA1012 testing the nil check
	if err := b.Shutdown(nil); err == nil { //nolint:staticcheck
		t.Error("Shutdown(nil) returned nil")
	}
	if b.Stats().Published != 0 {
		t.Error("PublishContext(nil) published")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := b.PublishContext(ctx, 1); !errors.Is(err, context.Canceled) || b.Stats().Published != 0 {
		t.Errorf("PublishContext(done ctx) = %v, published %d", err, b.Stats().Published)
	}
	if err := b.Publish(1); err != nil {
		t.Fatal("broadcaster unusable after bad input:", err)
	}
	w.Stop()
	w.Stop()
	if _, ok := <-w.C(); ok {
		t.Error("C() after Stop is not closed")
	}
	if st := b.Stats(); st.Watchers != 0 {
		t.Errorf("Watchers = %d after Stop", st.Watchers)
	}
	b.Shutdown(context.Background())
}

// Breaking out of All() loses nothing; All and C together never duplicate.
func TestAllBreakAndMixedReaders(t *testing.T) {
	b := New[int]()
	w, _ := b.Watch()
	for i := range 100 {
		b.Publish(i)
	}
	var got []int
	for v := range w.All() {
		got = append(got, v)
		if len(got) == 10 {
			break
		}
	}
	if st := b.Stats(); st.Watchers != 1 {
		t.Fatalf("Watchers=%d after break", st.Watchers)
	}
	for v := range w.All() {
		got = append(got, v)
		if len(got) == 50 {
			break
		}
	}
	ch := w.C()
	b.Shutdown(context.Background())
	for v := range ch {
		got = append(got, v)
	}
	if diff := cmp.Diff(seq(0, 100), got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
