package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

var web = events.ObjectReference{Kind: "Pod", Namespace: "shop", Name: "web-0", APIVersion: "v1"}

// printSink is a Sink that prints what it is asked to store.
type printSink struct{}

func (printSink) Create(_ context.Context, e *events.Event) (*events.Event, error) {
	fmt.Printf("create %s %s %q count=%d\n", e.Type, e.Reason, e.Message, e.Count)
	return e, nil
}

func (printSink) Patch(_ context.Context, e *events.Event, p events.Patch) (*events.Event, error) {
	fmt.Printf("patch  %s %s %q count=%d\n", e.Type, e.Reason, p.Message, p.Count)
	return e, nil
}

// Recording to a sink: repeats become patches with growing counts, and the
// tenth distinct message of one reason starts an aggregate event.
func Example() {
	b := events.NewBroadcaster()
	if _, err := b.StartRecordingToSink(printSink{}); err != nil {
		panic(err)
	}
	rec := b.NewRecorder(events.Source{Component: "shop-controller"})

	for range 3 {
		rec.Event(web, events.Normal, "Pulled", "image pulled")
	}
	for i := 1; i <= 11; i++ {
		rec.Eventf(web, events.Warning, "Unhealthy", "probe failed: %d", i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil { // writes everything recorded
		panic(err)
	}
	st := b.Stats()
	fmt.Printf("recorded %d, written %d, aggregated %d\n", st.Recorded, st.Written, st.Aggregated)
	// Output:
	// create Normal Pulled "image pulled" count=1
	// patch  Normal Pulled "image pulled" count=2
	// patch  Normal Pulled "image pulled" count=3
	// create Warning Unhealthy "probe failed: 1" count=1
	// create Warning Unhealthy "probe failed: 2" count=1
	// create Warning Unhealthy "probe failed: 3" count=1
	// create Warning Unhealthy "probe failed: 4" count=1
	// create Warning Unhealthy "probe failed: 5" count=1
	// create Warning Unhealthy "probe failed: 6" count=1
	// create Warning Unhealthy "probe failed: 7" count=1
	// create Warning Unhealthy "probe failed: 8" count=1
	// create Warning Unhealthy "probe failed: 9" count=1
	// create Warning Unhealthy "(combined from similar events): probe failed: 10" count=1
	// patch  Warning Unhealthy "(combined from similar events): probe failed: 11" count=2
	// recorded 14, written 14, aggregated 2
}

// Recording to log/slog: one record per event, at the level given.
func ExampleBroadcaster_StartStructuredLogging() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // for a stable output
			}
			return a
		},
	}))
	b := events.NewBroadcaster(events.WithLogger(logger))
	if _, err := b.StartStructuredLogging(logger, slog.LevelInfo); err != nil {
		panic(err)
	}
	b.NewRecorder(events.Source{Component: "shop-controller"}).
		Event(web, events.Warning, "BackOff", "restarting failed container")
	_ = b.Shutdown(context.Background())
	// Output:
	// level=INFO msg="Event occurred" object=shop/web-0 fieldPath="" kind=Pod apiVersion=v1 type=Warning reason=BackOff message="restarting failed container"
}

// A custom key function: events with the same reason are similar across
// objects, so a failure that hits many objects becomes one aggregate event.
func ExampleCorrelatorOptions_keyFunc() {
	b := events.NewBroadcaster(events.WithCorrelatorOptions(events.CorrelatorOptions{
		MaxEvents: 3,
		KeyFunc: func(e *events.Event) (aggregateKey, localKey string) {
			return e.Source.Component + "/" + e.Reason, e.InvolvedObject.Namespace + "/" + e.InvolvedObject.Name
		},
		MessageFunc: func(e *events.Event) string { return "several pods: " + e.Message },
	}))
	if _, err := b.StartRecordingToSink(printSink{}); err != nil {
		panic(err)
	}
	rec := b.NewRecorder(events.Source{Component: "kubelet"})
	for i := range 5 {
		pod := events.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("web-%d", i)}
		rec.Event(pod, events.Warning, "FailedMount", "volume data not found")
	}
	_ = b.Shutdown(context.Background())
	// Output:
	// create Warning FailedMount "volume data not found" count=1
	// create Warning FailedMount "volume data not found" count=1
	// create Warning FailedMount "several pods: volume data not found" count=1
	// patch  Warning FailedMount "several pods: volume data not found" count=2
	// patch  Warning FailedMount "several pods: volume data not found" count=3
}

