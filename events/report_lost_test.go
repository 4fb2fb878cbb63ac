package events

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"unicode/utf8"
)

// hugeRejectingSink refuses every event for good with an error whose text
// echoes the whole message, as an API server's error may.
type hugeRejectingSink struct{}

func (hugeRejectingSink) Create(_ context.Context, e *Event) (*Event, error) {
	return nil, fmt.Errorf("%w: event %q is too large", ErrRejected, e.Message)
}

func (hugeRejectingSink) Patch(_ context.Context, e *Event, _ Patch) (*Event, error) {
	return nil, fmt.Errorf("%w: event %q is too large", ErrRejected, e.Message)
}

// TestReportOfLostEventTruncatesLongFields: a report of a lost event (here
// one that the sink rejects, with an error that quotes its 8 MiB message)
// is one short line that says how long the clipped event message and error
// text were; the event itself is counted as lost.
func TestReportOfLostEventTruncatesLongFields(t *testing.T) {
	var buf bytes.Buffer
	b := NewBroadcaster(WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	if _, err := b.StartRecordingToSink(hugeRejectingSink{}); err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("x", 8<<20)
	b.NewRecorder(Source{Component: "c"}).Event(
		ObjectReference{Kind: "Pod", Namespace: "default", Name: "p"}, Warning, "Reason", huge)
	err := b.Shutdown(context.Background())
	var lost *LostError
	if !errors.As(err, &lost) || lost.Failed != 1 {
		t.Fatalf("Shutdown = %v, want a *LostError with Failed 1", err)
	}
	out := buf.String()
	if len(out) > 16<<10 {
		t.Fatalf("the report of a rejected event wrote %d bytes; want at most 16 KiB", len(out))
	}
	if !strings.Contains(out, "sink rejected event") {
		t.Fatalf("no rejection report in %q", out)
	}
	if want := fmt.Sprintf("(truncated, %d bytes)", len(huge)); !strings.Contains(out, want) {
		t.Errorf("the report does not say %q for the event's message:\n%s", want, out)
	}
	errText := fmt.Sprintf("%v: event %q is too large", ErrRejected, huge)
	if want := fmt.Sprintf("(truncated, %d bytes)", len(errText)); !strings.Contains(out, want) {
		t.Errorf("the report does not say %q for the error's text:\n%s", want, out)
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if len(line) > 8<<10 {
			t.Errorf("a report line is %d bytes long, want at most 8 KiB: %.200q…", len(line), line)
		}
	}
	if !utf8.ValidString(out) {
		t.Errorf("a field was cut inside a rune")
	}
}
