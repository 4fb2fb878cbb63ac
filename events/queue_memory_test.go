package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"testing"

	"github.com/heraldgo/herald/events"
)

// holdSink holds every call until release is closed.
type holdSink struct{ release chan struct{} }

func (s holdSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	<-s.release
	return e, nil
}

func (s holdSink) Patch(ctx context.Context, e *events.Event, _ events.Patch) (*events.Event, error) {
	<-s.release
	return e, nil
}

// BenchmarkQueuedEventMemory reports what an event waiting in a sink's
// queue costs in heap (B/queued-event), the figure that sizes
// WithQueueLength for a storm: 20,000 distinct events over 500 objects
// recorded while the sink holds its first call, heap measured after GC
// before recording and with the queue full; and the goroutines of the
// pipeline at rest (goroutines-at-rest) for one sink with the given
// concurrency.
func BenchmarkQueuedEventMemory(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run(fmt.Sprintf("concurrency=%d", n), func(b *testing.B) {
			const queued = 20000
			var perEvent, atRest float64
			for b.Loop() {
				g0 := runtime.NumGoroutine()
				br := events.NewBroadcaster(events.WithQueueLength(queued), events.WithSinkConcurrency(n),
					events.WithLogger(slog.New(slog.DiscardHandler)))
				sink := holdSink{release: make(chan struct{})}
				if _, err := br.StartRecordingToSink(sink); err != nil {
					b.Fatal(err)
				}
				atRest = float64(runtime.NumGoroutine() - g0)
				rec := br.NewRecorder(events.Source{Component: "storm"})
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				for i := range queued {
					obj := events.ObjectReference{Kind: "Pod", Namespace: "default", Name: fmt.Sprint("pod-", i%500), UID: fmt.Sprint("uid-", i%500)}
					rec.Eventf(obj, events.Warning, "FailedPull", "pulling image %d failed", i)
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				perEvent = float64(after.HeapAlloc-before.HeapAlloc) / queued
				close(sink.release)
				if err := br.Shutdown(context.Background()); err != nil {
					b.Logf("Shutdown: %v", err)
				}
			}
			b.ReportMetric(perEvent, "B/queued-event")
			b.ReportMetric(atRest, "goroutines-at-rest")
		})
	}
}
