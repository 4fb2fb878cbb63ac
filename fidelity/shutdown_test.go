package fidelity

import (
	"context"
	"errors"
	"iter"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/heraldgo/herald/broadcast"
)

// herald's broadcast.Broadcaster side by side with Kubernetes'
// watch.Broadcaster (k8s.io/apimachinery/pkg/watch, v0.37.2), on the ideas
// of its own tests in mux_test.go: TestBroadcaster and Shutdown after
// Action with a WaitIfChannelFull watcher, read after;
// TestBroadcasterDropIfChannelFull; TestBroadcasterWatcherClose,
// TestBroadcasterWatchAfterShutdown and TestBroadcasterSendEventAfterShutdown.
// WaitIfChannelFull is herald's Block, DropIfChannelFull its Drop. Every
// test runs in a testing/synctest bubble: both broadcasters' goroutines must
// have exited when it ends, and a wait that never ends fails it.

// num is a runtime.Object carrying one int, as mux_test.go's myType does.
type num int

func (n num) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (n num) DeepCopyObject() runtime.Object   { return n }

// k8sRead reads a watch.Interface until its channel is closed.
func k8sRead(w watch.Interface) []int {
	var got []int
	for e := range w.ResultChan() {
		got = append(got, int(e.Object.(num)))
	}
	return got
}

// heraldRead reads w to its end through C() or All().
func heraldRead(w *broadcast.Watcher[int], path string) []int {
	var got []int
	var seq iter.Seq[int] = w.All()
	if path == "C" {
		seq = func(yield func(int) bool) {
			for v := range w.C() {
				if !yield(v) {
					return
				}
			}
		}
	}
	for v := range seq {
		got = append(got, v)
	}
	return got
}

var heraldPaths = []string{"C", "All"}

// TestShutdownAfterAction: values published to a lossless watcher that
// nobody reads, then Shutdown, then read: Kubernetes' Shutdown returns once
// every event is in the watchers' channels and closes them; herald's returns
// at once (it waits for no reader) and C() or All() yields the same values,
// then ends. Both deliver every value, in order, then the end.
func TestShutdownAfterAction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queue  int
		values []int
		reason string
	}{
		{"full queue", 3, []int{1, 2, 3}, "a full WaitIfChannelFull watcher keeps all it holds through Shutdown; herald's Block watcher too (issue 27: through C() it lost most)"},
		{"room left", 10, []int{1, 2, 3, 4}, "TestBroadcaster's four events, read after Shutdown instead of meanwhile"},
		{"queue 1", 1, []int{5}, "the smallest queue herald allows (Kubernetes allows 0, herald panics below 1)"},
		{"nothing published", 4, nil, "Shutdown of an idle broadcaster just closes every watcher"},
	} {
		for _, path := range heraldPaths {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					km := watch.NewBroadcaster(tc.queue, watch.WaitIfChannelFull)
					kw, err := km.Watch()
					if err != nil {
						t.Fatal(err)
					}
					hb := broadcast.New[int](broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(tc.queue))
					hw, err := hb.Watch()
					if err != nil {
						t.Fatal(err)
					}
					if path == "C" {
						hw.C() // as ResultChan, from the start
					}
					for _, v := range tc.values {
						if err := km.Action(watch.Added, num(v)); err != nil {
							t.Fatalf("k8s Action(%d): %v", v, err)
						}
						if err := hb.Publish(v); err != nil {
							t.Fatalf("herald Publish(%d): %v", v, err)
						}
					}
					km.Shutdown()
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					start := time.Now()
					if err := hb.Shutdown(ctx); err != nil {
						t.Errorf("herald Shutdown = %v, want nil (%s)", err, tc.reason)
					}
					if d := time.Since(start); d != 0 {
						t.Errorf("herald Shutdown took %v with nobody reading, want no wait", d)
					}
					k, h := k8sRead(kw), heraldRead(hw, path)
					if d := cmp.Diff(k, h); d != "" {
						t.Errorf("delivered (-k8s +herald):\n%s(%s)", d, tc.reason)
					}
					if d := cmp.Diff(tc.values, h); d != "" {
						t.Errorf("herald delivered (-want +got):\n%s", d)
					}
					if d := hw.Dropped(); d != 0 {
						t.Errorf("herald Dropped() = %d, want 0: nothing is lost under Block", d)
					}
				})
			})
		}
	}
}

