package eventsbench

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/events"
)

// slowCall is how long each call of the slow sinks takes: about what a
// Create or Patch of an Event costs against an API server that is not
// overloaded, without one.
const slowCall = 2 * time.Millisecond

// Burst of BenchmarkSlowSink: slowBurst events about slowObjects objects
// (two reasons each, so every event is a Create: no repeat, no aggregate,
// nothing for the spam filter), recorded as fast as possible. It fits
// client-go's queue of 1000, so that client-go drops nothing and both write
// every event.
const (
	slowBurst   = 1000
	slowObjects = 500
)

// slowCounter counts the writes of a burst and closes done at the last.
type slowCounter struct {
	writes atomic.Int64
	want   int64
	done   chan struct{}
	peak   atomic.Int64 // most goroutines in the process seen by a write
}

func newSlowCounter(want int) *slowCounter {
	return &slowCounter{want: int64(want), done: make(chan struct{})}
}

func (c *slowCounter) wrote() {
	if g := int64(runtime.NumGoroutine()); g > c.peak.Load() {
		c.peak.Store(g) // racy max: a sample, not an exact figure
	}
	time.Sleep(slowCall)
	if c.writes.Add(1) == c.want {
		close(c.done)
	}
}

type slowK8sSink struct{ c *slowCounter }

func (s slowK8sSink) Create(e *corev1.Event) (*corev1.Event, error) { s.c.wrote(); return e, nil }
func (s slowK8sSink) Update(e *corev1.Event) (*corev1.Event, error) { s.c.wrote(); return e, nil }
func (s slowK8sSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.c.wrote()
	return e, nil
}

type slowHeraldSink struct{ c *slowCounter }

func (s slowHeraldSink) Create(_ context.Context, e *events.Event) (*events.Event, error) {
	s.c.wrote()
	return e, nil
}

func (s slowHeraldSink) Patch(_ context.Context, e *events.Event, _ events.Patch) (*events.Event, error) {
	s.c.wrote()
	return e, nil
}

func slowObject(i int) events.ObjectReference {
	return events.ObjectReference{Kind: "Pod", Namespace: fmt.Sprintf("ns-%d", i%20),
		Name: fmt.Sprintf("pod-%d", i), UID: fmt.Sprintf("uid-%d", i), APIVersion: "v1"}
}

// BenchmarkSlowSink: a burst of 1000 events, recorded as fast as possible,
// written to a sink whose every call takes 2 ms (no server): written events
// per second, from the first Recorder call to the last write, client-go's
// record.EventBroadcaster (one write at a time) against herald with
// WithSinkConcurrency(n) and a queue long enough for the burst. One op is
// one burst, through a new broadcaster.
func BenchmarkSlowSink(b *testing.B) {
	objs := make([]events.ObjectReference, slowObjects)
	refs := make([]corev1.ObjectReference, slowObjects)
	for i := range objs {
		objs[i] = slowObject(i)
		refs[i] = k8sRef(objs[i])
	}
	reasons := [2]string{"Scheduled", "Pulling"}
	b.Run("k8s", func(b *testing.B) {
		var elapsed time.Duration
		var peak int64
		for b.Loop() {
			c := newSlowCounter(slowBurst)
			eb := record.NewBroadcaster()
			eb.StartRecordingToSink(slowK8sSink{c})
			rec := eb.NewRecorder(k8sruntime.NewScheme(), corev1.EventSource{Component: "bench"})
			start := time.Now()
			for i := range slowBurst {
				rec.Event(&refs[i%slowObjects], corev1.EventTypeNormal, reasons[i/slowObjects%2], "m")
			}
			<-c.done
			elapsed += time.Since(start)
			peak = max(peak, c.peak.Load())
			eb.Shutdown()
		}
		b.ReportMetric(float64(b.N*slowBurst)/elapsed.Seconds(), "written/s")
		b.ReportMetric(float64(peak), "goroutines-peak")
	})
	for _, n := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("herald-n%d", n), func(b *testing.B) {
			var elapsed time.Duration
			var peak int64
			for b.Loop() {
				c := newSlowCounter(slowBurst)
				eb := events.NewBroadcaster(events.WithSinkConcurrency(n), events.WithQueueLength(slowBurst),
					events.WithLogger(slog.New(slog.DiscardHandler)))
				if _, err := eb.StartRecordingToSink(slowHeraldSink{c}); err != nil {
					b.Fatal(err)
				}
				rec := eb.NewRecorder(events.Source{Component: "bench"})
				start := time.Now()
				for i := range slowBurst {
					rec.Event(objs[i%slowObjects], events.Normal, reasons[i/slowObjects%2], "m")
				}
				<-c.done
				elapsed += time.Since(start)
				peak = max(peak, c.peak.Load())
				if err := eb.Shutdown(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*slowBurst)/elapsed.Seconds(), "written/s")
			b.ReportMetric(float64(peak), "goroutines-peak")
		})
	}
}
