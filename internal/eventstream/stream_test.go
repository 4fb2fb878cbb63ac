package eventstream_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/internal/eventstream"
)

func TestMixedStream(t *testing.T) {
	a := eventstream.MixedStream(5000, 7)
	if diff := cmp.Diff(a, eventstream.MixedStream(5000, 7)); diff != "" {
		t.Fatalf("not reproducible:\n%s", diff)
	}
	if cmp.Equal(a, eventstream.MixedStream(5000, 8)) {
		t.Fatal("seed ignored")
	}
	for _, tc := range []struct {
		name     string
		s        []events.Event
		repeats  float64 // the share asked for
		objects  int     // at least this many distinct objects
		messages int     // and messages
	}{
		{"MixedStream", a, 0.83, 300, 40},
		{"MixedStreamRepeating 0.4", eventstream.MixedStreamRepeating(5000, 7, 0.4), 0.4, 700, 40},
		{"MixedStreamRepeating 0", eventstream.MixedStreamRepeating(5000, 7, 0), 0, 800, 40},
	} {
		objects := map[string]bool{}
		messages := map[string]bool{}
		repeats := 0
		for i, e := range tc.s {
			if e.Type != events.Normal && e.Type != events.Warning || e.Count != 1 || e.Namespace == "" {
				t.Fatalf("%s: event %d malformed: %+v", tc.name, i, e)
			}
			if !e.LastTimestamp.Equal(eventstream.StreamStart.Add(time.Duration(i) * eventstream.StreamStep)) {
				t.Fatalf("%s: event %d at %v", tc.name, i, e.LastTimestamp)
			}
			objects[e.InvolvedObject.Name] = true
			messages[e.Message] = true
			// An exact repeat is the same as one of the last 64 events but
			// for its name and timestamps.
			for j := max(0, i-64); j < i; j++ {
				if sameButWhen(&tc.s[j], &e) {
					repeats++
					break
				}
			}
		}
		// New events repeat a recent one by chance now and then (half of
		// them are about a hot hundred objects): a few points more.
		share := float64(repeats) / float64(len(tc.s))
		if share < tc.repeats-0.03 || share > tc.repeats+0.06 {
			t.Errorf("%s: %.1f%% exact repeats, want %.0f%%", tc.name, 100*share, 100*tc.repeats)
		}
		if len(objects) < tc.objects || len(messages) < tc.messages {
			t.Errorf("%s: %d objects, %d messages: not mixed enough", tc.name, len(objects), len(messages))
		}
	}
}

// sameButWhen reports whether a and b differ only in name and timestamps.
func sameButWhen(a, b *events.Event) bool {
	return a.InvolvedObject == b.InvolvedObject && a.Namespace == b.Namespace &&
		a.Type == b.Type && a.Reason == b.Reason && a.Message == b.Message &&
		a.Source == b.Source && a.Count == b.Count && len(a.Annotations) == 0 && len(b.Annotations) == 0 &&
		a.ResourceVersion == b.ResourceVersion && a.ReportingController == b.ReportingController &&
		a.ReportingInstance == b.ReportingInstance
}