// TestShutdownOverfull: the difference, named. Three values for a lossless
// watcher of queue 2 that nobody reads. Kubernetes' Action returns for the
// third too (it waits in the broadcaster's incoming queue), and its Shutdown
// then waits until a reader takes one; the reader gets all three. herald's
// third Publish waits for room (a Publish under Block may wait: guarantee
// 4); Shutdown(ctx) waits for it, not for a reader, and at ctx's end gives
// up: that Publish returns ErrClosed, its value is counted as dropped, and
// the watcher yields the two accepted values, then ends (guarantee 6).
func TestShutdownOverfull(t *testing.T) {
	for _, path := range heraldPaths {
		t.Run(path, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				km := watch.NewBroadcaster(2, watch.WaitIfChannelFull)
				kw, err := km.Watch()
				if err != nil {
					t.Fatal(err)
				}
				for v := 1; v <= 3; v++ {
					if err := km.Action(watch.Added, num(v)); err != nil {
						t.Fatalf("k8s Action(%d): %v", v, err)
					}
				}
				kdone := make(chan struct{})
				go func() { km.Shutdown(); close(kdone) }()
				synctest.Wait()
				select {
				case <-kdone:
					t.Fatal("k8s Shutdown returned with its watcher full and nobody reading; the difference this test names is gone")
				default:
				}
				k := k8sRead(kw) // makes room: its Shutdown can finish
				<-kdone
				if d := cmp.Diff([]int{1, 2, 3}, k); d != "" {
					t.Errorf("k8s delivered (-want +got):\n%s", d)
				}

				hb := broadcast.New[int](broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(2))
				hw, err := hb.Watch()
				if err != nil {
					t.Fatal(err)
				}
				if path == "C" {
					hw.C()
				}
				for v := 1; v <= 2; v++ {
					if err := hb.Publish(v); err != nil {
						t.Fatalf("herald Publish(%d): %v", v, err)
					}
				}
				third := make(chan error, 1)
				go func() { third <- hb.Publish(3) }()
				synctest.Wait()
				select {
				case err := <-third:
					t.Fatalf("herald Publish(3) returned %v with the Block watcher full; want it to wait", err)
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				start := time.Now()
				if err := hb.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("herald Shutdown = %v, want DeadlineExceeded: a Publish waited for the full watcher", err)
				}
				if d := time.Since(start); d != time.Second {
					t.Errorf("herald Shutdown took %v, want its ctx's 1s", d)
				}
				if err := <-third; !errors.Is(err, broadcast.ErrClosed) {
					t.Errorf("herald Publish(3) = %v, want ErrClosed", err)
				}
				h := heraldRead(hw, path)
				if d := cmp.Diff([]int{1, 2}, h); d != "" {
					t.Errorf("herald delivered (-want +got):\n%s", d)
				}
				if d := hw.Dropped(); d != 1 {
					t.Errorf("herald Dropped() = %d, want 1: the value given up is counted", d)
				}
				t.Logf("k8s delivered %v (its Shutdown waited for a reader); herald %v, 1 counted dropped (its Shutdown waited 1s for the blocked Publish)", k, h)
			})
		})
	}
}

