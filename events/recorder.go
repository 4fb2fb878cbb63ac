package events

import (
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// Recorder records events about objects on behalf of one [Source]. Get one
// from [Broadcaster.NewRecorder], or use eventstest.FakeRecorder in tests.
//
// A Recorder never blocks its caller and never panics, also after the
// broadcaster's Shutdown: an event that cannot be queued (a full queue,
// Shutdown) or has an invalid type is dropped, counted in [Stats] and
// reported to the broadcaster's logger.
type Recorder interface {
	// Event records an event about object. eventtype is [Normal] or
	// [Warning]; reason is short, UpperCamelCase and machine-readable;
	// message is for people. The event's namespace is the object's, or
	// "default".
	Event(object ObjectReference, eventtype, reason, message string)
	// Eventf is Event with the message formatted by fmt.Sprintf.
	Eventf(object ObjectReference, eventtype, reason, messageFmt string, args ...any)
	// AnnotatedEventf is Eventf with annotations on the event; the map is
	// copied.
	AnnotatedEventf(object ObjectReference, annotations map[string]string, eventtype, reason, messageFmt string, args ...any)
}

type recorder struct {
	b      *Broadcaster
	source Source
}

func (r *recorder) Event(object ObjectReference, eventtype, reason, message string) {
	r.generate(object, nil, eventtype, reason, message)
}

func (r *recorder) Eventf(object ObjectReference, eventtype, reason, messageFmt string, args ...any) {
	r.generate(object, nil, eventtype, reason, sprintf(messageFmt, args))
}

func (r *recorder) AnnotatedEventf(object ObjectReference, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.generate(object, annotations, eventtype, reason, sprintf(messageFmt, args))
}

// sprintf is fmt.Sprintf, skipped when there is nothing to format.
func sprintf(format string, args []any) string {
	if len(args) == 0 && strings.IndexByte(format, '%') < 0 {
		return format
	}
	return fmt.Sprintf(format, args...)
}

func (r *recorder) generate(object ObjectReference, annotations map[string]string, eventtype, reason, message string) {
	b := r.b
	if b == nil || b.bc == nil {
		// A Recorder of a nil or zero Broadcaster: still no panic.
		orphanReports.add(causeNoBroadcaster, 1,
			&Event{InvolvedObject: object, Type: eventtype, Reason: reason, Message: message, Source: r.source}, nil)
		return
	}
	if !validType(eventtype) {
		b.invalid.Add(1)
		e := &Event{InvolvedObject: object, Type: eventtype, Reason: reason, Message: message, Source: r.source}
		b.rep.add(causeInvalid, 1, e, nil, slog.String("type", eventtype))
		return
	}
	now := b.now()
	ns := object.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	e := &Event{
		Name:                eventName(object.Name, b.uniqueNanos(now)),
		Namespace:           ns,
		InvolvedObject:      object,
		Reason:              reason,
		Message:             message,
		Type:                eventtype,
		Source:              r.source,
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Annotations:         cloneAnnotations(annotations),
		ReportingController: r.source.Component,
		ReportingInstance:   r.source.Host,
	}
	if b.closed.Load() {
		b.dropClosed(e)
		return
	}
	// TryPublish never waits: every watcher is a broadcast.Drop watcher,
	// which drops (and counts) an event it has no room for.
	ok, err := b.bc.TryPublish(e)
	if err != nil || !ok {
		b.dropClosed(e)
		return
	}
	b.recorded.Add(1)
	b.noticeDrops(e)
}

// uniqueNanos returns t's unix nanoseconds, or one more than the last value
// it returned if that is not larger: events recorded within one clock tick
// (a coarse clock, a fake one) still get distinct names, which a sink would
// otherwise refuse as already existing.
func (b *Broadcaster) uniqueNanos(t time.Time) int64 {
	n := t.UnixNano()
	for {
		last := b.lastNanos.Load()
		if n <= last {
			n = last + 1
		}
		if b.lastNanos.CompareAndSwap(last, n) {
			return n
		}
	}
}

func (b *Broadcaster) dropClosed(e *Event) {
	b.droppedClosed.Add(1)
	b.rep.add(causeClosed, 1, e, nil)
}
