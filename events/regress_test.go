package events_test

// Regression tests for the bugs that the reliability tests found (issue 5);
// each fails if its fix is reverted.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
	"github.com/heraldgo/herald/internal/eventstream"
	"github.com/heraldgo/herald/internal/testutil"
)

// Aggregate events were named "<object name>.<hex nanos of the correlator's
// clock>" with no uniqueness bump: two groups of one object that aggregate
// within one clock tick (a fake clock, as CorrelatorOptions.Now invites; a
// coarse clock) got the same name, and the first plain event recorded at
// that tick had it too. The sink answered ErrAlreadyExists, the broadcaster
// counted the aggregate as written, and the aggregate's later patches landed
// on the other event, overwriting its message and count. A Broadcaster's
// sink now names a new aggregate after the recorded event it replaces (whose
// name the Broadcaster made unique), both when the sink is the only
// consumer (the event is correlated in place) and when a watcher shares the
// events.
func TestRegressionAggregateNamesCollide(t *testing.T) {
	for _, watcher := range []bool{false, true} {
		t.Run(fmt.Sprintf("watcher=%v", watcher), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
				b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)),
					events.WithCorrelatorOptions(events.CorrelatorOptions{MaxEvents: 2, Now: func() time.Time { return fixed }}))
				s := startSink(t, b)
				if watcher {
					if _, err := b.StartEventWatcher(func(*events.Event) {}); err != nil {
						t.Fatal(err)
					}
				}
				r := b.NewRecorder(src)
				for _, reason := range []string{"A", "B"} {
					for i := 1; i <= 3; i++ { // plain, aggregate (create), aggregate (patch)
						r.Eventf(pod, events.Warning, reason, "%s%d", reason, i)
					}
				}
				shutdown(t, b)
				got := map[string]string{} // name → reason/message/count
				for _, e := range s.Events() {
					got[e.Name] = fmt.Sprintf("%s/%s/%d", e.Reason, e.Message, e.Count)
					if !strings.HasPrefix(e.Name, pod.Name+".") {
						t.Errorf("name %q, want %q.<hex nanos>", e.Name, pod.Name)
					}
				}
				want := map[string]bool{"A/A1/1": true, "B/B1/1": true,
					"A/" + events.AggregatePrefix + "A3/2": true, "B/" + events.AggregatePrefix + "B3/2": true}
				if len(got) != len(want) {
					t.Errorf("stored %d events, want %d (two plain, two aggregates): %v", len(got), len(want), got)
				}
				for _, v := range got {
					if !want[v] {
						t.Errorf("stored %s, want one of %v", v, want)
					}
				}
				for _, c := range s.Calls() {
					if c.Err != nil {
						t.Errorf("%s of %s %q: %v", c.Op, c.Event.Name, c.Event.Message, c.Err)
					}
				}
			})
		})
	}
}

// The same for a Correlator used on its own: with a fixed clock, two
// aggregate events of one object still get distinct names, the first with
// the clock's nanoseconds, the next one more.
func TestRegressionCorrelatorAggregateNamesUnique(t *testing.T) {
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := events.NewCorrelator(events.CorrelatorOptions{MaxEvents: 2, Now: func() time.Time { return fixed }})
	var names []string
	for _, reason := range []string{"A", "B"} {
		for i := 1; i <= 3; i++ {
			res, err := c.Correlate(newEvent(pod, events.Warning, reason, fmt.Sprint(reason, i), fixed))
			if err != nil {
				t.Fatal(err)
			}
			if res.Aggregated && res.Patch == nil {
				names = append(names, res.Event.Name)
			}
		}
	}
	want := []string{fmt.Sprintf("%s.%x", pod.Name, fixed.UnixNano()), fmt.Sprintf("%s.%x", pod.Name, fixed.UnixNano()+1)}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("aggregate events created: %q, want %q", names, want)
	}
}

