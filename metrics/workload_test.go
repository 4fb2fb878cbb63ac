package metrics_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/metrics"
)

// workload is a deterministic run whose every figure is known:
//
//   - broadcaster "orders": 10 values published to a Drop watcher of queue
//     length 3 ("lossy": keeps 1-3, drops 7) and a DropOldest watcher of
//     queue length 2 ("latest": keeps 9-10, drops 8), neither read: published
//     10, dropped 15, watchers 2;
//   - a fake watcher "fake" of broadcaster "other" (not added itself) with
//     Len and Err: dropped 5, queued 2, ended 1;
//   - event broadcaster "recorder": two valid events and one of an invalid
//     type, handled by one watcher, then Shutdown: recorded 2, invalid 1,
//     handled 2, the rest 0.
type workload struct {
	c      *metrics.Collector
	b      *broadcast.Broadcaster[int]
	lossy  *broadcast.Watcher[int]
	latest *broadcast.Watcher[int]
}

func newWorkload(t *testing.T) *workload {
	t.Helper()
	b := broadcast.New[int]()
	t.Cleanup(func() {
		if err := b.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	lossy, err := b.Watch(broadcast.WithPolicy(broadcast.Drop), broadcast.WithQueueLength(3))
	if err != nil {
		t.Fatal(err)
	}
	latest, err := b.Watch(broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(2))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 10; i++ {
		if err := b.Publish(i); err != nil {
			t.Fatal(err)
		}
	}

	eb := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
	if _, err := eb.StartEventWatcher(func(*events.Event) {}); err != nil {
		t.Fatal(err)
	}
	rec := eb.NewRecorder(events.Source{Component: "test"})
	obj := events.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-1"}
	rec.Event(obj, events.Normal, "Started", "started")
	rec.Event(obj, events.Warning, "BackOff", "backing off")
	rec.Event(obj, "Bogus", "Nope", "not recorded: invalid type")
	// The invalid event is reported as lost (events.ErrLost), as it must be.
	if err := eb.Shutdown(context.Background()); !errors.Is(err, events.ErrLost) {
		t.Fatal(err)
	}

	c := metrics.NewCollector()
	c.Add("orders", b)
	c.AddWatcher("orders", "lossy", lossy)
	c.AddWatcher("orders", "latest", latest)
	c.AddWatcher("other", "fake", &fakeWatcher{dropped: 5, len: 2, err: errors.New("evicted")})
	c.AddEvents("recorder", eb)
	return &workload{c: c, b: b, lossy: lossy, latest: latest}
}

// fakeWatcher has the optional Len and Err that broadcast.Watcher gains
// with resume and eviction.
type fakeWatcher struct {
	dropped uint64
	len     int
	err     error
}

func (f *fakeWatcher) Dropped() uint64 { return f.dropped }
func (f *fakeWatcher) Len() int        { return f.len }
func (f *fakeWatcher) Err() error      { return f.err }

// hasLen reports whether a real broadcast watcher has Len yet, so that the
// tests expect its queued series exactly when the watcher offers it.
func hasLen(w any) bool {
	_, ok := w.(interface{ Len() int })
	return ok
}

func hasErr(w any) bool {
	_, ok := w.(interface{ Err() error })
	return ok
}

// panicSource is a broken Source.
type panicSource struct{}

func (panicSource) Stats() broadcast.Stats { panic("boom") }

// nil2events is an EventsSource reporting zero counts.
type nil2events struct{}

func (nil2events) Stats() events.Stats { return events.Stats{} }
