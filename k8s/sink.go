package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/events"
)

// NewSink writes herald events as core/v1 Events through a clientset
// (client.CoreV1(), say): a new event with Create, an event that occurred
// again with Patch, as the same strategic merge patch of count,
// lastTimestamp and message that client-go's recorder sends. The event goes
// to its own namespace, under [ValidEventName] of its name.
//
// Errors are classified for the [events.Broadcaster] (see [events.Sink]),
// as client-go's recorder classifies them, each wrapping the client's
// error:
//
//   - NotFound from Patch: [events.ErrNotFound] (the event was deleted; it is
//     created anew);
//   - AlreadyExists: [events.ErrAlreadyExists] (recorded, not retried);
//   - a namespace being deleted: [events.ErrRejectedExpected] (counted,
//     logged at Debug only, as client-go logs it at V(5));
//   - every other API status and
//     errors building the request: [events.ErrRejected] (never retried);
//   - anything else (the server cannot be reached, a connection broke):
//     returned as it is, and retried.
//
// One deliberate difference: the statuses that ask the client to come back
// later (429 Too Many Requests, 503 Service Unavailable, 504 Gateway
// Timeout and the server timeout), which an API server that is starting or
// overloaded answers, are retried like transport errors; client-go drops
// the event.
//
// A nil c panics.
func NewSink(c typedcorev1.EventsGetter) events.Sink {
	if c == nil {
		panic("k8s: NewSink: nil EventsGetter")
	}
	return &clientSink{c: c}
}

type clientSink struct{ c typedcorev1.EventsGetter }

func (s *clientSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	ev := ToCoreV1(e)
	ev.Name = ValidEventName(ev.Name)
	out, err := s.c.Events(ev.Namespace).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		return nil, classify(err)
	}
	return FromCoreV1(out), nil
}

func (s *clientSink) Patch(ctx context.Context, old *events.Event, p events.Patch) (*events.Event, error) {
	data, err := PatchData(p)
	if err != nil {
		return nil, fmt.Errorf("%w: k8s: %w", events.ErrRejected, err)
	}
	out, err := s.c.Events(old.Namespace).Patch(ctx, ValidEventName(old.Name), types.StrategicMergePatchType, data, metav1.PatchOptions{})
	if err != nil {
		return nil, classifyPatch(err)
	}
	return FromCoreV1(out), nil
}

// epochJSON is how client-go's patch base has lastTimestamp: time.Unix(0, 0).
var epochJSON, _ = json.Marshal(metav1.NewTime(time.Unix(0, 0)))

// PatchData returns the strategic merge patch that client-go's
// EventCorrelator sends for an event that occurred again: the two-way merge
// patch from the event with count 0, lastTimestamp 1970-01-01T00:00:00Z and
// no message to the event with p's count, lastTimestamp and message. So
// the keys are count, lastTimestamp and message, each left out when p's
// value equals that base, in that order, the timestamp in RFC 3339 at
// second precision, as the API server stores it.
func PatchData(p events.Patch) ([]byte, error) {
	var parts struct {
		Count         *int32          `json:"count,omitempty"`
		LastTimestamp json.RawMessage `json:"lastTimestamp,omitempty"`
		Message       *string         `json:"message,omitempty"`
	}
	if p.Count != 0 {
		parts.Count = &p.Count
	}
	ts, err := json.Marshal(metav1.NewTime(p.LastTimestamp))
	if err != nil {
		return nil, err
	}
	if string(ts) != string(epochJSON) {
		parts.LastTimestamp = ts
	}
	if p.Message != "" {
		parts.Message = &p.Message
	}
	return json.Marshal(parts)
}

// classify maps a client error to herald's sink errors (see NewSink).
func classify(err error) error {
	if err == nil {
		return nil
	}
	var rce *rest.RequestConstructionError
	if errors.As(err, &rce) {
		return fmt.Errorf("%w: %w", events.ErrRejected, err)
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return err // transport: retried
	}
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// Expected while a namespace is deleted: client-go logs it at V(5).
		return fmt.Errorf("%w: %w", events.ErrRejectedExpected, err)
	case apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%w: %w", events.ErrAlreadyExists, err)
	case apierrors.IsTooManyRequests(err), apierrors.IsServiceUnavailable(err),
		apierrors.IsServerTimeout(err), apierrors.IsTimeout(err):
		return err // "come back later": retried (client-go drops these)
	}
	return fmt.Errorf("%w: %w", events.ErrRejected, err)
}

// classifyPatch is classify, with NotFound meaning the event is gone.
func classifyPatch(err error) error {
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("%w: %w", events.ErrNotFound, err)
	}
	return classify(err)
}

// recordSink adapts client-go's record.EventSink to herald's events.Sink,
// for StartRecordingToSink. It sends what client-go's recorder sends; for
// an *EventSinkImpl it calls the context-taking methods of its clientset,
// so that Shutdown's deadline ends a call in progress.
type recordSink struct {
	s    record.EventSink
	impl typedcorev1.EventInterface // the clientset of an *EventSinkImpl, else nil
}

func newRecordSink(s record.EventSink) *recordSink {
	rs := &recordSink{s: s}
	if impl, ok := s.(*typedcorev1.EventSinkImpl); ok && impl != nil && impl.Interface != nil {
		rs.impl = impl.Interface
	}
	return rs
}

func (s *recordSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	ev := ToCoreV1(e)
	ev.Name = ValidEventName(ev.Name)
	var out *corev1.Event
	var err error
	if s.impl != nil {
		out, err = s.impl.CreateWithEventNamespaceWithContext(ctx, ev)
	} else {
		out, err = s.s.Create(ev)
	}
	if err != nil {
		return nil, classify(err)
	}
	return fromSink(out), nil
}

func (s *recordSink) Patch(ctx context.Context, old *events.Event, p events.Patch) (*events.Event, error) {
	data, err := PatchData(p)
	if err != nil {
		return nil, fmt.Errorf("%w: k8s: %w", events.ErrRejected, err)
	}
	// As client-go does, the sink is given the whole event, patch
	// applied, and the patch.
	ev := ToCoreV1(old)
	ev.Name = ValidEventName(ev.Name)
	var out *corev1.Event
	if s.impl != nil {
		out, err = s.impl.PatchWithEventNamespaceWithContext(ctx, ev, data)
	} else {
		out, err = s.s.Patch(ev, data)
	}
	if err != nil {
		return nil, classifyPatch(err)
	}
	return fromSink(out), nil
}

// fromSink converts what a user's EventSink returned; one that returns
// nil, nil says nothing about the stored event.
func fromSink(out *corev1.Event) *events.Event {
	if out == nil {
		return nil
	}
	return FromCoreV1(out)
}
