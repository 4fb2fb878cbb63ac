package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
)

// v1FakeSink stores events.k8s.io Events and fails the test if it is
// called concurrently.
type v1FakeSink struct {
	t       *testing.T
	in      atomic.Int32
	mu      sync.Mutex
	created []*eventsv1.Event
	patches []string
}

func (s *v1FakeSink) enter() func() {
	if s.in.Add(1) > 1 {
		s.t.Error("sink called concurrently")
	}
	return func() { s.in.Add(-1) }
}

func (s *v1FakeSink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	defer s.enter()()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, e.DeepCopy())
	return e, nil
}

func (s *v1FakeSink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	return e, nil
}

func (s *v1FakeSink) Patch(_ context.Context, e *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	defer s.enter()()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patches = append(s.patches, e.Name+" "+string(data))
	return e, nil
}

func (s *v1FakeSink) snapshot() ([]*eventsv1.Event, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*eventsv1.Event(nil), s.created...), append([]string(nil), s.patches...)
}

var quietEvents = k8s.WithEventsOptions(events.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))

// TestEventBroadcasterSeries: the first occurrence is created with the
// fields client-go sets; the second makes it a series (count 2 patched at
// once); later ones are written within SeriesFlushInterval, and the last
// at Shutdown, so the last count written is the number of occurrences.
func TestEventBroadcasterSeries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &v1FakeSink{t: t}
		b := k8s.NewEventBroadcaster(sink, quietEvents)
		defer b.Shutdown()
		if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec := b.NewRecorder(scheme.Scheme, "ctrl")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u"}}
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}}
		rec.Eventf(p, n, corev1.EventTypeWarning, "Failed", "Scheduling", "try %d", 1)
		synctest.Wait()
		rec.Eventf(p, n, corev1.EventTypeWarning, "Failed", "Scheduling", "try %d", 2)
		synctest.Wait()
		c, patches := sink.snapshot()
		if len(c) != 1 || len(patches) != 1 {
			t.Fatalf("after 2: %d creates, patches %q", len(c), patches)
		}
		e := c[0]
		if e.Note != "try 1" || e.Action != "Scheduling" || e.Reason != "Failed" || e.Type != "Warning" ||
			e.ReportingController != "ctrl" || e.Regarding.Name != "p" || e.Related == nil || e.Related.Name != "node1" ||
			e.Namespace != "ns" || e.EventTime.IsZero() || e.Series != nil || len(e.Annotations) != 0 {
			t.Errorf("created %+v", e)
		}
		for i := 3; i <= 5; i++ {
			rec.Eventf(p, n, corev1.EventTypeWarning, "Failed", "Scheduling", "try %d", i)
		}
		synctest.Wait()
		if _, patches = sink.snapshot(); len(patches) != 1 {
			t.Fatalf("before the flush interval: patches %q", patches)
		}
		time.Sleep(k8s.SeriesFlushInterval)
		synctest.Wait()
		if _, patches = sink.snapshot(); len(patches) != 2 || !contains(patches[1], `"count":5`) {
			t.Fatalf("after the flush interval: patches %q", patches)
		}
		rec.Eventf(p, n, corev1.EventTypeWarning, "Failed", "Scheduling", "try %d", 6)
		b.Shutdown()
		if _, patches = sink.snapshot(); len(patches) != 3 || !contains(patches[2], `"count":6`) {
			t.Fatalf("after Shutdown: patches %q", patches)
		}
		// Beyond the window, an isomorphic event starts anew.
	})
}

// TestEventBroadcasterWindow: an isomorphic event more than SeriesWindow
// after the previous one is a new event, not a series.
func TestEventBroadcasterWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &v1FakeSink{t: t}
		b := k8s.NewEventBroadcaster(sink, quietEvents)
		defer b.Shutdown()
		b.StartRecordingToSinkWithContext(context.Background())
		rec := b.NewRecorder(scheme.Scheme, "ctrl")
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
		rec.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "one")
		time.Sleep(k8s.SeriesWindow + time.Second)
		rec.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "two")
		b.Shutdown()
		c, patches := sink.snapshot()
		if len(c) != 2 || len(patches) != 0 {
			t.Fatalf("%d creates, patches %q", len(c), patches)
		}
	})
}

