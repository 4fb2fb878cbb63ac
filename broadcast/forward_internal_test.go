package broadcast

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of C()'s forwarder: a queue longer than the channel, Shutdown
// draining it, Stop while the forwarder is blocked, Block room detection
// through the forwarder, and the channel's size.

func TestChannelSize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		qlen   int
		prefix int
		want   int
	}{
		{"default queue", DefaultQueueLength, 0, ChannelBuffer},
		{"short queue", 3, 0, 3},
		{"short queue with prefix", 3, 2, 5},
		{"long prefix", 3, 100, ChannelBuffer},
		{"queue of one", 1, 0, 1},
	} {
		for _, p := range []Policy{Drop, DropOldest, Block, BlockFor(time.Second)} {
			t.Run(tc.name+"/"+p.String(), func(t *testing.T) {
				b := New[int]()
				w, err := b.WatchWithPrefix(make([]int, tc.prefix), WithQueueLength(tc.qlen), WithPolicy(p))
				if err != nil {
					t.Fatal(err)
				}
				if got := cap(w.C()); got != tc.want {
					t.Errorf("cap(C()) = %d, want %d", got, tc.want)
				}
				w.Stop()
				_ = b.Shutdown(context.Background())
			})
		}
	}
}

// Guarantee 6 through C() when the queue is longer than the channel:
// Shutdown waits for the reader to take the rest; if its ctx ends first, the
// channel keeps what it holds, the rest is dropped and counted, and the
// forwarder is gone (the synctest bubble would not end otherwise).
func TestShutdownDrainsLongCQueue(t *testing.T) {
	const n = 500
	for _, p := range []Policy{Drop, DropOldest, Block, BlockFor(time.Hour)} {
		t.Run(p.String()+"/reader keeps up", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New[int](WithQueueLength(1000), WithPolicy(p))
				w, _ := b.Watch()
				ch := w.C()
				for i := range n {
					if err := b.Publish(i); err != nil {
						t.Fatal(err)
					}
				}
				got := make(chan []int)
				go func() {
					time.Sleep(time.Minute) // Shutdown waits for this reader
					var vs []int
					for v := range ch {
						vs = append(vs, v)
					}
					got <- vs
				}()
				if err := b.Shutdown(context.Background()); err != nil {
					t.Fatalf("Shutdown: %v", err)
				}
				if diff := cmp.Diff(seq(0, n), <-got); diff != "" {
					t.Errorf("received (-want +got):\n%s", diff)
				}
				if d := w.Dropped(); d != 0 {
					t.Errorf("Dropped() = %d, want 0", d)
				}
			})
		})
		t.Run(p.String()+"/reader stalled", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New[int](WithQueueLength(1000), WithPolicy(p))
				w, _ := b.Watch()
				ch := w.C()
				for i := range n {
					if err := b.Publish(i); err != nil {
						t.Fatal(err)
					}
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Shutdown = %v, want DeadlineExceeded", err)
				}
				if d := time.Since(start); d != time.Second {
					t.Errorf("Shutdown returned after %v, want its 1s deadline", d)
				}
				var got []int
				for v := range ch {
					got = append(got, v)
				}
				if diff := cmp.Diff(seq(0, len(got)), got); diff != "" {
					t.Errorf("received (-want +got):\n%s", diff)
				}
				if len(got) < ChannelBuffer || len(got) > ChannelBuffer+1 {
					t.Errorf("received %d values, want the channel's %d (+1 in hand)", len(got), ChannelBuffer)
				}
				if d := w.Dropped(); int(d)+len(got) != n {
					t.Errorf("Dropped() %d + received %d != published %d", d, len(got), n)
				}
				if st := b.Stats(); st.Dropped != w.Dropped() || st.Published != n {
					t.Errorf("Stats() = %+v, want Published %d, Dropped %d", st, n, w.Dropped())
				}
			})
		})
	}
}

// Guarantee 4 through C() with a queue longer than the channel: the
// forwarder's blocked send is how a waiting publisher learns of room.
func TestBlockLongQueueThroughC(t *testing.T) {
	for _, qlen := range []int{ChannelBuffer - 1, ChannelBuffer, ChannelBuffer + 1, 200} {
		t.Run("", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const n = 1000
				b := New[int](WithQueueLength(qlen), WithPolicy(Block))
				w, _ := b.Watch()
				ch := w.C()
				got := make(chan []int)
				go func() {
					var vs []int
					for v := range ch {
						vs = append(vs, v)
						if len(vs)%7 == 0 {
							time.Sleep(time.Millisecond) // a slow reader
						}
					}
					got <- vs
				}()
				for i := range n {
					if err := b.Publish(i); err != nil {
						t.Fatal(err)
					}
				}
				if err := b.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(seq(0, n), <-got); diff != "" {
					t.Errorf("queue %d: received (-want +got):\n%s", qlen, diff)
				}
				if d := w.Dropped(); d != 0 {
					t.Errorf("Dropped() = %d", d)
				}
			})
		})
	}
}

