package k8stest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"
)

// API says through which of client-go's APIs an [Event] was recorded.
type API string

const (
	// CoreV1 is k8s.io/client-go/tools/record (core/v1 Events).
	CoreV1 API = "core/v1"
	// EventsV1 is k8s.io/client-go/tools/events (events.k8s.io/v1 Events).
	EventsV1 API = "events.k8s.io/v1"
)

// Event is one call of a recorder, as the code under test made it.
type Event struct {
	// API is the recorder's: CoreV1 or EventsV1.
	API API
	// Object is a deep copy of the object the event is about (tools/events'
	// regarding), taken when it was recorded; nil if the caller gave nil.
	Object runtime.Object
	// Regarding is Object's reference, resolved through the Recorder's
	// Scheme as client-go's recorders resolve it; zero if it cannot be
	// (client-go would log that and record nothing: see RefErr).
	Regarding corev1.ObjectReference
	// RefErr is why Object's reference could not be resolved; nil if it was.
	RefErr error
	// Related is a deep copy of tools/events' related object (nil for
	// CoreV1 and when none was given), and RelatedRef its reference.
	Related    runtime.Object
	RelatedRef *corev1.ObjectReference
	// Type, Reason and Action (EventsV1 only) as given; Message is the note
	// (or message) formatted with its arguments, as client-go formats it
	// (Event, with no arguments, is not formatted).
	Type, Reason, Action, Message string
	// Annotations is a copy of AnnotatedEventf's annotations; nil otherwise.
	Annotations map[string]string
	// Time is when it was recorded (time.Now).
	Time time.Time
	// Source is the name of the view that recorded it (a source component,
	// a reporting controller: see CoreV1Recorder.Named and
	// EventsV1Recorder.Named); "" for an unnamed view.
	Source string
}

// String is the event as client-go's record.FakeRecorder writes it to its
// channel: "<type> <reason> <message>".
func (e Event) String() string { return e.Type + " " + e.Reason + " " + e.Message }

// Recorder keeps every event recorded through its views, [Recorder.CoreV1]
// and [Recorder.EventsV1], in order. The zero value is ready to use; it is
// safe for concurrent use, never blocks a recorder's caller (it keeps every
// event, in memory), and starts no goroutine.
type Recorder struct {
	// Scheme resolves objects' references; nil means client-go's
	// scheme.Scheme. Set it before the first event.
	Scheme *runtime.Scheme

	mu      sync.Mutex
	events  []Event
	changed chan struct{} // closed and replaced at each event; nil until a Wait
}

// CoreV1 returns a client-go tools/record recorder (record.EventRecorder,
// record.EventRecorderLogger) that records into r.
func (r *Recorder) CoreV1() *CoreV1Recorder { return &CoreV1Recorder{r: r} }

// EventsV1 returns a client-go tools/events recorder
// (events.EventRecorder, EventRecorderLogger and AnnotatedEventRecorder,
// so controller-runtime's recorder.EventRecorder) that records into r.
func (r *Recorder) EventsV1() *EventsV1Recorder { return &EventsV1Recorder{r: r} }

// Events returns a copy of the events recorded so far, in order.
func (r *Recorder) Events() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// Len is the number of events recorded so far.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// Reset forgets the events recorded so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = nil
}

// Wait returns the events recorded so far once there are at least n, or
// ctx.Err() (with the events so far) if ctx ends first. It starts no
// goroutine.
func (r *Recorder) Wait(ctx context.Context, n int) ([]Event, error) {
	for {
		r.mu.Lock()
		if len(r.events) >= n {
			defer r.mu.Unlock()
			return slices.Clone(r.events), nil
		}
		if r.changed == nil {
			r.changed = make(chan struct{})
		}
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return r.Events(), ctx.Err()
		}
	}
}

func (r *Recorder) add(e Event) {
	e.Time = time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
}