// TestEventBroadcasterContext: WithContext's end shuts the broadcaster down.
func TestEventBroadcasterContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		sink := &v1FakeSink{t: t}
		b := k8s.NewEventBroadcaster(sink, k8s.WithContext(ctx), quietEvents)
		b.StartRecordingToSinkWithContext(context.Background())
		cancel()
		synctest.Wait()
		if err := b.StartRecordingToSinkWithContext(context.Background()); err == nil {
			t.Fatal("StartRecordingToSinkWithContext after the context ended: nil error")
		}
	})
}

// TestEventBroadcasterNotConcurrent: a user's sink is called one at a
// time, under many objects at once.
func TestEventBroadcasterNotConcurrent(t *testing.T) {
	sink := &v1FakeSink{t: t}
	b := k8s.NewEventBroadcaster(sink, quietEvents)
	b.StartRecordingToSinkWithContext(context.Background())
	rec := b.NewRecorder(scheme.Scheme, "ctrl")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p" + string(rune('a'+g))}}
				rec.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "n %d", i)
			}
		})
	}
	wg.Wait()
	b.Shutdown()
	c, patches := sink.snapshot()
	if len(c) != 8 || len(patches) != 8*2 {
		t.Fatalf("%d creates, %d patches, want 8 and 16 (count 2 and the last count)", len(c), len(patches))
	}
}

func contains(s, sub string) bool { return len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0) }

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

// gatedV1Sink holds every write until open is closed.
type gatedV1Sink struct {
	v1FakeSink
	entered chan struct{} // gets a value at each Create
	open    chan struct{}
}

func (s *gatedV1Sink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	select {
	case s.entered <- struct{}{}:
	default:
	}
	<-s.open
	return s.v1FakeSink.Create(ctx, e)
}

// TestEventBroadcasterHoldsABurst: the default queue of NewEventBroadcaster
// (DefaultEventsV1QueueLength) holds a burst of 20,000 distinct events
// recorded while the sink writes nothing, as tools/events (whose Eventf
// waits, and whose goroutine per event holds it) stores them; the first
// event beyond it is counted in Dropped, not lost silently.
func TestEventBroadcasterHoldsABurst(t *testing.T) {
	sink := &gatedV1Sink{v1FakeSink: v1FakeSink{t: t}, entered: make(chan struct{}, 1), open: make(chan struct{})}
	b := k8s.NewEventBroadcaster(sink, quietEvents).(*k8s.EventBroadcaster)
	b.StartRecordingToSinkWithContext(context.Background())
	rec := b.NewRecorder(scheme.Scheme, "ctrl")
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	// The sink's worker takes the first event and waits in Create with
	// it: the queue then holds DefaultEventsV1QueueLength more.
	n := k8s.DefaultEventsV1QueueLength + 1
	rec.Eventf(p, nil, corev1.EventTypeNormal, "R0", "A", "n 0")
	<-sink.entered
	for i := 1; i <= n; i++ {
		rec.Eventf(p, nil, corev1.EventTypeNormal, fmt.Sprint("R", i), "A", "n %d", i)
	}
	if st := b.Stats(); st.Dropped != 1 {
		t.Errorf("after %d events with the sink blocked: Dropped = %d, want 1 (the one beyond the queue)", n+1, st.Dropped)
	}
	close(sink.open)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.ShutdownContext(ctx); !errors.Is(err, events.ErrLost) {
		t.Errorf("ShutdownContext = %v, want an error wrapping events.ErrLost (one event dropped)", err)
	}
	if c, _ := sink.snapshot(); len(c) != n {
		t.Errorf("%d events written, want %d", len(c), n)
	}
}
