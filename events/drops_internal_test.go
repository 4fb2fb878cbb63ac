package events

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
)

// queueFullCounter sums the counts of the "queue full" reports.
type queueFullCounter struct {
	mu sync.Mutex
	n  int64
}

func (h *queueFullCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *queueFullCounter) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *queueFullCounter) WithGroup(string) slog.Handler            { return h }
func (h *queueFullCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message != causeInfo[causeQueueFull].msg {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "count" {
			h.mu.Lock()
			h.n += int64(a.Value.Uint64())
			h.mu.Unlock()
		}
		return true
	})
	return nil
}

// TestUnnoticedDropsReportedAtExit: drops that no Recorder reported (one
// that scanned the live workers just before this one was on the list, or
// just after Stop took it off) are reported by the worker as it exits.
// Here the events are published straight to the broadcast, so no
// Recorder looks at all.
func TestUnnoticedDropsReportedAtExit(t *testing.T) {
	h := &queueFullCounter{}
	b := NewBroadcaster(WithQueueLength(1), WithLogger(slog.New(h)))
	release := make(chan struct{})
	if _, err := b.StartEventWatcher(func(*Event) { <-release }); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		r := &recorded{Event: Event{InvolvedObject: ObjectReference{Name: "x"}, Type: Normal, Reason: "R", Message: "m"}}
		if ok, err := b.bc.TryPublish(r); !ok || err != nil {
			t.Fatalf("TryPublish: %v, %v", ok, err)
		}
	}
	close(release)
	if err := b.Shutdown(context.Background()); !errors.Is(err, ErrLost) {
		t.Fatalf("Shutdown: %v, want a LostError (events were dropped)", err)
	}
	st := b.Stats()
	if st.Dropped < 3 {
		t.Fatalf("Stats %+v: want at least 3 of 5 events dropped (queue length 1)", st)
	}
	if h.n != int64(st.Dropped) {
		t.Errorf("queue-full reports count %d drops, Stats.Dropped is %d", h.n, st.Dropped)
	}
}

// TestDropsClaimedDuringShutdownReported: a Recorder that has claimed
// drops when Shutdown flushes the reports still gets them reported. Its
// count used to be held back by the rate limit (a report of that cause
// was due no sooner than 10 s after the last) with no flush to come.
func TestDropsClaimedDuringShutdownReported(t *testing.T) {
	h := &queueFullCounter{}
	b := NewBroadcaster(WithQueueLength(1), WithLogger(slog.New(h)))
	release, entered := make(chan struct{}), make(chan struct{}, 1)
	if _, err := b.StartEventWatcher(func(*Event) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-release
	}); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(Source{Component: "c"})
	r.Event(ObjectReference{Name: "x"}, Normal, "R", "m")
	<-entered // the handler holds the first event; the queue is empty
	// One queued, two dropped and reported at once: the next report of
	// the cause is due in 10 s.
	for range 3 {
		r.Event(ObjectReference{Name: "x"}, Normal, "R", "m")
	}
	if h.n == 0 {
		t.Fatal("the first drops were not reported at once")
	}
	// The next drop is claimed, then Shutdown runs to the end before the
	// Recorder reports it.
	testHookDropsClaimed = func() {
		testHookDropsClaimed = nil
		close(release)
		if err := b.Shutdown(context.Background()); !errors.Is(err, ErrLost) {
			t.Errorf("Shutdown: %v, want a LostError (events were dropped)", err)
		}
	}
	defer func() { testHookDropsClaimed = nil }()
	r.Event(ObjectReference{Name: "x"}, Normal, "R", "m")
	if testHookDropsClaimed != nil {
		t.Fatal("the last event dropped nothing")
	}
	if st := b.Stats(); h.n != int64(st.Dropped) {
		t.Errorf("queue-full reports count %d drops, Stats.Dropped is %d", h.n, st.Dropped)
	}
}
