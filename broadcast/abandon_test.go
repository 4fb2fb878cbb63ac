package broadcast_test

// Readers that leave without Stop (issue 5). A watcher whose reader is gone
// stays registered (Watcher's doc: "a watcher nobody reads and nobody stops
// holds its queue (and, under Block, makes publishers wait) until the
// broadcaster shuts down"). Per policy, once its reader left:
//
//   - Drop and DropOldest: it holds exactly its queue length (Drop the
//     oldest values, DropOldest the newest), counts every other value in
//     Dropped(), and publishers never wait;
//   - BlockFor(d): each value that finds it full waits d, then is dropped
//     for it (counted);
//   - Block: publishers wait for it. TryPublish says false, PublishContext
//     returns at its deadline, and Shutdown(ctx) returns ctx.Err() at its
//     deadline with every watcher closed and no goroutine left.
//
// A watcher whose reader used C() holds the same: C()'s channel is its
// queue (guarantee 3), and Shutdown waits for no reader (guarantee 6).
//
// Everything timed runs in a testing/synctest bubble, so the durations
// asserted are exact virtual time, not measurements.

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
	"go.uber.org/goleak"
)

// abandonQueue is the abandoned watcher's queue length.
const abandonQueue = 3

// abandonWait is d of BlockFor(d).
const abandonWait = 2 * time.Second

// How a reader leaves. Each reads 1 and 2 of the queued 1, 2, 3 and leaves
// without Stop; 3 must still be queued for the watcher afterwards (All()
// batches values, and a batch not yielded stays queued).
var abandonModes = []struct {
	name string
	viaC bool // the reader used C()
	// leave starts the reader and returns once it has left; rest returns
	// what the reader reads after it is released at the end (only the
	// stuck reader reads on), or nil.
	leave func(t *testing.T, w *broadcast.Watcher[int]) (rest func() []int)
}{
	{"break out of All()", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		var got []int
		for v := range w.All() {
			if got = append(got, v); len(got) == 2 {
				break
			}
		}
		abandonCheckRead(t, got)
		return nil
	}},
	{"goroutine returns from an All() loop", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			for v := range w.All() {
				if !f(v) {
					return
				}
			}
		}))
		return nil
	}},
	{"goroutine returns from a range over C()", true, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			for v := range w.C() {
				if !f(v) {
					return
				}
			}
		}))
		return nil
	}},
	{"All() loop body panics, recovered outside the loop", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			defer func() { recover() }()
			for v := range w.All() {
				if !f(v) {
					panic("reader gone")
				}
			}
		}))
		return nil
	}},
	{"C() reader goroutine exits by runtime.Goexit", true, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		abandonCheckRead(t, <-abandonGoroutine(func(f func(int) bool) {
			for v := range w.C() {
				if !f(v) {
					runtime.Goexit()
				}
			}
		}))
		return nil
	}},
	{"reader stuck in its All() loop body until the end", false, func(t *testing.T, w *broadcast.Watcher[int]) func() []int {
		release := make(chan struct{})
		read := make(chan []int, 1)
		rest := make(chan []int, 1)
		go func() {
			var got, after []int
			for v := range w.All() {
				if len(got) < 2 {
					got = append(got, v)
					if len(got) == 2 {
						read <- got
						<-release
					}
					continue
				}
				after = append(after, v)
			}
			rest <- after
		}()
		abandonCheckRead(t, <-read)
		return func() []int { close(release); return <-rest }
	}},
}

// abandonGoroutine runs loop in a new goroutine with a callback that takes
// two values and then says stop; the channel gets those values once the
// goroutine has exited, whichever way it left.
func abandonGoroutine(loop func(f func(int) bool)) <-chan []int {
	ch := make(chan []int, 1)
	go func() {
		var got []int
		defer func() { ch <- got }()
		loop(func(v int) bool {
			got = append(got, v)
			return len(got) < 2
		})
	}()
	return ch
}

func abandonCheckRead(t *testing.T, got []int) {
	t.Helper()
	if d := cmp.Diff([]int{1, 2}, got); d != "" {
		t.Fatalf("the reader read (-want +got):\n%s", d)
	}
}

// abandonSetup returns a broadcaster with the abandoned watcher w (policy p,
// queue abandonQueue) and a roomy Drop watcher, after 1, 2, 3 were
// published and w's reader left having read 1 and 2.
func abandonSetup(t *testing.T, p broadcast.Policy, mode int) (b *broadcast.Broadcaster[int], w, other *broadcast.Watcher[int], rest func() []int) {
	t.Helper()
	b = broadcast.New[int]()
	var err error
	if w, err = b.Watch(broadcast.WithPolicy(p), broadcast.WithQueueLength(abandonQueue)); err != nil {
		t.Fatal(err)
	}
	if other, err = b.Watch(broadcast.WithQueueLength(100)); err != nil {
		t.Fatal(err)
	}
	for v := 1; v <= 3; v++ {
		if err := b.Publish(v); err != nil {
			t.Fatal(err)
		}
	}
	rest = abandonModes[mode].leave(t, w)
	synctest.Wait() // the reader is gone (or stuck)
	if got := b.Stats().Watchers; got != 2 {
		t.Fatalf("Stats().Watchers = %d after the reader left, want 2: leaving is not Stop", got)
	}
	return b, w, other, rest
}