// A handler that calls runtime.Goexit (as t.FailNow and t.Fatal do) ended
// its watcher's goroutine: the call was counted in Failed and reported as a
// panic with value <nil>, but every event queued behind it was lost with no
// count, and Shutdown returned nil as if they had been handled. Now the
// call is counted in Failed and reported as a Goexit, and the watcher goes
// on with the next event on a new goroutine, which Shutdown waits for (and
// goleak checks is gone). The same for a sink.
func TestRegressionGoexitInHandlerLosesEvents(t *testing.T) {
	t.Run("every call", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
			if _, err := b.StartEventWatcher(func(*events.Event) { runtime.Goexit() }); err != nil {
				t.Fatal(err)
			}
			r := b.NewRecorder(src)
			for i := range 5 {
				r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
			}
			shutdown(t, b)
			st := b.Stats()
			if got := st.Handled + st.Failed + st.Abandoned + st.Dropped; got != st.Recorded {
				t.Errorf("Stats %+v: Handled + Failed + Abandoned + Dropped = %d, want Recorded %d: events lost without a count",
					st, got, st.Recorded)
			}
		})
	})
	t.Run("watcher goes on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b, logs := newLogged()
			var got []string
			if _, err := b.StartEventWatcher(func(e *events.Event) {
				if e.Reason == "R1" {
					runtime.Goexit()
				}
				got = append(got, e.Reason)
			}); err != nil {
				t.Fatal(err)
			}
			r := b.NewRecorder(src)
			for i := range 4 {
				r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
			}
			shutdown(t, b)
			if fmt.Sprint(got) != "[R0 R2 R3]" {
				t.Errorf("handled %v, want [R0 R2 R3]", got)
			}
			if st := b.Stats(); st.Handled != 3 || st.Failed != 1 {
				t.Errorf("Stats %+v, want Handled 3, Failed 1", st)
			}
			if len(logs.find("runtime.Goexit")) != 1 {
				t.Errorf("no report of the Goexit: %+v", logs.recs)
			}
		})
	})
	t.Run("sink goes on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
			s := eventstest.NewFakeSink()
			s.Hook = func(_ context.Context, _ eventstest.Op, e *events.Event) error {
				if e.Reason == "R0" {
					runtime.Goexit()
				}
				return nil
			}
			if _, err := b.StartRecordingToSink(s); err != nil {
				t.Fatal(err)
			}
			r := b.NewRecorder(src)
			for i := range 3 {
				r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
			}
			shutdown(t, b)
			if st := b.Stats(); st.Written != 2 || st.Failed != 1 || len(s.Events()) != 2 {
				t.Errorf("Stats %+v, %d stored, want Written 2, Failed 1, 2 stored", st, len(s.Events()))
			}
		})
	})
}

// Stop discarded what was still queued for the sink or watcher, as
// documented, but counted none of it: the identity
// Recorded − Dropped = Written + Skipped + Failed + Abandoned broke, against
// "Nothing is lost silently". The discarded events are now counted in
// Failed and reported (Warn).
func TestRegressionStopDiscardsUncounted(t *testing.T) {
	for _, sink := range []bool{true, false} {
		t.Run(fmt.Sprintf("sink=%v", sink), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, logs := newLogged()
				release := make(chan struct{})
				var stop events.Stopper
				var err error
				if sink {
					s := eventstest.NewFakeSink()
					s.Hook = func(context.Context, eventstest.Op, *events.Event) error { <-release; return nil }
					stop, err = b.StartRecordingToSink(s)
				} else {
					stop, err = b.StartEventWatcher(func(*events.Event) { <-release })
				}
				if err != nil {
					t.Fatal(err)
				}
				r := b.NewRecorder(src)
				for i := range 5 {
					r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
				}
				synctest.Wait() // the sink or handler is in its first call, four events queued
				stop.Stop()
				r.Event(pod, events.Normal, "After", "m") // published to no one
				close(release)
				shutdown(t, b)
				st := b.Stats()
				done := st.Written + st.Skipped + st.Failed + st.Abandoned + st.Handled
				if done != 5 || st.Failed != 4 || st.Recorded != 6 {
					t.Errorf("Stats %+v: Written + Skipped + Failed + Abandoned + Handled = %d, want 5 (one done, four discarded in Failed)",
						st, done)
				}
				recs := logs.find("events still queued for it discarded")
				if len(recs) != 1 || recs[0].level != slog.LevelWarn || recs[0].attrs["count"] != "4" {
					t.Errorf("reports of the discarded events: %+v, want one Warn with count 4", recs)
				}
			})
		})
	}
}

