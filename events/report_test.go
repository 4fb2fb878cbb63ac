package events

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// levelCapture records the level, message and "count" of every record.
type levelCapture struct {
	mu   sync.Mutex
	recs []levelRecord
}

type levelRecord struct {
	level slog.Level
	msg   string
	count uint64
}

func (h *levelCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *levelCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *levelCapture) WithGroup(string) slog.Handler            { return h }
func (h *levelCapture) Handle(_ context.Context, r slog.Record) error {
	rec := levelRecord{level: r.Level, msg: r.Message}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "count" {
			rec.count = a.Value.Uint64()
		}
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, rec)
	h.mu.Unlock()
	return nil
}

// TestReportLevels pins the level of each report (see report.go and
// doc.go): lost events are Warn or Error, the correlator's routine decisions
// Debug, and a flood of one cause is one record at once and one summary with
// the count at flush, not a record per event.
func TestReportLevels(t *testing.T) {
	want := map[cause]slog.Level{
		causeQueueFull:        slog.LevelWarn,
		causeClosed:           slog.LevelWarn,
		causeInvalid:          slog.LevelError,
		causeNoBroadcaster:    slog.LevelError,
		causeRejected:         slog.LevelError,
		causeRetriesExhausted: slog.LevelError,
		causeGaveUp:           slog.LevelError,
		causeSkipped:          slog.LevelDebug,
		causeAggregated:       slog.LevelDebug,
		causeStopped:          slog.LevelWarn,
		causeClockPanicked:    slog.LevelError,
		causeSinkFailing:      slog.LevelWarn,
	}
	if len(want) != int(nCauses) {
		t.Fatalf("%d causes have a wanted level, there are %d causes", len(want), nCauses)
	}
	for c, level := range want {
		h := &levelCapture{}
		r := reporter{logger: slog.New(h)}
		e := &Event{Type: Normal, Reason: "R", Message: "m"}
		for range 1000 {
			r.add(c, 1, e, nil)
		}
		r.flush()
		if len(h.recs) != 2 {
			t.Fatalf("cause %d: %d records for 1000 occurrences within %v, want 2 (the first, then a summary): %+v",
				c, len(h.recs), reportInterval, h.recs)
		}
		for i, n := range []uint64{1, 999} {
			if got := h.recs[i]; got.level != level || got.count != n || got.msg != causeInfo[c].msg {
				t.Errorf("cause %d, record %d: %+v, want level %v, count %d, message %q", c, i, got, level, n, causeInfo[c].msg)
			}
		}
	}
}

// TestOrphanRecorderReportsRateLimited: the Recorder of a zero Broadcaster
// reports at Error through slog.Default, not once per event.
func TestOrphanRecorderReportsRateLimited(t *testing.T) {
	orphanReports.flush() // what other tests left, to the default logger
	h := &levelCapture{}
	old := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(old) })
	r := (&Broadcaster{}).NewRecorder(Source{Component: "c"})
	for range 100 {
		r.Event(ObjectReference{Name: "x"}, Normal, "R", "m")
	}
	orphanReports.flush()
	h.mu.Lock()
	defer h.mu.Unlock()
	var total uint64
	for _, rec := range h.recs {
		if rec.level != slog.LevelError {
			t.Errorf("orphan report at %v, want Error", rec.level)
		}
		total += rec.count
	}
	if len(h.recs) > 2 || total != 100 {
		t.Errorf("%d records counting %d events, want at most 2 counting 100", len(h.recs), total)
	}
}

// TestReportTruncatesLongFields: a report of an invalid event whose message,
// type and object name are megabytes long is one short line that says how
// long each clipped field was, not a line as long as the event (an 8 MiB
// message once made one 8,388,886-byte line).
func TestReportTruncatesLongFields(t *testing.T) {
	var buf bytes.Buffer
	b := NewBroadcaster(WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	defer b.Shutdown(context.Background())
	huge := strings.Repeat("é", 4<<20) // 8 MiB, two bytes a rune
	b.NewRecorder(Source{Component: "c"}).Event(
		ObjectReference{Kind: "Pod", Namespace: "default", Name: "p/" + huge},
		"Bogus"+huge, "Reason", huge)
	out := buf.String()
	if len(out) > 16<<10 {
		t.Fatalf("a report of an invalid event wrote %d bytes; want at most 16 KiB", len(out))
	}
	if strings.Count(out, "\n") != 1 {
		t.Fatalf("want one report line, got %q", out)
	}
	for _, n := range []int{len(huge), len("Bogus" + huge), len("default/p/" + huge)} {
		if want := fmt.Sprintf("(truncated, %d bytes)", n); !strings.Contains(out, want) {
			t.Errorf("report does not say %q:\n%s", want, out)
		}
	}
	if !utf8.ValidString(out) {
		t.Errorf("a field was cut inside a rune: %q", out)
	}
}

// TestClip: short strings are kept whole; a long one keeps its first
// maxReportField bytes or fewer, cut at a rune boundary, and its length.
func TestClip(t *testing.T) {
	if s := strings.Repeat("a", maxReportField); clip(s) != s {
		t.Errorf("clip changed a string of exactly maxReportField bytes")
	}
	s := "a" + strings.Repeat("€", maxReportField) // 1 + 3*1024 bytes
	got := clip(s)
	want := s[:maxReportField-(maxReportField-1)%3] + fmt.Sprintf("…(truncated, %d bytes)", len(s))
	if got != want {
		t.Errorf("clip = %q…, want %q…", got[len(got)-40:], want[len(want)-40:])
	}
}