// abandonRead returns what w still yields after Shutdown: through the stuck
// reader if there is one, else through C() (which must be closed after the
// values) or All() (which must end).
func abandonRead(t *testing.T, w *broadcast.Watcher[int], rest func() []int, viaAll bool) []int {
	t.Helper()
	if rest != nil {
		return rest()
	}
	if viaAll {
		return testutil.CollectSeq(t, w.All(), -1, time.Minute)
	}
	return testutil.Drain(t, w.C(), time.Minute)
}

func TestAbandonedReaderLossy(t *testing.T) {
	for _, pc := range []struct {
		name string
		p    broadcast.Policy
		held []int // its queue length, on both read paths
	}{
		{"Drop", broadcast.Drop, []int{3, 4, 5}},
		{"DropOldest", broadcast.DropOldest, []int{10, 11, 12}},
		{"BlockFor", broadcast.BlockFor(abandonWait), []int{3, 4, 5}},
	} {
		for mode, m := range abandonModes {
			t.Run(pc.name+"/"+m.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					held := pc.held
					// 12 published to it: 2 read, what it holds, the rest counted.
					dropped := 12 - 2 - len(held)
					var wait time.Duration // how long publishing 4..12 takes
					if pc.p != broadcast.Drop && pc.p != broadcast.DropOldest {
						wait = time.Duration(dropped) * abandonWait
					}
					b, w, other, rest := abandonSetup(t, pc.p, mode)
					start := time.Now()
					for v := 4; v <= 12; v++ {
						// Drop and DropOldest never refuse; BlockFor waits.
						if wait == 0 {
							if ok, err := b.TryPublish(v); !ok || err != nil {
								t.Fatalf("TryPublish(%d) = (%v, %v), want (true, nil): a full %s watcher never holds publishers up", v, ok, err, pc.name)
							}
						} else if err := b.Publish(v); err != nil {
							t.Fatalf("Publish(%d): %v", v, err)
						}
					}
					if got := time.Since(start); got != wait {
						t.Errorf("publishing 4..12 took %v, want %v", got, wait)
					}
					if got, want := w.Dropped(), uint64(dropped); got != want {
						t.Errorf("Dropped() = %d, want %d", got, want)
					}
					if got := w.Len(); got != len(held) {
						t.Errorf("Len() = %d, want %d", got, len(held))
					}
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					start = time.Now()
					if err := b.Shutdown(ctx); err != nil {
						t.Errorf("Shutdown = %v, want nil", err)
					}
					if got := time.Since(start); got != 0 {
						t.Errorf("Shutdown took %v, want no wait", got)
					}
					got := abandonRead(t, w, rest, mode%2 == 0)
					if d := cmp.Diff(held, got); d != "" {
						t.Errorf("the abandoned watcher held (-want +got):\n%s", d)
					}
					if d := cmp.Diff(testutil.Seq(1, 13), testutil.Drain(t, other.C(), time.Minute)); d != "" {
						t.Errorf("the other watcher (-want +got):\n%s", d)
					}
					if d := cmp.Diff(broadcast.Stats{Published: 12, Dropped: uint64(dropped)}, b.Stats()); d != "" {
						t.Errorf("Stats() (-want +got):\n%s", d)
					}
				})
				goleak.VerifyNone(t)
			})
		}
	}
}