// Turning the spam filter off: by default a source may report 25 events
// about one object, then one per 5 minutes.
func ExampleCorrelatorOptions_spamFilterOff() {
	for _, burst := range []int{0, events.Disable} {
		b := events.NewBroadcaster(events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: burst}))
		sink := eventstest.NewFakeSink()
		if _, err := b.StartRecordingToSink(sink); err != nil {
			panic(err)
		}
		rec := b.NewRecorder(events.Source{Component: "shop-controller"})
		for i := range 40 {
			rec.Eventf(web, events.Normal, fmt.Sprintf("Step%d", i), "step %d done", i)
		}
		_ = b.Shutdown(context.Background())
		fmt.Printf("BurstSize %d: stored %d, skipped %d\n", burst, len(sink.Events()), b.Stats().Skipped)
	}
	// Output:
	// BurstSize 0: stored 25, skipped 15
	// BurstSize -1: stored 40, skipped 0
}

// reconcile is code under test: it takes a Recorder.
func reconcile(rec events.Recorder, replicas int) {
	if replicas < 0 {
		rec.Eventf(web, events.Warning, "InvalidSpec", "replicas must not be negative, got %d", replicas)
		return
	}
	rec.Event(web, events.Normal, "Synced", "synced")
}

// Testing with eventstest: a FakeRecorder keeps every event, never blocks,
// and has helpers to assert on what was recorded.
func Example_fakeRecorder() {
	rec := &eventstest.FakeRecorder{}
	reconcile(rec, -1)
	reconcile(rec, 2)
	// In a test: rec.Expect(t, "Warning InvalidSpec replicas must not be negative, got -1", "Normal Synced synced")
	fmt.Println(rec.Strings())
	// Output:
	// [Warning InvalidSpec replicas must not be negative, got -1 Normal Synced synced]
}

// Flush in a process that must know its events are stored before it goes
// on (a CLI that exits, a controller before a leader hand-off): it waits for
// what was recorded before it and stops nothing.
func ExampleBroadcaster_Flush() {
	b := events.NewBroadcaster()
	if _, err := b.StartRecordingToSink(printSink{}); err != nil {
		panic(err)
	}
	rec := b.NewRecorder(events.Source{Component: "shop-controller"})
	rec.Event(web, events.Normal, "Scaled", "scaled to 3 replicas")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.Flush(ctx); err != nil { // a LostError if events were lost
		panic(err)
	}
	fmt.Println("flushed; still recording")
	rec.Event(web, events.Normal, "Scaled", "scaled to 3 replicas")
	if err := b.Shutdown(ctx); err != nil {
		panic(err)
	}
	// Output:
	// create Normal Scaled "scaled to 3 replicas" count=1
	// flushed; still recording
	// patch  Normal Scaled "scaled to 3 replicas" count=2
}

// slowSink stores events in 2 ms per call, as an API server might.
type slowSink struct{ stored atomic.Int64 }

func (s *slowSink) Create(_ context.Context, e *events.Event) (*events.Event, error) {
	time.Sleep(2 * time.Millisecond)
	s.stored.Add(1)
	return e, nil
}

func (s *slowSink) Patch(_ context.Context, e *events.Event, _ events.Patch) (*events.Event, error) {
	time.Sleep(2 * time.Millisecond)
	s.stored.Add(1)
	return e, nil
}

// A storm of events about many objects, written to a slow store with up to
// 32 calls in flight; the events about each object are still written one
// at a time, in order. The queue is long enough for the burst.
func ExampleWithSinkConcurrency() {
	b := events.NewBroadcaster(events.WithSinkConcurrency(32), events.WithQueueLength(5000))
	sink := &slowSink{}
	if _, err := b.StartRecordingToSink(sink); err != nil {
		panic(err)
	}
	rec := b.NewRecorder(events.Source{Component: "node-controller"})
	for i := range 2000 {
		pod := events.ObjectReference{Kind: "Pod", Namespace: "shop", Name: fmt.Sprintf("web-%d", i)}
		rec.Event(pod, events.Warning, "NodeNotReady", "node is not ready")
	}
	// About 130 ms here where one call at a time takes 4 s (see
	// bench/eventsbench, BenchmarkSlowSink).
	if err := b.Shutdown(context.Background()); err != nil {
		panic(err)
	}
	fmt.Printf("stored %d events\n", sink.stored.Load())
	// Output:
	// stored 2000 events
}

// The README's quick start: a recorder writing to a sink (here an in-memory
// one); three occurrences become one event counted three times.
func Example_quickStart() {
	b := events.NewBroadcaster()
	sink := eventstest.NewFakeSink() // in memory; a real sink writes to an API server
	b.StartRecordingToSink(sink)
	rec := b.NewRecorder(events.Source{Component: "demo"})
	pod := events.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0"}
	for range 3 {
		rec.Event(pod, events.Warning, "BackOff", "restarting container")
	}
	fmt.Println(b.Shutdown(context.Background())) // <nil>: everything written
	e := sink.Events()[0]
	fmt.Println(len(sink.Events()), e.Reason, e.Count) // 1 BackOff 3: one event, counted 3 times
	// Output:
	// <nil>
	// 1 BackOff 3
}
