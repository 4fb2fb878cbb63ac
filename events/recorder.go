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
// Shutdown) or is invalid (see [Event.Validate]: an API server would not
// store it) is dropped, counted in [Stats] and reported to the
// broadcaster's logger.
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
	if err := validate(&object, eventtype, annotations); err != nil {
		b.invalid.Add(1)
		e := &Event{InvolvedObject: object, Type: eventtype, Reason: reason, Message: message, Source: r.source}
		b.rep.add(causeInvalid, 1, e, err, slog.String("type", eventtype))
		return
	}
	now := b.stamp()
	ns := object.Namespace
	if ns == "" {
		ns = defaultNamespace
	}
	r2 := b.free.get()
	if r2 == nil {
		r2 = new(recorded)
	}
	*r2 = recorded{nanos: b.uniqueNanos(now), Event: Event{
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
	}}
	if b.closed.Load() {
		b.dropClosed(&r2.Event)
		return
	}
	// TryPublish never waits: every watcher is a broadcast.Drop watcher,
	// which drops (and counts) an event it has no room for. Under pubMu no
	// consumer registers, so consumers is the number of those that can
	// receive r2.
	b.pubMu.RLock()
	if r2.shared = b.consumers != 1; r2.shared {
		r2.name()
	}
	ok, err := b.bc.TryPublish(r2)
	published := err == nil && ok
	if published {
		// Counted under pubMu, so that a Stop can tell how many events
		// were published to its watcher (see worker.Stop).
		b.recorded.Add(1)
	}
	b.pubMu.RUnlock()
	if !published {
		b.dropClosed(&r2.Event) // not published: still ours
		return
	}
	// From here on r2 may belong to its consumer: do not read it.
	b.noticeDrops(object, eventtype, reason, message)
}

// recorded is what a Recorder publishes: the event, and whether a consumer
// must copy it before changing it or handing it out.
//
// Every watcher and sink gets its own copy (the package doc's guarantee 6), but when a
// single consumer is registered nobody else will ever see the event, so
// that consumer may use it as its copy: a sink worker correlates it in
// place, a handler gets it as it is. The Recorder does not read it after
// publishing it. A sink worker that does not hand it to its sink (skipped,
// or replaced by an aggregate) gives it back for Recorders to reuse, unless
// the Correlator's option functions, which are given it, are set (see
// freeList).
type recorded struct {
	Event
	// shared means the event may reach more than one consumer: each
	// copies it first, and the Recorder named it before publishing it.
	// Otherwise the consumer names it when it needs the name (see name):
	// a sink that patches an earlier occurrence never does, which saves
	// making the name for half the events of the mixed stream.
	shared bool
	// nanos are the unix nanoseconds in the event's name, unique among
	// those the Broadcaster made (see uniqueNanos). A sink that aggregates
	// the event names the new aggregate event with them, since the event
	// itself is then not created: so an aggregate's name is unique too.
	nanos int64
}

// name gives the event its name, "<object name>.<hex nanos>", if it has
// none yet.
func (r *recorded) name() {
	if r.Name == "" {
		r.Name = eventName(r.InvolvedObject.Name, r.nanos)
	}
}

// stamp reads b's clock for a new event. A CorrelatorOptions.Now that
// panics does not reach the Recorder's caller (a Recorder never panics):
// the event is stamped with time.Now instead, and the panic is reported.
// The default clock cannot panic, and costs no deferred call.
func (b *Broadcaster) stamp() (t time.Time) {
	if b.cfg.corr.Now == nil {
		return now()
	}
	defer func() {
		if r := recover(); r != nil {
			t = time.Now()
			b.rep.add(causeClockPanicked, 1, nil, nil, slog.String("panic", fmt.Sprint(r)))
		}
	}()
	return b.now()
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