// WithLogger(&slog.Logger{}) (a zero Logger, whose Handler is nil) was
// accepted, and the first report panicked inside the Recorder call, against
// guarantee 5 ("A Recorder never blocks its caller and never panics"). A
// zero logger now means what nil means, slog.Default(), in WithLogger and
// in StartStructuredLogging.
func TestRegressionZeroLoggerRecorderPanics(t *testing.T) {
	lc := &logCapture{}
	old := slog.Default()
	slog.SetDefault(lc.logger())
	t.Cleanup(func() { slog.SetDefault(old) })

	var b *events.Broadcaster
	if msg, panicked := testutil.PanicMessage(func() {
		b = events.NewBroadcaster(events.WithLogger(&slog.Logger{}))
	}); panicked {
		t.Fatalf("NewBroadcaster panicked: %s", msg)
	}
	if _, err := b.StartStructuredLogging(&slog.Logger{}, slog.LevelInfo); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(src)
	if msg, panicked := testutil.PanicMessage(func() {
		r.Event(pod, "Bogus", "R", "m")
		r.Event(pod, events.Normal, "R", "m")
	}); panicked {
		t.Errorf("Recorder.Event panicked: %s", msg)
	}
	if err := b.Shutdown(context.Background()); err != nil && !errors.Is(err, events.ErrLost) {
		t.Fatal(err)
	}
	if len(lc.find("invalid event")) != 1 || len(lc.find("Event occurred")) != 1 {
		t.Errorf("slog.Default() got %+v, want the invalid event's report and the structured log of the other", lc.recs)
	}
	if st := b.Stats(); st.Failed != 0 || st.Handled != 1 {
		t.Errorf("Stats %+v, want Handled 1, Failed 0", st)
	}
}

// A NaN QPS passed NewCorrelator's "must not be negative" check and turned
// the spam filter off without a word (every bucket's tokens became NaN,
// which always allows). It now panics with an "events: " message, in
// NewCorrelator and so in NewBroadcaster, as a negative QPS does. +Inf is a
// setting, not a mistake: no limit once the burst is spent.
func TestRegressionNaNQPS(t *testing.T) {
	for name, f := range map[string]func(){
		"NewCorrelator":  func() { events.NewCorrelator(events.CorrelatorOptions{QPS: math.NaN()}) },
		"NewBroadcaster": func() { events.NewBroadcaster(events.WithCorrelatorOptions(events.CorrelatorOptions{QPS: math.NaN()})) },
	} {
		msg, panicked := testutil.PanicMessage(f)
		if !panicked || !strings.HasPrefix(msg, "events: ") || !strings.Contains(msg, "NaN") {
			t.Errorf("%s(QPS NaN): panicked %v %q, want an \"events: \" panic about NaN", name, panicked, msg)
		}
	}

	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{QPS: math.Inf(1), BurstSize: 2, MaxEvents: events.Disable, Now: clk.now})
	for i := range 10 {
		if s, _ := decide(t, c, newEvent(pod, events.Normal, "R", fmt.Sprint(i), clk.now())); s.Skip {
			t.Fatalf("QPS +Inf: event %d skipped", i)
		}
	}
}

// events.WithQueueLength accepted any n ≥ 1, but NewBroadcaster then
// panicked with the broadcast package's message for n >
// broadcast.MaxQueueLength. The option checks (and documents) the limit
// itself.
func TestRegressionQueueLengthLimit(t *testing.T) {
	msg, panicked := testutil.PanicMessage(func() { events.WithQueueLength(broadcast.MaxQueueLength + 1) })
	if !panicked || !strings.HasPrefix(msg, "events: WithQueueLength") {
		t.Errorf("WithQueueLength(MaxQueueLength+1): panicked %v %q, want an \"events: \" panic from the option", panicked, msg)
	}
	if msg, panicked := testutil.PanicMessage(func() { events.WithQueueLength(broadcast.MaxQueueLength) }); panicked {
		t.Errorf("WithQueueLength(MaxQueueLength) panicked: %s", msg)
	}
}

