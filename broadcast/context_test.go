package broadcast_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

var errGone = errors.New("client went away")

// TestWithContext: guarantee 11 for WithContext on both read paths. When
// ctx ends the watcher stops as by Stop (its loop ends, its channel closes,
// it leaves Stats().Watchers) and Err() returns context.Cause(ctx); while
// ctx runs no goroutine waits for it.
func TestWithContext(t *testing.T) {
	for _, rp := range readPaths {
		t.Run(rp.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newB(t)
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				before := runtime.NumGoroutine()
				w := watch(t, b, broadcast.WithContext(ctx), broadcast.WithQueueLength(10))
				if got := runtime.NumGoroutine(); got != before {
					t.Errorf("goroutines: %d after Watch(WithContext), %d before: something waits for ctx", got, before)
				}
				got := reader(w, rp, 0)
				publish(t, b, 1, 2)
				synctest.Wait()
				if err := w.Err(); err != nil {
					t.Errorf("Err() while ctx runs = %v, want nil", err)
				}
				cancel(errGone)
				synctest.Wait()
				if err := w.Err(); !errors.Is(err, errGone) {
					t.Errorf("Err() after ctx ended = %v, want its cause %v", err, errGone)
				}
				vs := <-got // the loop ended
				if d := diff([]int{1, 2}, vs); d != "" {
					t.Errorf("read (-want +got):\n%s", d)
				}
				checkStats(t, b, broadcast.Stats{Published: 2, Watchers: 0})
				publish(t, b, 3) // reaches nobody, waits for nobody
			})
		})
	}
}

// TestWithContextReleasesBlockedPublish: a ctx that ends while a Publish
// waits for its full Block watcher releases that Publish, as Stop does.
func TestWithContextReleasesBlockedPublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newB(t)
		ctx, cancel := context.WithCancel(context.Background())
		w := watch(t, b, broadcast.WithContext(ctx), broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
		publish(t, b, 1)
		done := async(func() error { return b.Publish(2) })
		synctest.Wait()
		if _, ok := returned(done); ok {
			t.Fatal("Publish(2) returned with the Block watcher full")
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Publish(2) = %v, want nil once ctx ended", err)
		}
		if err := w.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err() = %v, want context.Canceled (the cause of a plain cancel)", err)
		}
	})
}

// TestWithContextDoneAlready: a ctx already done makes every Watch method
// return context.Cause(ctx) and register nothing.
func TestWithContextDoneAlready(t *testing.T) {
	b := newB(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errGone)
	if w, err := b.Watch(broadcast.WithContext(ctx)); w != nil || !errors.Is(err, errGone) {
		t.Errorf("Watch = (%v, %v), want (nil, %v)", w, err, errGone)
	}
	if w, err := b.WatchWithPrefix([]int{1}, broadcast.WithContext(ctx)); w != nil || !errors.Is(err, errGone) {
		t.Errorf("WatchWithPrefix = (%v, %v), want (nil, %v)", w, err, errGone)
	}
	checkStats(t, b, broadcast.Stats{})
}

// TestWithContextFirstCauseKept: Err() keeps the first cause: Stop before
// ctx ends leaves it nil, Shutdown before ctx ends leaves it ErrClosed, and
// no callback runs after Shutdown returned (goleak in TestMain).
func TestWithContextFirstCauseKept(t *testing.T) {
	t.Run("Stop first", func(t *testing.T) {
		b := newB(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		w := watch(t, b, broadcast.WithContext(ctx))
		w.Stop()
		cancel(errGone)
		if err := w.Err(); err != nil {
			t.Errorf("Err() = %v, want nil after Stop", err)
		}
	})
	t.Run("Shutdown first", func(t *testing.T) {
		b := newB(t)
		ctx, cancel := context.WithCancelCause(context.Background())
		w := watch(t, b, broadcast.WithContext(ctx))
		publish(t, b, 7)
		shutdown(t, b)
		cancel(errGone)
		if err := w.Err(); !errors.Is(err, broadcast.ErrClosed) {
			t.Errorf("Err() = %v, want ErrClosed (Shutdown came first)", err)
		}
		if d := diff([]int{7}, readPaths[0].take(t, w, -1)); d != "" {
			t.Errorf("values readable after Shutdown (-want +got):\n%s", d)
		}
	})
}

// TestContextOptionMisuse: WithContext(nil) and WithContext given to New
// panic with a "broadcast:" message.
func TestContextOptionMisuse(t *testing.T) {
	var nilCtx context.Context // the misuse under test
	for name, f := range map[string]func(){
		"WithContext(nil)":     func() { broadcast.WithContext(nilCtx) },
		"New(WithContext(..))": func() { broadcast.New[int](broadcast.WithContext(context.Background())) },
	} {
		msg, panicked := testutil.PanicMessage(f)
		if !panicked || !strings.HasPrefix(msg, "broadcast:") {
			t.Errorf("%s: panicked %v with %q, want a \"broadcast:\" panic", name, panicked, msg)
		}
	}
}
