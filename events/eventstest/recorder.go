package eventstest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgo/herald/events"
)

// FakeRecorder is an [events.Recorder] that appends every event to a slice,
// for tests. It never blocks, however many events it gets, and is safe for
// concurrent use. The zero value is ready to use.
//
// Like a real Recorder it does not record an invalid event (see
// [events.Event.Validate]: a type other than [events.Normal] or
// [events.Warning], or what no API server stores); it keeps those apart,
// in Invalid.
type FakeRecorder struct {
	// Source is set on every event; set it before the first event.
	Source events.Source
	// Now stamps events; nil means time.Now. Set it before the first event.
	Now func() time.Time

	mu      sync.Mutex
	events  []events.Event
	invalid []events.Event
}

var _ events.Recorder = (*FakeRecorder)(nil)

// Event implements [events.Recorder].
func (f *FakeRecorder) Event(object events.ObjectReference, eventtype, reason, message string) {
	f.record(object, nil, eventtype, reason, message)
}

// Eventf implements [events.Recorder].
func (f *FakeRecorder) Eventf(object events.ObjectReference, eventtype, reason, messageFmt string, args ...any) {
	f.record(object, nil, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

// AnnotatedEventf implements [events.Recorder].
func (f *FakeRecorder) AnnotatedEventf(object events.ObjectReference, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	f.record(object, annotations, eventtype, reason, fmt.Sprintf(messageFmt, args...))
}

func (f *FakeRecorder) record(object events.ObjectReference, annotations map[string]string, eventtype, reason, message string) {
	now := time.Now
	if f.Now != nil {
		now = f.Now
	}
	t := now()
	ns := object.Namespace
	if ns == "" {
		ns = "default"
	}
	e := events.Event{
		Name:                fmt.Sprintf("%s.%x", object.Name, t.UnixNano()),
		Namespace:           ns,
		InvolvedObject:      object,
		Reason:              reason,
		Message:             message,
		Type:                eventtype,
		Source:              f.Source,
		FirstTimestamp:      t,
		LastTimestamp:       t,
		Count:               1,
		ReportingController: f.Source.Component,
		ReportingInstance:   f.Source.Host,
	}
	if annotations != nil {
		e.Annotations = maps.Clone(annotations)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e.Validate() != nil {
		f.invalid = append(f.invalid, e)
		return
	}
	f.events = append(f.events, e)
}

// Events returns a copy of the events recorded so far, in order.
func (f *FakeRecorder) Events() []events.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneEvents(f.events)
}

// Invalid returns the events not recorded because they were invalid.
func (f *FakeRecorder) Invalid() []events.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	return cloneEvents(f.invalid)
}

// Len returns the number of events recorded so far.
func (f *FakeRecorder) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.events)
}

// Reset forgets every event.
func (f *FakeRecorder) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.events, f.invalid = nil, nil
}

// Strings returns each recorded event as "Type Reason Message", the format of
// client-go's FakeRecorder.
func (f *FakeRecorder) Strings() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.events))
	for i := range f.events {
		out[i] = eventString(&f.events[i])
	}
	return out
}

// Expect fails t unless the events recorded so far are exactly want, each
// "Type Reason Message", in order.
func (f *FakeRecorder) Expect(t testing.TB, want ...string) {
	t.Helper()
	got := f.Strings()
	if !slices.Equal(got, want) {
		t.Errorf("recorded events:\n%s\nwant:\n%s", lines(got), lines(want))
	}
}

// ExpectContains fails t unless some recorded event has type eventtype,
// reason reason and a message containing substr; it returns the first such
// event.
func (f *FakeRecorder) ExpectContains(t testing.TB, eventtype, reason, substr string) events.Event {
	t.Helper()
	for _, e := range f.Events() {
		if e.Type == eventtype && e.Reason == reason && strings.Contains(e.Message, substr) {
			return e
		}
	}
	t.Errorf("no recorded event %q %q with message containing %q; recorded:\n%s",
		eventtype, reason, substr, lines(f.Strings()))
	return events.Event{}
}

// ExpectNone fails t if any event was recorded.
func (f *FakeRecorder) ExpectNone(t testing.TB) {
	t.Helper()
	if got := f.Strings(); len(got) > 0 {
		t.Errorf("want no events, recorded:\n%s", lines(got))
	}
}

func eventString(e *events.Event) string {
	return e.Type + " " + e.Reason + " " + e.Message
}

func lines(s []string) string {
	if len(s) == 0 {
		return "\t(none)"
	}
	return "\t" + strings.Join(s, "\n\t")
}

func cloneEvents(in []events.Event) []events.Event {
	out := make([]events.Event, len(in))
	for i, e := range in {
		out[i] = *e.Clone()
	}
	return out
}