// Zero values: a Recorder of a zero Broadcaster is handled ("still no
// panic"), but the zero Broadcaster's other methods and the zero Correlator
// panicked with runtime messages ("close of nil channel", a nil
// dereference, "maphash: use of uninitialized Seed"). They now panic with
// an "events: " message that says what to use; a zero Broadcaster's Stats
// are zero, and its Recorders still drop and report.
func TestRegressionZeroValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"Broadcaster.Shutdown", func() { new(events.Broadcaster).Shutdown(context.Background()) }, "use NewBroadcaster"},
		{"Broadcaster.StartEventWatcher", func() { new(events.Broadcaster).StartEventWatcher(func(*events.Event) {}) }, "use NewBroadcaster"},
		{"Broadcaster.StartLogging", func() { new(events.Broadcaster).StartLogging(func(string, ...any) {}) }, "use NewBroadcaster"},
		{"Broadcaster.StartStructuredLogging", func() { new(events.Broadcaster).StartStructuredLogging(nil, slog.LevelInfo) }, "use NewBroadcaster"},
		{"Broadcaster.StartRecordingToSink", func() { new(events.Broadcaster).StartRecordingToSink(eventstest.NewFakeSink()) }, "use NewBroadcaster"},
		{"nil Broadcaster.Shutdown", func() { (*events.Broadcaster)(nil).Shutdown(context.Background()) }, "use NewBroadcaster"},
		{"Correlator.Correlate", func() { new(events.Correlator).Correlate(&events.Event{}) }, "use NewCorrelator"},
		{"Correlator.UpdateState", func() { new(events.Correlator).UpdateState(&events.Event{}) }, "use NewCorrelator"},
		{"nil Correlator.Correlate", func() { (*events.Correlator)(nil).Correlate(&events.Event{}) }, "use NewCorrelator"},
		{"eventstream.MixedStream(-1)", func() { eventstream.MixedStream(-1, 1) }, "eventstream: MixedStream: n must not be negative"},
		{"eventstream.MixedStreamRepeating(-1)", func() { eventstream.MixedStreamRepeating(-1, 1, 0.5) }, "eventstream: MixedStreamRepeating: n must not be negative"},
		{"eventstream.MixedStreamRepeating(repeats 1.5)", func() { eventstream.MixedStreamRepeating(10, 1, 1.5) }, "repeats must be between 0 and 1, got 1.5"},
		{"eventstream.MixedStreamRepeating(repeats -0.1)", func() { eventstream.MixedStreamRepeating(10, 1, -0.1) }, "repeats must be between 0 and 1, got -0.1"},
		{"eventstream.MixedStreamRepeating(repeats NaN)", func() { eventstream.MixedStreamRepeating(10, 1, math.NaN()) }, "repeats must be between 0 and 1, got NaN"},
	} {
		msg, panicked := testutil.PanicMessage(tc.f)
		if !panicked || !(strings.HasPrefix(msg, "events: ") || strings.HasPrefix(msg, "eventstest: ") || strings.HasPrefix(msg, "eventstream: ")) || !strings.Contains(msg, tc.want) {
			t.Errorf("%s: panicked %v %q, want an \"events: \" panic saying %q", tc.name, panicked, msg, tc.want)
		}
	}
	var zero events.Broadcaster
	if msg, panicked := testutil.PanicMessage(func() {
		zero.NewRecorder(src).Event(pod, events.Normal, "R", "m")
		if st := zero.Stats(); st != (events.Stats{}) {
			t.Errorf("zero Broadcaster's Stats %+v, want zero", st)
		}
	}); panicked {
		t.Errorf("zero Broadcaster's Recorder or Stats panicked: %s", msg)
	}
}

// Doc sentence on CorrelatorOptions.MaxEvents: distinct messages count
// toward MaxEvents as long as no two similar events are more than
// MaxInterval apart; a gap of exactly MaxInterval keeps the group.
func TestRegressionMaxIntervalGap(t *testing.T) {
	for _, tc := range []struct {
		gap  time.Duration
		want bool // the third distinct message is aggregated
	}{
		{events.DefaultMaxInterval, true},
		{events.DefaultMaxInterval + time.Nanosecond, false},
	} {
		clk := newClock()
		c := events.NewCorrelator(events.CorrelatorOptions{MaxEvents: 3, BurstSize: events.Disable, Now: clk.now})
		var got bool
		for i := range 3 {
			_, res := decide(t, c, newEvent(pod, events.Warning, "R", fmt.Sprint("m", i), clk.step(tc.gap)))
			got = res.Aggregated
		}
		if got != tc.want {
			t.Errorf("gaps of %v: third message aggregated %v, want %v", tc.gap, got, tc.want)
		}
	}
}