// A never-reading Block watcher read through C() with a queue longer than
// the channel holds exactly its queue length, and a TryPublish then fails.
func TestBlockLongQueueFullThroughC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const qlen = 200
		b := New[int](WithQueueLength(qlen), WithPolicy(Block))
		w, _ := b.Watch()
		ch := w.C()
		for i := range qlen {
			if err := b.Publish(i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // the forwarder fills the channel and blocks
		if ok, err := b.TryPublish(qlen); ok || err != nil {
			t.Fatalf("TryPublish on a full Block watcher = %v, %v; want false, nil", ok, err)
		}
		published := make(chan error)
		go func() { published <- b.Publish(qlen) }()
		synctest.Wait()
		select {
		case err := <-published:
			t.Fatalf("Publish returned %v while the watcher was full", err)
		default:
		}
		if v := <-ch; v != 0 {
			t.Fatalf("first value %d, want 0", v)
		}
		if err := <-published; err != nil {
			t.Fatal(err)
		}
		go func() { _ = b.Shutdown(context.Background()) }()
		var got []int
		for v := range ch {
			got = append(got, v)
		}
		if diff := cmp.Diff(seq(1, qlen+1), got); diff != "" {
			t.Errorf("received (-want +got):\n%s", diff)
		}
	})
}

// Stop while the forwarder is blocked sending: Stop returns at once, C() is
// closed when it does, and the forwarder exits (the bubble would not end).
func TestStopWhileForwarderBlocked(t *testing.T) {
	for _, p := range []Policy{Drop, Block} {
		t.Run(p.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := New[int](WithQueueLength(200), WithPolicy(p))
				w, _ := b.Watch()
				ch := w.C()
				for i := range 150 {
					if err := b.Publish(i); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				w.Stop()
				var got []int
				for {
					select {
					case v, ok := <-ch:
						if !ok {
							goto closed
						}
						got = append(got, v)
						continue
					default:
						t.Fatal("C() not closed when Stop returned")
					}
				}
			closed:
				if diff := cmp.Diff(seq(0, len(got)), got); diff != "" {
					t.Errorf("received (-want +got):\n%s", diff)
				}
				if len(got) > ChannelBuffer+1 {
					t.Errorf("received %d values after Stop, want at most %d", len(got), ChannelBuffer+1)
				}
				if err := b.Publish(1); err != nil {
					t.Fatal(err)
				}
				if err := b.Shutdown(context.Background()); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}

// A watcher that falls behind the ring while read through C() keeps every
// value under Block, in order (spill-over into pend, then the forwarder).
func TestCLappedByRing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const qlen, n = 5000, 5000
		b := New[int](WithQueueLength(qlen), WithPolicy(Block))
		w, _ := b.Watch()
		ch := w.C()
		for i := range n {
			if err := b.Publish(i); err != nil {
				t.Fatal(err)
			}
		}
		go func() { _ = b.Shutdown(context.Background()) }()
		var got []int
		for v := range ch {
			got = append(got, v)
		}
		if diff := cmp.Diff(seq(0, n), got); diff != "" {
			t.Errorf("received (-want +got):\n%s", diff)
		}
	})
}

