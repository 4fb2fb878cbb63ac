package events_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/heraldgo/herald/events"
)

// logCapture is a slog.Handler that keeps every record, for asserting what
// the broadcaster reported.
type logCapture struct {
	mu   sync.Mutex
	recs []capturedRecord
}

type capturedRecord struct {
	level slog.Level
	msg   string
	attrs map[string]string
}

func (h *logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCapture) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *logCapture) WithGroup(string) slog.Handler            { return h }
func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	c := capturedRecord{level: r.Level, msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		flatten(c.attrs, "", a)
		return true
	})
	h.mu.Lock()
	h.recs = append(h.recs, c)
	h.mu.Unlock()
	return nil
}

func flatten(m map[string]string, prefix string, a slog.Attr) {
	if a.Value.Kind() == slog.KindGroup {
		for _, g := range a.Value.Group() {
			flatten(m, prefix+a.Key+".", g)
		}
		return
	}
	m[prefix+a.Key] = a.Value.String()
}

// all returns every record so far.
func (h *logCapture) all() []capturedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]capturedRecord(nil), h.recs...)
}

// find returns the records whose message contains substr.
func (h *logCapture) find(substr string) []capturedRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []capturedRecord
	for _, r := range h.recs {
		if strings.Contains(r.msg, substr) {
			out = append(out, r)
		}
	}
	return out
}

func (h *logCapture) logger() *slog.Logger { return slog.New(h) }

// newLogged returns a broadcaster whose reports go to a fresh capture.
func newLogged(opts ...events.Option) (*events.Broadcaster, *logCapture) {
	lc := &logCapture{}
	return events.NewBroadcaster(append([]events.Option{events.WithLogger(lc.logger())}, opts...)...), lc
}

// shutdown shuts b down and fails t on an error other than a LostError
// (the tests that lose events check their counts in Stats).
func shutdown(t testing.TB, b *events.Broadcaster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil && !errors.Is(err, events.ErrLost) {
		t.Fatalf("Shutdown: %v", err)
	}
}

var (
	pod  = events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-1", UID: "u1", APIVersion: "v1"}
	pod2 = events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web-2", UID: "u2", APIVersion: "v1"}
	src  = events.Source{Component: "kubelet", Host: "node-1"}
)

// newEvent builds an event as a Recorder would at t.
func newEvent(obj events.ObjectReference, typ, reason, msg string, t time.Time) *events.Event {
	ns := obj.Namespace
	if ns == "" {
		ns = "default"
	}
	return &events.Event{
		Name: obj.Name + "." + t.Format("150405.000000000"), Namespace: ns,
		InvolvedObject: obj, Type: typ, Reason: reason, Message: msg, Source: src,
		FirstTimestamp: t, LastTimestamp: t, Count: 1,
		ReportingController: src.Component, ReportingInstance: src.Host,
	}
}

// fakeClock is a manual clock for Correlator tests.
type fakeClock struct{ t time.Time }

func newClock() *fakeClock                          { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }
func (c *fakeClock) now() time.Time                 { return c.t }
func (c *fakeClock) step(d time.Duration) time.Time { c.t = c.t.Add(d); return c.t }
