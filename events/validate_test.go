package events_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

// validationCases are events that no API server would store, each changing
// one field of a valid event.
var validationCases = []struct {
	name        string
	obj         events.ObjectReference
	typ, reason string
	annotations map[string]string
}{
	{"type", pod, "Error", "R", nil},
	{"upper-case namespace", events.ObjectReference{Kind: "Pod", Namespace: "NS", Name: "a"}, events.Normal, "R", nil},
	{"namespace with a dot", events.ObjectReference{Kind: "Pod", Namespace: "a.b", Name: "a"}, events.Normal, "R", nil},
	{"namespace ending with '-'", events.ObjectReference{Kind: "Pod", Namespace: "ns-", Name: "a"}, events.Normal, "R", nil},
	{"namespace of 64 bytes", events.ObjectReference{Kind: "Pod", Namespace: strings.Repeat("n", 64), Name: "a"}, events.Normal, "R", nil},
	{"annotation key with a space", pod, events.Normal, "R", map[string]string{"a b": "v"}},
	{"annotation key with an empty name", pod, events.Normal, "R", map[string]string{"example.com/": "v"}},
	{"annotation key with a bad prefix", pod, events.Normal, "R", map[string]string{"Example_com/a": "v"}},
	{"annotation name of 64 bytes", pod, events.Normal, "R", map[string]string{strings.Repeat("a", 64): "v"}},
	{"annotations over 256 KiB", pod, events.Normal, "R", map[string]string{"a": strings.Repeat("v", 256<<10)}},
}

// validCases are accepted, each at a limit or one that client-go's recorder
// gets stored (an object with no name, or a name an event name cannot
// hold: the sink generates a valid event name).
var validCases = []struct {
	name        string
	obj         events.ObjectReference
	annotations map[string]string
}{
	{"no object name", events.ObjectReference{Kind: "Pod", Namespace: "ns"}, nil},
	{"slash in object name", events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "a/b"}, nil},
	{"percent in object name", events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "a%2f"}, nil},
	{"cluster-scoped object with a colon", events.ObjectReference{Kind: "ClusterRole", Name: "system:controller:x"}, nil},
	{"no namespace", events.ObjectReference{Kind: "Node", Name: "n1"}, nil},
	{"namespace of 63 bytes", events.ObjectReference{Kind: "Pod", Namespace: strings.Repeat("n", 63), Name: "a"}, nil},
	{"object name with dots and capitals", events.ObjectReference{Kind: "X", Namespace: "ns", Name: "A.b_c:d"}, nil},
	{"annotations", pod, map[string]string{"a": "", "example.com/Key_1.x": "v", strings.Repeat("a", 63): "v"}},
	{"annotations of 256 KiB", pod, map[string]string{"a": strings.Repeat("v", 256<<10-1)}},
}

// TestValidate: Event.Validate refuses each invalid event with an error
// wrapping ErrInvalid, and accepts the valid ones.
func TestValidate(t *testing.T) {
	for _, c := range validationCases {
		e := newEvent(c.obj, c.typ, c.reason, "m", validateAt)
		e.Annotations = c.annotations
		if err := e.Validate(); !errors.Is(err, events.ErrInvalid) {
			t.Errorf("%s: Validate() = %v, want an error wrapping ErrInvalid", c.name, err)
		}
	}
	for _, c := range validCases {
		e := newEvent(c.obj, events.Normal, "R", "m", validateAt)
		e.Annotations = c.annotations
		if err := e.Validate(); err != nil {
			t.Errorf("%s: Validate() = %v, want nil", c.name, err)
		}
	}
	e := newEvent(pod, events.Normal, "", "m", validateAt)
	if err := e.Validate(); err != nil {
		t.Errorf("empty reason: Validate() = %v, want nil (client-go's recorder gets it stored)", err)
	}
	e.Name = "a/b.1"
	if err := e.Validate(); err != nil {
		t.Errorf("name with '/': Validate() = %v, want nil (a Kubernetes sink generates a valid name)", err)
	}
	e = newEvent(pod, events.Normal, "R", "m", validateAt)
	e.Namespace = "other"
	if err := e.Validate(); !errors.Is(err, events.ErrInvalid) {
		t.Errorf("namespace not the object's: Validate() = %v, want ErrInvalid", err)
	}
}

// TestRecorderDropsInvalid: a Recorder records none of the invalid events:
// each is counted in Stats.Invalid, reported (rate-limited: one record,
// then a summary at Shutdown) and reaches neither sink nor watcher; the
// valid ones are recorded. The FakeRecorder sorts them the same way.
func TestRecorderDropsInvalid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		sink := eventstest.NewFakeSink()
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		fake := &eventstest.FakeRecorder{Source: src}
		for _, c := range validationCases {
			r.AnnotatedEventf(c.obj, c.annotations, c.typ, c.reason, "m")
			fake.AnnotatedEventf(c.obj, c.annotations, c.typ, c.reason, "m")
		}
		for _, c := range validCases {
			r.AnnotatedEventf(c.obj, c.annotations, events.Normal, "R", "%s", c.name)
			fake.AnnotatedEventf(c.obj, c.annotations, events.Normal, "R", "%s", c.name)
		}
		shutdown(t, b)
		st := b.Stats()
		if st.Invalid != uint64(len(validationCases)) || st.Recorded != uint64(len(validCases)) || st.Written != st.Recorded {
			t.Errorf("Stats %+v: want Invalid %d, Recorded and Written %d", st, len(validationCases), len(validCases))
		}
		if n := len(sink.Events()); n != len(validCases) {
			t.Errorf("sink stored %d events, want %d", n, len(validCases))
		}
		recs := logs.find("invalid event")
		var total uint64
		for _, rec := range recs {
			total += parseCount(t, rec.attrs["count"])
		}
		if len(recs) != 2 || total != uint64(len(validationCases)) || !strings.Contains(recs[0].attrs["err"], "neither Normal nor Warning") {
			t.Errorf("reports %+v: want 2 (the first, with its error, then a summary) counting %d", recs, len(validationCases))
		}
		if len(fake.Invalid()) != len(validationCases) || fake.Len() != len(validCases) {
			t.Errorf("FakeRecorder: %d invalid, %d recorded; want %d and %d", len(fake.Invalid()), fake.Len(), len(validationCases), len(validCases))
		}
	})
}

var validateAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// parseCount parses a report's count attribute.
func parseCount(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("count %q: %v", s, err)
	}
	return n
}
