package broadcast

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Tests of C()'s forwarder: a queue longer than the channel, Shutdown
// draining it, Stop while the forwarder is blocked, Block room detection
// through the forwarder, and the channel's size.

// The channel holds min(ChannelBuffer, queue length) - 1 values and the
// forwarder one more in its blocked send: min(ChannelBuffer, queue length)
// in flight. A prefix does not change it (prefix values are exempt from the
// queue length, and the forwarder reads them as any other value).
func TestChannelSize(t *testing.T) {
	for _, tc := range []struct {
		name   string
		qlen   int
		prefix int
		want   int
	}{
		{"default queue", DefaultQueueLength, 0, ChannelBuffer - 1},
		{"short queue", 3, 0, 2},
		{"short queue with prefix", 3, 2, 2},
		{"long prefix", 3, 100, 2},
		{"queue of ChannelBuffer", ChannelBuffer, 0, ChannelBuffer - 1},
		{"queue of ChannelBuffer+1", ChannelBuffer + 1, 0, ChannelBuffer - 1},
		{"queue of one: unbuffered", 1, 0, 0},
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
				// The channel keeps what it holds (its capacity,
				// ChannelBuffer-1); the value the forwarder held in its
				// blocked send and the rest are dropped, counted.
				if len(got) != cap(ch) || cap(ch) != ChannelBuffer-1 {
					t.Errorf("received %d values, want the channel's %d", len(got), ChannelBuffer-1)
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
// the channel holds exactly its queue length plus the values in flight
// (ChannelBuffer-1 in the channel, one in the forwarder's blocked send),
// and a TryPublish then fails.
func TestBlockLongQueueFullThroughC(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const qlen = 200
		const held = qlen + ChannelBuffer // queue + in flight
		b := New[int](WithQueueLength(qlen), WithPolicy(Block))
		w, _ := b.Watch()
		ch := w.C()
		for i := range held {
			if err := b.Publish(i); err != nil {
				t.Fatal(err)
			}
		}
		synctest.Wait() // the forwarder fills the channel and blocks
		if n := w.Len(); n != held {
			t.Errorf("Len() = %d, want %d", n, held)
		}
		if ok, err := b.TryPublish(held); ok || err != nil {
			t.Fatalf("TryPublish on a full Block watcher = %v, %v; want false, nil", ok, err)
		}
		published := make(chan error)
		go func() { published <- b.Publish(held) }()
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
		if diff := cmp.Diff(seq(1, held+1), got); diff != "" {
			t.Errorf("received (-want +got):\n%s", diff)
		}
		if d := w.Dropped(); d != 0 {
			t.Errorf("Dropped() = %d, want 0", d)
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
				// C() keeps what its buffer held (full: the forwarder was
				// blocked); the value in the forwarder's send and the rest
				// are discarded, not counted.
				if len(got) != ChannelBuffer-1 {
					t.Errorf("received %d values after Stop, want the channel's %d", len(got), ChannelBuffer-1)
				}
				if d := w.Dropped(); d != 0 {
					t.Errorf("Dropped() = %d after Stop, want 0", d)
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

// TestForwarderHeldIsOldest: under DropOldest through C(), the values in
// flight (the channel's and the one the forwarder holds in its blocked
// send) are the oldest and are never discarded; publishers discard the
// oldest of the rest. A watcher that never reads ends with the values in
// flight, then exactly the last queue-length values, and every other value
// counted as dropped.
func TestForwarderHeldIsOldest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const queue, total = 100, 300
		b := New[int]()
		w, _ := b.Watch(WithQueueLength(queue), WithPolicy(DropOldest))
		ch := w.C()
		for i := range total {
			if err := b.Publish(i); err != nil {
				t.Fatal(err)
			}
			synctest.Wait() // the forwarder takes what it can
		}
		// Read only now (Shutdown waits for a C() reader to take what does
		// not fit in the channel).
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
		inFlight := min(ChannelBuffer, queue)
		want := make([]int, 0, inFlight+queue)
		for i := range inFlight {
			want = append(want, i)
		}
		for i := total - queue; i < total; i++ {
			want = append(want, i)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("kept %d values %v…, want %d: 0…%d, %d…%d", len(got), got[:min(len(got), 5)], len(want), inFlight-1, total-queue, total-1)
		}
		if d := w.Dropped(); d != uint64(total-len(want)) {
			t.Fatalf("Dropped %d, want %d", d, total-len(want))
		}
	})
}
