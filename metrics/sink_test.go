package metrics_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
	"github.com/heraldgo/herald/metrics"
)

// TestSinkStats: two sinks on one broadcaster, one of which rejects every
// event; each sink's source reports its own counts, which differ from the
// broadcaster's sums.
func TestSinkStats(t *testing.T) {
	b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
	good := eventstest.NewFakeSink()
	bad := eventstest.NewFakeSink()
	bad.FailNext(eventstest.OpCreate, 100, events.ErrRejected)
	gst, err := b.StartRecordingToSink(good)
	if err != nil {
		t.Fatal(err)
	}
	bst, err := b.StartRecordingToSink(bad)
	if err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(events.Source{Component: "test"})
	for _, name := range []string{"a", "b", "c"} {
		rec.Event(events.ObjectReference{Kind: "Pod", Namespace: "default", Name: name}, events.Normal, "Started", "up")
	}
	if err := b.Shutdown(context.Background()); !errors.Is(err, events.ErrLost) {
		t.Fatalf("Shutdown: %v, want the rejected events reported lost", err)
	}
	g := metrics.SinkStats(b, gst).Stats()
	f := metrics.SinkStats(b, bst).Stats()
	if g.Written != 3 || g.Failed != 0 {
		t.Errorf("good sink: %+v, want 3 written, 0 failed", g)
	}
	if f.Written != 0 || f.Failed != 3 {
		t.Errorf("failing sink: %+v, want 0 written, 3 failed", f)
	}
	if all := b.Stats(); all.Written != 3 || all.Failed != 3 {
		t.Errorf("broadcaster: %+v, want the sums 3 written, 3 failed", all)
	}
	defer func() {
		if recover() == nil {
			t.Error("SinkStats(nil, nil) did not panic")
		}
	}()
	metrics.SinkStats(nil, nil)
}