func TestAbandonedReaderBlock(t *testing.T) {
	for mode, m := range abandonModes {
		t.Run(m.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, w, other, rest := abandonSetup(t, broadcast.Block, mode)
				// The watcher holds 3 to last: its queue length, on both
				// read paths.
				last := 2 + abandonQueue
				for v := 4; v <= last; v++ {
					if ok, err := b.TryPublish(v); !ok || err != nil {
						t.Fatalf("TryPublish(%d) = (%v, %v), want (true, nil): there is room", v, ok, err)
					}
					synctest.Wait() // the forwarder, if any, takes what it can
				}
				if got := w.Len(); got != last-2 {
					t.Errorf("Len() = %d, want %d", got, last-2)
				}
				if ok, err := b.TryPublish(last + 1); ok || err != nil {
					t.Errorf("TryPublish(%d) = (%v, %v), want (false, nil): the abandoned Block watcher is full", last+1, ok, err)
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				if err := b.PublishContext(ctx, last+1); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("PublishContext(%d) = %v, want DeadlineExceeded", last+1, err)
				}
				if got := time.Since(start); got != time.Second {
					t.Errorf("PublishContext(%d) returned after %v, want 1s, its deadline", last+1, got)
				}

				pub := make(chan error, 1)
				go func() { pub <- b.Publish(last + 2) }()
				synctest.Wait()
				select {
				case err := <-pub:
					t.Fatalf("Publish(%d) returned %v; want it to wait for the abandoned Block watcher", last+2, err)
				default:
				}
				sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer scancel()
				start = time.Now()
				if err := b.Shutdown(sctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Shutdown = %v, want DeadlineExceeded", err)
				}
				if got := time.Since(start); got != 5*time.Second {
					t.Errorf("Shutdown returned after %v, want 5s, its deadline", got)
				}
				if err := <-pub; !errors.Is(err, broadcast.ErrClosed) {
					t.Errorf("the waiting Publish(%d) = %v, want ErrClosed", last+2, err)
				}
				// Every watcher is closed: the abandoned one after what it
				// held (last+1 and last+2 were dropped for it, counted), the
				// other after everything, on both read paths.
				held, dropped := testutil.Seq(3, last+1), 2
				if d := cmp.Diff(held, abandonRead(t, w, rest, mode%2 == 0)); d != "" {
					t.Errorf("the abandoned watcher held (-want +got):\n%s", d)
				}
				if d := cmp.Diff(testutil.Seq(1, last+3), testutil.Drain(t, other.C(), time.Minute)); d != "" {
					t.Errorf("the other watcher (-want +got):\n%s", d)
				}
				for _, c := range []*broadcast.Watcher[int]{w, other} {
					if v, ok := <-c.C(); ok {
						t.Errorf("C() yielded %d after draining; want it closed", v)
					}
					if got := testutil.CollectSeq(t, c.All(), -1, time.Minute); got != nil {
						t.Errorf("All() yielded %v after draining; want it to end", got)
					}
				}
				if err := b.Shutdown(context.Background()); err != nil {
					t.Errorf("second Shutdown = %v, want nil", err)
				}
				if got := w.Dropped(); got != uint64(dropped) {
					t.Errorf("Dropped() = %d, want %d (%d at PublishContext's deadline, %d at Shutdown's)", got, dropped, last+1, last+2)
				}
				if d := cmp.Diff(broadcast.Stats{Published: uint64(last + 2), Dropped: uint64(dropped)}, b.Stats()); d != "" {
					t.Errorf("Stats() (-want +got):\n%s", d)
				}
			})
			goleak.VerifyNone(t)
		})
	}
}

// TestAbandonedUnreachableWatcher: dropping the last reference to a watcher
// is not Stop either. The broadcaster keeps it (no finalizer or cleanup
// unregisters it), so a Drop watcher keeps counting and a Block watcher
// keeps holding publishers up.
func TestAbandonedUnreachableWatcher(t *testing.T) {
	for _, pc := range []struct {
		name string
		p    broadcast.Policy
	}{{"Drop", broadcast.Drop}, {"Block", broadcast.Block}} {
		t.Run(pc.name, func(t *testing.T) {
			b := broadcast.New[int]()
			collected := make(chan struct{})
			func() {
				w, err := b.Watch(broadcast.WithPolicy(pc.p), broadcast.WithQueueLength(1))
				if err != nil {
					t.Fatal(err)
				}
				runtime.AddCleanup(w, func(ch chan struct{}) { close(ch) }, collected)
			}()
			for range 3 {
				runtime.GC()
			}
			var oks []bool
			for v := range 3 {
				ok, err := b.TryPublish(v)
				if err != nil {
					t.Fatal(err)
				}
				oks = append(oks, ok)
			}
			want := []bool{true, true, true}
			if pc.p == broadcast.Block {
				want = []bool{true, false, false}
			}
			if d := cmp.Diff(want, oks); d != "" {
				t.Errorf("TryPublish results (-want +got):\n%s", d)
			}
			st := b.Stats()
			wantSt := broadcast.Stats{Published: uint64(len(slices.DeleteFunc(oks, func(ok bool) bool { return !ok }))), Watchers: 1}
			if pc.p == broadcast.Drop {
				wantSt.Dropped = 2
			}
			if d := cmp.Diff(wantSt, st, cmpopts.EquateEmpty()); d != "" {
				t.Errorf("Stats() (-want +got):\n%s", d)
			}
			if err := b.Shutdown(context.Background()); err != nil {
				t.Errorf("Shutdown = %v", err)
			}
			select {
			case <-collected:
				t.Error("the watcher was collected while registered")
			default:
			}
			runtime.KeepAlive(b)
		})
	}
}
