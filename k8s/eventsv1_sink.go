package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/heraldgo/herald/events"
)

// v1Sink is the events.Sink of one StartRecordingToSinkWithContext: it
// writes herald events as events.k8s.io/v1 Events to the broadcaster's
// clientevents.EventSink, as client-go's recordEvent does, and keeps the
// series. The events.Broadcaster calls it per regarding object one event at
// a time, in order, so a series' writes follow its Create.
type v1Sink struct {
	eb *EventBroadcaster

	mu     sync.Mutex
	series map[string]*v1Series // by series key (annSeries)
	prunes int
}

// v1Series is one series as this sink knows it (mu).
type v1Series struct {
	ev      *eventsv1.Event // the first occurrence, as created
	count   int32           // occurrences seen
	written int32           // the count last written
	last    time.Time       // lastObservedTime
}

func newV1Sink(eb *EventBroadcaster) *v1Sink {
	return &v1Sink{eb: eb, series: map[string]*v1Series{}}
}

func (s *v1Sink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	if key, ok := e.Annotations[annFlush]; ok {
		return nil, s.flush(ctx, key)
	}
	ev := toEventsV1(e)
	s.mu.Lock()
	s.prune(e.LastTimestamp)
	s.series[e.Annotations[annSeries]] = &v1Series{ev: ev.DeepCopy(), count: 1, written: 1, last: e.LastTimestamp}
	s.mu.Unlock()
	return nil, s.eb.classify(ev, s.create(ctx, ev))
}

func (s *v1Sink) Patch(ctx context.Context, old *events.Event, p events.Patch) (*events.Event, error) {
	key := old.Annotations[annSeries]
	s.mu.Lock()
	se := s.series[key]
	if se == nil { // forgotten (or its Create went elsewhere): from the event itself
		se = &v1Series{ev: toEventsV1(old), written: 1}
		s.series[key] = se
	}
	se.count, se.last = p.Count, p.LastTimestamp
	if p.Count != 2 {
		// Counted; written by the series' flush (SeriesFlushInterval).
		s.mu.Unlock()
		return nil, nil
	}
	ev := seriesEvent(se)
	s.mu.Unlock()
	err := s.writeSeries(ctx, ev)
	if err == nil {
		s.written(key, 2)
	}
	return nil, s.eb.classify(ev, err)
}

// flush writes the count of the series key if it has occurrences not yet
// written.
func (s *v1Sink) flush(ctx context.Context, key string) error {
	s.mu.Lock()
	se := s.series[key]
	if se == nil || se.count <= se.written {
		s.mu.Unlock()
		return nil
	}
	ev := seriesEvent(se)
	s.mu.Unlock()
	err := s.writeSeries(ctx, ev)
	if err == nil {
		s.written(key, ev.Series.Count)
	}
	return s.eb.classify(ev, err)
}

func (s *v1Sink) written(key string, n int32) {
	s.mu.Lock()
	if se := s.series[key]; se != nil && se.written < n {
		se.written = n
	}
	s.mu.Unlock()
}

// prune forgets, every so many Creates, the series quiet for longer than
// the window and fully written (mu).
func (s *v1Sink) prune(now time.Time) {
	s.prunes++
	if s.prunes < 1024 || s.prunes < len(s.series)/2 {
		return
	}
	s.prunes = 0
	for k, se := range s.series {
		if se.written >= se.count && now.Sub(se.last) > 2*SeriesWindow {
			delete(s.series, k)
		}
	}
}

// seriesEvent is the series' event with its current count (mu).
func seriesEvent(se *v1Series) *eventsv1.Event {
	ev := se.ev.DeepCopy()
	ev.Series = &eventsv1.EventSeries{Count: se.count, LastObservedTime: metav1.MicroTime{Time: se.last}}
	return ev
}

func (s *v1Sink) create(ctx context.Context, ev *eventsv1.Event) error {
	ev.ResourceVersion = ""
	_, err := s.eb.sink.Create(ctx, ev)
	return err
}

// writeSeries patches the series as client-go does (the two-way strategic
// merge patch from the event without its series), and creates it when it
// is gone. A Create that finds it exists patches again, once: client-go
// retries that case.
func (s *v1Sink) writeSeries(ctx context.Context, ev *eventsv1.Event) error {
	data, err := seriesPatch(ev)
	if err != nil {
		return fmt.Errorf("%w: k8s: %w", events.ErrRejected, err)
	}
	for try := 0; ; try++ {
		_, err = s.eb.sink.Patch(ctx, ev, data)
		if !apierrors.IsNotFound(err) {
			return err
		}
		c := ev.DeepCopy()
		err = s.create(ctx, c)
		if !apierrors.IsAlreadyExists(err) || try > 0 {
			return err
		}
	}
}

// seriesPatch is client-go's createPatchBytesForSeries.
func seriesPatch(ev *eventsv1.Event) ([]byte, error) {
	old := ev.DeepCopy()
	old.Series = nil
	oldData, err := json.Marshal(old)
	if err != nil {
		return nil, err
	}
	newData, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldData, newData, eventsv1.Event{})
}

// classify maps a sink's error for the events.Broadcaster, as NewSink's
// classify does. A namespace being deleted refuses every event: that is
// expected, so it is counted (EventStats.Terminating) and logged at Debug
// only, as client-go's recorder does at V(5), and not reported as a loss.
func (eb *EventBroadcaster) classify(ev *eventsv1.Event, err error) error {
	if err == nil {
		return nil
	}
	if apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause) {
		eb.terminating.Add(1)
		eb.logger.V(5).Info("Server rejected event: its namespace is being deleted (will not retry!)",
			"namespace", ev.Namespace, "event", ev.Name, "err", err)
		return nil
	}
	return classify(err)
}

// toEventsV1 returns the events.k8s.io/v1 Event of a herald event that a
// v1Recorder recorded: the reserved annotations become Action and Related.
func toEventsV1(e *events.Event) *eventsv1.Event {
	var ann map[string]string
	for k, v := range e.Annotations {
		switch k {
		case annAction, annRelated, annSeries, annFlush, annNote:
			continue
		}
		if ann == nil {
			ann = make(map[string]string, len(e.Annotations))
		}
		ann[k] = v
	}
	var rel *corev1.ObjectReference
	if data, ok := e.Annotations[annRelated]; ok {
		rel = new(corev1.ObjectReference)
		if json.Unmarshal([]byte(data), rel) != nil {
			rel = nil
		}
	}
	return &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ValidEventName(e.Name),
			Namespace:   e.Namespace,
			Annotations: ann,
		},
		EventTime:           metav1.MicroTime{Time: e.FirstTimestamp},
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
		Action:              e.Annotations[annAction],
		Reason:              e.Reason,
		Regarding:           ToObjectReference(e.InvolvedObject),
		Related:             rel,
		Note:                e.Annotations[annNote],
		Type:                e.Type,
	}
}
