package events_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

// TestRejectedExpected: a sink's ErrRejectedExpected is not retried, is
// counted in Stats.Failed as a rejection, and is logged at Debug only: no
// record above Debug, at the time or in Shutdown's summary.
func TestRejectedExpected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		sink := eventstest.NewFakeSink()
		sink.FailNext(eventstest.OpCreate, 3, fmt.Errorf("%w: namespace ns is being terminated", events.ErrRejectedExpected))
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 3 {
			r.Eventf(pod, events.Normal, "R", "m%d", i)
		}
		r.Event(pod2, events.Normal, "R", "stored")
		shutdown(t, b)
		st := b.Stats()
		if st.Failed != 3 || st.Written != 1 {
			t.Errorf("Stats %+v: want Failed 3, Written 1", st)
		}
		if n := sink.CallCount(eventstest.OpCreate); n != 4 {
			t.Errorf("%d Create calls, want 4 (none retried)", n)
		}
		for _, rec := range logs.all() {
			if rec.level > slog.LevelDebug {
				t.Errorf("logged above Debug: %v %q %v", rec.level, rec.msg, rec.attrs)
			}
		}
		if n := len(logs.find("as expected")); n != 3 {
			t.Errorf("%d Debug records of the expected rejections, want 3", n)
		}
	})
}

// inFlight is a sink that counts its calls in flight, and the most seen.
type inFlight struct {
	*eventstest.FakeSink
	now, peak atomic.Int32
}

func newInFlight() *inFlight {
	s := &inFlight{FakeSink: eventstest.NewFakeSink()}
	s.Hook = func(ctx context.Context, op eventstest.Op, e *events.Event) error {
		n := s.now.Add(1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		time.Sleep(time.Second) // in the bubble: lets the others start
		s.now.Add(-1)
		return nil
	}
	return s
}

// TestStartRecordingToSinkWithConcurrency: each sink gets the concurrency
// it was started with, whatever WithSinkConcurrency says, and
// SinkConcurrency tells whether that option was given.
func TestStartRecordingToSinkWithConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster(events.WithSinkConcurrency(2))
		if n, set := b.SinkConcurrency(); n != 2 || !set {
			t.Errorf("SinkConcurrency() = %d, %v; want 2, true", n, set)
		}
		one, four, def := newInFlight(), newInFlight(), newInFlight()
		for _, s := range []struct {
			s *inFlight
			n int
		}{{one, 1}, {four, 4}} {
			if _, err := b.StartRecordingToSinkWithConcurrency(s.s, s.n); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := b.StartRecordingToSink(def); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 8 {
			r.Event(events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprint("p", i)}, events.Normal, "R", "m")
		}
		shutdown(t, b)
		for _, c := range []struct {
			name string
			s    *inFlight
			want int32
		}{{"n=1", one, 1}, {"n=4", four, 4}, {"WithSinkConcurrency(2)", def, 2}} {
			if got := c.s.peak.Load(); got != c.want {
				t.Errorf("%s: %d calls in flight at most, want %d", c.name, got, c.want)
			}
			if n := len(c.s.Events()); n != 8 {
				t.Errorf("%s: %d events stored, want 8", c.name, n)
			}
		}
		if n, set := events.NewBroadcaster().SinkConcurrency(); n != 1 || set {
			t.Errorf("default SinkConcurrency() = %d, %v; want 1, false", n, set)
		}
	})
}

func TestStartRecordingToSinkWithConcurrencyPanics(t *testing.T) {
	b := events.NewBroadcaster()
	defer shutdown(t, b)
	var wg sync.WaitGroup
	for _, n := range []int{0, -1} {
		wg.Go(func() {
			defer func() {
				if p := recover(); p == nil {
					t.Errorf("n = %d: no panic", n)
				}
			}()
			b.StartRecordingToSinkWithConcurrency(eventstest.NewFakeSink(), n)
		})
	}
	wg.Wait()
}
