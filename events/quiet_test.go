package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

// captureDefault makes slog.Default a capture of every record, Debug
// included, for the rest of the test.
func captureDefault(t *testing.T) *logCapture {
	t.Helper()
	lc := &logCapture{}
	old := slog.Default()
	slog.SetDefault(lc.logger())
	t.Cleanup(func() { slog.SetDefault(old) })
	return lc
}

// routineStorm records, into b with a sink that fails its first two calls
// (retried), an event repeated 40 times (de-duplicated, then held back by
// the spam filter) and 12 distinct messages about another object
// (aggregated), and shuts b down. It fails t unless each routine decision
// happened.
func routineStorm(t *testing.T, b *events.Broadcaster) {
	t.Helper()
	sink := eventstest.NewFakeSink()
	sink.FailNext("", 2, errors.New("connection refused"))
	if _, err := b.StartRecordingToSink(sink); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(src)
	for range 40 {
		rec.Event(pod, events.Warning, "BackOff", "restarting")
	}
	for i := range 12 {
		rec.Eventf(pod2, events.Warning, "Unhealthy", "probe failed: %d", i)
	}
	shutdown(t, b)
	st := b.Stats()
	retried := 0
	for _, c := range sink.Calls() {
		if c.Err != nil {
			retried++
		}
	}
	if st.Skipped == 0 || st.Aggregated == 0 || retried != 2 {
		t.Fatalf("the storm made no skip, aggregate or retry: %+v, %d failed calls", st, retried)
	}
}

// TestQuietByDefault: aggregation, spam skips and retries are logged at
// Debug at most, with the default logger and with WithLogger (guarantee 10).
func TestQuietByDefault(t *testing.T) {
	for _, withLogger := range []bool{false, true} {
		t.Run(fmt.Sprintf("WithLogger=%v", withLogger), func(t *testing.T) {
			def := captureDefault(t)
			synctest.Test(t, func(t *testing.T) {
				opts := []events.Option{events.WithRetry(3, time.Second)}
				own := &logCapture{}
				if withLogger {
					opts = append(opts, events.WithLogger(own.logger()))
				}
				routineStorm(t, events.NewBroadcaster(opts...))
				reported := def
				if withLogger {
					reported = own
					if n := len(def.all()); n != 0 {
						t.Errorf("%d records went to slog.Default despite WithLogger", n)
					}
				}
				debug := 0
				for _, r := range reported.all() {
					if r.level > slog.LevelDebug {
						t.Errorf("routine decision logged at %v: %s %v", r.level, r.msg, r.attrs)
					} else {
						debug++
					}
				}
				if debug == 0 {
					t.Error("no Debug record of the routine decisions: they are not reported at all")
				}
			})
		})
	}
}

// TestLossesReportedAtWarn: each way of losing an event is reported at
// Warn or above through slog.Default (guarantee 10).
func TestLossesReportedAtWarn(t *testing.T) {
	cases := []struct {
		name string
		lose func(t *testing.T)
	}{
		{"queue full", func(t *testing.T) {
			b := events.NewBroadcaster(events.WithQueueLength(1))
			block := make(chan struct{})
			if _, err := b.StartEventWatcher(func(*events.Event) { <-block }); err != nil {
				t.Fatal(err)
			}
			rec := b.NewRecorder(src)
			for i := range 5 {
				rec.Eventf(pod, events.Normal, "R", "m%d", i)
			}
			close(block)
			_ = b.Shutdown(context.Background())
		}},
		{"invalid", func(t *testing.T) {
			b := events.NewBroadcaster()
			b.NewRecorder(src).Event(pod, "Critical", "R", "m")
			_ = b.Shutdown(context.Background())
		}},
		{"after Shutdown", func(t *testing.T) {
			b := events.NewBroadcaster()
			_ = b.Shutdown(context.Background())
			b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
		}},
		{"rejected", func(t *testing.T) {
			b := events.NewBroadcaster()
			sink := eventstest.NewFakeSink()
			sink.FailNext("", 1, events.ErrRejected)
			if _, err := b.StartRecordingToSink(sink); err != nil {
				t.Fatal(err)
			}
			b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
			_ = b.Shutdown(context.Background())
		}},
		{"given up", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := events.NewBroadcaster(events.WithRetry(2, time.Second))
				sink := eventstest.NewFakeSink()
				sink.FailNext("", 2, errors.New("connection refused"))
				if _, err := b.StartRecordingToSink(sink); err != nil {
					t.Fatal(err)
				}
				b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
				_ = b.Shutdown(context.Background())
			})
		}},
		{"abandoned", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := events.NewBroadcaster()
				sink := eventstest.NewFakeSink()
				sink.Hook = func(ctx context.Context, _ eventstest.Op, _ *events.Event) error {
					<-ctx.Done()
					return ctx.Err()
				}
				if _, err := b.StartRecordingToSink(sink); err != nil {
					t.Fatal(err)
				}
				b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
				b.NewRecorder(src).Event(pod2, events.Normal, "R", "m")
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = b.Shutdown(ctx)
			})
		}},
		{"handler panicked", func(t *testing.T) {
			b := events.NewBroadcaster()
			if _, err := b.StartEventWatcher(func(*events.Event) { panic("boom") }); err != nil {
				t.Fatal(err)
			}
			b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
			_ = b.Shutdown(context.Background())
		}},
		{"discarded by Stop", func(t *testing.T) {
			b := events.NewBroadcaster()
			block := make(chan struct{})
			var st events.Stopper
			st, err := b.StartEventWatcher(func(*events.Event) { <-block })
			if err != nil {
				t.Fatal(err)
			}
			rec := b.NewRecorder(src)
			for range 3 {
				rec.Event(pod, events.Normal, "R", "m")
			}
			st.Stop()
			close(block)
			_ = b.Shutdown(context.Background())
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lc := captureDefault(t)
			c.lose(t)
			warned := 0
			for _, r := range lc.all() {
				if r.level >= slog.LevelWarn {
					warned++
				}
			}
			if warned == 0 {
				t.Errorf("no record at Warn or above; records: %+v", lc.all())
			}
		})
	}
}