// Publishing with no watcher takes a lock-free path that only counts; the
// barrier and the counts must hold across the transitions to and from it.
func TestIdlePublishTransitions(t *testing.T) {
	b := New[int]()
	pub := func(vs ...int) {
		t.Helper()
		for _, v := range vs {
			if err := b.Publish(v); err != nil {
				t.Fatal(err)
			}
		}
	}
	pub(1, 2, 3) // nobody watches
	w1, _ := b.Watch()
	pub(4, 5)
	var got1 []int
	for v := range w1.All() {
		if got1 = append(got1, v); len(got1) == 2 {
			break
		}
	}
	w1.Stop()
	if ok, err := b.TryPublish(6); !ok || err != nil { // idle again
		t.Fatalf("TryPublish = %v, %v", ok, err)
	}
	if err := b.PublishContext(context.Background(), 7); err != nil {
		t.Fatal(err)
	}
	w2, _ := b.Watch()
	pub(8)
	if st := b.Stats(); st.Published != 8 || st.Watchers != 1 {
		t.Errorf("Stats() = %+v, want Published 8, Watchers 1", st)
	}
	go func() { _ = b.Shutdown(context.Background()) }()
	if diff := cmp.Diff([]int{8}, drainAll(w2)); diff != "" {
		t.Errorf("second watcher (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{4, 5}, got1); diff != "" {
		t.Errorf("first watcher (-want +got):\n%s", diff)
	}
	if err := b.Publish(9); !errors.Is(err, ErrClosed) {
		t.Errorf("Publish after Shutdown = %v, want ErrClosed", err)
	}
	if b.Stats().Published != 8 {
		t.Errorf("Published = %d after Shutdown, want 8", b.Stats().Published)
	}
}

// A forwarder batch is read from the ring after its claim: the ring must
// not overwrite it meanwhile. Found by the long soak (a Drop watcher with a
// queue longer than the ring, read through C() slowly, received a value a
// lap newer in place of an old one).
func TestForwarderBatchNotOverwritten(t *testing.T) {
	b := New[int]()
	w, _ := b.Watch(WithQueueLength(maxRing+1), WithPolicy(Drop))
	ch := w.C()
	const warm = 10
	for i := range warm {
		if err := b.Publish(i); err != nil {
			t.Fatal(err)
		}
	}
	for range warm {
		<-ch // the forwarder has caught up and parks: h == tail == warm
	}
	// The next batch the forwarder claims starts at seq warm. While it sits
	// between its claim and its reads, publish up to seq warm+maxRing, whose
	// slot is seq warm's. Unpinned, that overwrite happens at once and the
	// forwarder reads the new value; pinned, the publisher waits for the
	// batch (here until the hook gives up waiting for it).
	claimed := make(chan struct{})
	overwritten := make(chan struct{})
	var once sync.Once
	testHookBatch = func(h, n uint64) {
		if h != warm {
			return
		}
		once.Do(func() {
			close(claimed)
			select {
			case <-overwritten:
			case <-time.After(200 * time.Millisecond):
			}
		})
	}
	defer func() { testHookBatch = nil }()
	for i := warm; i < warm+2; i++ { // a batch needs two values
		if err := b.Publish(i); err != nil {
			t.Fatal(err)
		}
	}
	<-claimed
	go func() {
		defer close(overwritten)
		for i := warm + 2; i <= warm+maxRing; i++ {
			if err := b.Publish(i); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	got := make(chan []int)
	go func() {
		var vs []int
		for v := range ch {
			vs = append(vs, v)
		}
		got <- vs
	}()
	<-overwritten
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	vs := <-got
	for i := 1; i < len(vs); i++ {
		if vs[i] <= vs[i-1] {
			t.Fatalf("received %d after %d", vs[i], vs[i-1])
		}
	}
	if len(vs) == 0 || vs[0] != warm {
		t.Fatalf("first value after the warm-up = %v, want %d", vs[:min(len(vs), 1)], warm)
	}
}

// TestForwarderHeldIsOldest: under DropOldest through C(), a value the
// forwarder holds (claimed when the channel was full, not yet sent) is
// newer than the channel's and older than everything else queued. While
// the forwarder is kept from sending it, publishers discard the channel's
// values, then must wait for the held one to land and discard it, not the
// newer values in the ring: a watcher that never reads ends with exactly
// the last queue-length values (found by a review: it kept the held value
// and lost newer ones).
func TestForwarderHeldIsOldest(t *testing.T) {
	const queue, total = 100, 300
	b := New[int]()
	w, _ := b.Watch(WithQueueLength(queue), WithPolicy(DropOldest))
	ch := w.C()
	var once sync.Once
	entered, published := make(chan struct{}), make(chan struct{})
	testHookHeld = func() {
		// The first hold: keep the forwarder from sending until the
		// publisher below is done, or, if it waits for the held value
		// (as it must), for a while.
		once.Do(func() {
			close(entered)
			select {
			case <-published:
			case <-time.After(100 * time.Millisecond):
			}
		})
	}
	defer func() { testHookHeld = nil }()
	for i := range ChannelBuffer + 1 { // fills the channel; the next is held
		if err := b.Publish(i); err != nil {
			t.Fatal(err)
		}
	}
	<-entered
	for i := ChannelBuffer + 1; i < total; i++ {
		if err := b.Publish(i); err != nil {
			t.Fatal(err)
		}
	}
	close(published)
	// Read only now (Shutdown waits for a C() reader to take what does not
	// fit in the channel).
	gotc := make(chan []int)
	go func() {
		var got []int
		for v := range ch {
			got = append(got, v)
		}
		gotc <- got
	}()
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := <-gotc
	if len(got) != queue || got[0] != total-queue || got[queue-1] != total-1 {
		t.Fatalf("kept %d values %v…, want %d…%d", len(got), got[:min(len(got), 5)], total-queue, total-1)
	}
	if d := w.Dropped(); d != total-queue {
		t.Fatalf("Dropped %d, want %d", d, total-queue)
	}
}