func (r *Recorder) scheme() *runtime.Scheme {
	if r.Scheme != nil {
		return r.Scheme
	}
	return scheme.Scheme
}

// object fills e's Object and Regarding from obj.
func (r *Recorder) object(e *Event, obj runtime.Object) {
	if obj == nil {
		e.RefErr = errors.New("k8stest: nil object")
		return
	}
	e.Object = obj.DeepCopyObject()
	ref, err := r.ref(obj)
	if err != nil {
		e.RefErr = err
		return
	}
	e.Regarding = *ref
}

// ref is reference.GetReference through r's scheme, which panics on a typed
// nil pointer: the fake records that event too, with the panic as RefErr.
func (r *Recorder) ref(obj runtime.Object) (ref *corev1.ObjectReference, err error) {
	defer func() {
		if p := recover(); p != nil {
			ref, err = nil, fmt.Errorf("k8stest: resolving %T: panic: %v", obj, p)
		}
	}()
	return reference.GetReference(r.scheme(), obj)
}

// CoreV1Recorder is the tools/record view of a [Recorder]. It never blocks.
type CoreV1Recorder struct {
	r    *Recorder
	name string
}

var _ record.EventRecorderLogger = (*CoreV1Recorder)(nil)

// Named returns a view that sets each event's Source to name.
func (c *CoreV1Recorder) Named(name string) *CoreV1Recorder {
	return &CoreV1Recorder{r: c.r, name: name}
}

// Event implements record.EventRecorder.
func (c *CoreV1Recorder) Event(object runtime.Object, eventtype, reason, message string) {
	c.record(object, nil, eventtype, reason, message)
}

// Eventf implements record.EventRecorder.
func (c *CoreV1Recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	c.record(object, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf implements record.EventRecorder.
func (c *CoreV1Recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	c.record(object, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// WithLogger implements record.EventRecorderLogger: it returns c (a
// Recorder logs nothing).
func (c *CoreV1Recorder) WithLogger(klog.Logger) record.EventRecorderLogger { return c }

func (c *CoreV1Recorder) record(object runtime.Object, annotations map[string]string, eventtype, reason, message string) {
	e := Event{API: CoreV1, Type: eventtype, Reason: reason, Message: message, Annotations: maps.Clone(annotations), Source: c.name}
	c.r.object(&e, object)
	c.r.add(e)
}

// EventsV1Recorder is the tools/events view of a [Recorder]. It never
// blocks.
type EventsV1Recorder struct {
	r    *Recorder
	name string
}

var (
	_ clientevents.EventRecorderLogger    = (*EventsV1Recorder)(nil)
	_ clientevents.AnnotatedEventRecorder = (*EventsV1Recorder)(nil)
)

// Named returns a view that sets each event's Source to name.
func (v *EventsV1Recorder) Named(name string) *EventsV1Recorder {
	return &EventsV1Recorder{r: v.r, name: name}
}

// Eventf implements events.EventRecorder.
func (v *EventsV1Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	v.record(regarding, related, nil, eventtype, reason, action, fmt.Sprintf(note, args...))
}

// AnnotatedEventf implements events.AnnotatedEventRecorder.
func (v *EventsV1Recorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	v.record(regarding, related, annotations, eventtype, reason, action, fmt.Sprintf(note, args...))
}

// WithLogger implements events.EventRecorderLogger: it returns v (a
// Recorder logs nothing).
func (v *EventsV1Recorder) WithLogger(klog.Logger) clientevents.EventRecorderLogger { return v }

func (v *EventsV1Recorder) record(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, message string) {
	e := Event{API: EventsV1, Type: eventtype, Reason: reason, Action: action, Message: message, Annotations: maps.Clone(annotations), Source: v.name}
	v.r.object(&e, regarding)
	if related != nil {
		e.Related = related.DeepCopyObject()
		if ref, err := v.r.ref(related); err == nil {
			e.RelatedRef = ref
		}
	}
	v.r.add(e)
}