// TestDropIfChannelFull: TestBroadcasterDropIfChannelFull side by side. Two
// watchers of queue 1, two values, Shutdown, then read: each gets the first
// only, then the end. herald counts the value each lost; Kubernetes counts
// nothing.
func TestDropIfChannelFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		km := watch.NewBroadcaster(1, watch.DropIfChannelFull)
		hb := broadcast.New[int](broadcast.WithPolicy(broadcast.Drop), broadcast.WithQueueLength(1))
		var kws []watch.Interface
		var hws []*broadcast.Watcher[int]
		for range 2 {
			kw, err := km.Watch()
			if err != nil {
				t.Fatal(err)
			}
			hw, err := hb.Watch()
			if err != nil {
				t.Fatal(err)
			}
			kws, hws = append(kws, kw), append(hws, hw)
		}
		hws[0].C() // one herald watcher read through C(), the other through All()
		for v := 1; v <= 2; v++ {
			if err := km.Action(watch.Added, num(v)); err != nil {
				t.Fatal(err)
			}
			if err := hb.Publish(v); err != nil {
				t.Fatal(err)
			}
		}
		km.Shutdown()
		if err := hb.Shutdown(context.Background()); err != nil {
			t.Fatalf("herald Shutdown: %v", err)
		}
		for i, path := range heraldPaths {
			k, h := k8sRead(kws[i]), heraldRead(hws[i], path)
			if d := cmp.Diff(k, h); d != "" {
				t.Errorf("watcher %d: delivered (-k8s +herald):\n%s", i, d)
			}
			if d := cmp.Diff([]int{1}, h); d != "" {
				t.Errorf("watcher %d: herald delivered (-want +got):\n%s", i, d)
			}
			if d := hws[i].Dropped(); d != 1 {
				t.Errorf("watcher %d: herald Dropped() = %d, want 1", i, d)
			}
		}
		if st := hb.Stats(); st.Dropped != 2 {
			t.Errorf("herald Stats().Dropped = %d, want 2", st.Dropped)
		}
	})
}

// closeOutcome is what TestBroadcasterWatcherClose and the after-Shutdown
// tests observe, in terms both share.
type closeOutcome struct {
	StoppedClosed  bool // the stopped watcher's channel is closed after Shutdown
	OtherClosed    bool // so is the other one's
	WatchFails     bool // Watch after Shutdown returns an error
	PublishFails   bool // Action / Publish after Shutdown returns an error
	TryPublished   bool // ActionOrDrop / TryPublish after Shutdown says sent
	TryPublishFail bool // and returns an error
}

// TestWatcherCloseAndAfterShutdown: Stop one watcher, Shutdown, both
// channels closed, Stop again harmless; then every entry point refuses.
func TestWatcherCloseAndAfterShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var k closeOutcome
		km := watch.NewBroadcaster(1, watch.WaitIfChannelFull)
		kw, _ := km.Watch()
		kw2, _ := km.Watch()
		kw.Stop()
		km.Shutdown()
		_, open := <-kw.ResultChan()
		k.StoppedClosed = !open
		_, open = <-kw2.ResultChan()
		k.OtherClosed = !open
		kw.Stop()
		kw2.Stop()
		_, err := km.Watch()
		k.WatchFails = err != nil
		k.PublishFails = km.Action(watch.Added, num(1)) != nil
		sent, err := km.ActionOrDrop(watch.Added, num(1))
		k.TryPublished, k.TryPublishFail = sent, err != nil

		var h closeOutcome
		hb := broadcast.New[int](broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
		hw, _ := hb.Watch()
		hw2, _ := hb.Watch()
		hw.Stop()
		if err := hb.Shutdown(context.Background()); err != nil {
			t.Fatalf("herald Shutdown: %v", err)
		}
		_, open = <-hw.C()
		h.StoppedClosed = !open
		_, open = <-hw2.C()
		h.OtherClosed = !open
		hw.Stop()
		hw2.Stop()
		_, err = hb.Watch()
		h.WatchFails = errors.Is(err, broadcast.ErrClosed)
		h.PublishFails = errors.Is(hb.Publish(1), broadcast.ErrClosed)
		sent, err = hb.TryPublish(1)
		h.TryPublished, h.TryPublishFail = sent, errors.Is(err, broadcast.ErrClosed)

		want := closeOutcome{StoppedClosed: true, OtherClosed: true, WatchFails: true, PublishFails: true, TryPublishFail: true}
		if d := cmp.Diff(k, h); d != "" {
			t.Errorf("outcome (-k8s +herald):\n%s", d)
		}
		if d := cmp.Diff(want, h); d != "" {
			t.Errorf("herald outcome (-want +got):\n%s", d)
		}
	})
}
