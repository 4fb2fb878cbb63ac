package events_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

// keepingSink keeps every event it is given, with a copy of it as it was
// when given: a sink owns what it is given (API.md guarantee 6), so the
// broadcaster must never change those events afterwards, nor reuse them
// for later ones.
type keepingSink struct {
	mu    sync.Mutex
	given []*events.Event
	then  []events.Event
}

func (s *keepingSink) keep(e *events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.given = append(s.given, e)
	s.then = append(s.then, *e.Clone())
}

func (s *keepingSink) Create(_ context.Context, e *events.Event) (*events.Event, error) {
	s.keep(e)
	return e, nil
}

func (s *keepingSink) Patch(_ context.Context, old *events.Event, _ events.Patch) (*events.Event, error) {
	s.keep(old)
	return old, nil
}

// check fails t if an event the sink was given has changed since.
func (s *keepingSink) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := 0
	for i, e := range s.given {
		if diff := cmp.Diff(s.then[i], *e); diff != "" {
			if changed++; changed <= 3 {
				t.Errorf("event %d given to the sink changed afterwards (-then +now):\n%s", i, diff)
			}
		}
	}
	if changed > 3 {
		t.Errorf("... %d events changed in all, of %d given", changed, len(s.given))
	}
}

// TestSinkEventsAreNeverReused: the events a sink worker skips (spam filter)
// or replaces with an aggregate are reused by Recorders for later events,
// to save an allocation each; the ones it hands to the sink must never be.
// The streams skip and aggregate many events, so a handed-out event that
// went back for reuse would be overwritten by a later one.
func TestSinkEventsAreNeverReused(t *testing.T) {
	t.Run("one object", func(t *testing.T) {
		b, _ := newLogged()
		sink := &keepingSink{}
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		rec := b.NewRecorder(src)
		// Past 25 events the spam filter skips; past 10 messages of one
		// reason the events are aggregated.
		for i := range 2000 {
			rec.Eventf(pod, events.Warning, "BackOff", "restarting %d", i%40)
		}
		shutdown(t, b)
		st := b.Stats()
		if st.Skipped == 0 || st.Aggregated == 0 {
			t.Fatalf("the stream should skip and aggregate: %+v", st)
		}
		if len(sink.given) == 0 {
			t.Fatal("the sink got nothing")
		}
		sink.check(t)
	})
	t.Run("mixed stream", func(t *testing.T) {
		b, _ := newLogged()
		sink := &keepingSink{}
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		recs := map[events.Source]events.Recorder{}
		for i, e := range eventstest.MixedStreamRepeating(20000, 3, 0.85) {
			r := recs[e.Source]
			if r == nil {
				r = b.NewRecorder(e.Source)
				recs[e.Source] = r
			}
			r.Eventf(e.InvolvedObject, e.Type, e.Reason, "%s", e.Message)
			if i%500 == 499 {
				// Let the worker catch up: the Recorder drops what does
				// not fit in the queue, and this test wants it handled.
				waitHandled(t, b, uint64(i+1))
			}
		}
		shutdown(t, b)
		st := b.Stats()
		if st.Skipped == 0 || st.Dropped != 0 {
			t.Fatalf("the stream should skip and not drop: %+v", st)
		}
		sink.check(t)
	})
}

// waitHandled waits until the sink worker has dealt with n events
// (written, skipped or failed).
func waitHandled(t *testing.T, b *events.Broadcaster, n uint64) {
	t.Helper()
	for i := 0; ; i++ {
		st := b.Stats()
		if st.Written+st.Skipped+st.Failed >= n {
			return
		}
		if i > 1e7 {
			t.Fatalf("the worker handled %d of %d events: %+v", st.Written+st.Skipped+st.Failed, n, st)
		}
		runtime.Gosched()
	}
}

// TestQueueFullReportsCountEveryDrop: Recorders notice drops through the
// broadcast's total, which every drop raises; the counts reported as "queue
// full" (at once, then summed until Shutdown) add up to Stats.Dropped, with
// Recorders on several goroutines and two consumers that drop.
func TestQueueFullReportsCountEveryDrop(t *testing.T) {
	b, logs := newLogged(events.WithQueueLength(10))
	release := make(chan struct{})
	s := eventstest.NewFakeSink()
	s.Hook = func(context.Context, eventstest.Op, *events.Event) error { <-release; return nil }
	if _, err := b.StartRecordingToSink(s); err != nil {
		t.Fatal(err)
	}
	if _, err := b.StartEventWatcher(func(*events.Event) { <-release }); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r := b.NewRecorder(events.Source{Component: fmt.Sprint("c", g)})
			for i := range 500 {
				r.Eventf(pod, events.Normal, "R", "m %d", i)
			}
		})
	}
	wg.Wait()
	close(release)
	shutdown(t, b)
	st := b.Stats()
	if st.Dropped < 2*(4*500-30) {
		t.Fatalf("Stats %+v: both consumers should have dropped nearly everything", st)
	}
	var reported uint64
	for _, r := range logs.find("queue full") {
		n, err := strconv.ParseUint(r.attrs["count"], 10, 64)
		if err != nil {
			t.Fatalf("report %+v: %v", r, err)
		}
		reported += n
	}
	if reported != st.Dropped {
		t.Errorf("queue-full reports count %d drops, Stats.Dropped is %d", reported, st.Dropped)
	}
}
