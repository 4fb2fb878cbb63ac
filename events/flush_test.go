package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

// TestFlushUnderLoad (guarantee 9): while a goroutine records without
// pause, each Flush returns once every event recorded before it is stored
// by the sink and handled by the watcher, with n = 1 and n = 4.
func TestFlushUnderLoad(t *testing.T) {
	for _, n := range []int{1, 4} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			sink := eventstest.NewFakeSink()
			sink.Hook = func(context.Context, eventstest.Op, *events.Event) error {
				runtime.Gosched() // slower than the recorder: a backlog to flush
				return nil
			}
			b := events.NewBroadcaster(events.WithSinkConcurrency(n), events.WithQueueLength(100000),
				events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: events.Disable, MaxEvents: events.Disable}))
			if _, err := b.StartRecordingToSink(sink); err != nil {
				t.Fatal(err)
			}
			var handled sync.Map
			if _, err := b.StartEventWatcher(func(e *events.Event) { handled.Store(e.Message, true) }); err != nil {
				t.Fatal(err)
			}
			var returned atomic.Int64 // Recorder calls returned
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				r := b.NewRecorder(src)
				for i := 0; i < 20000; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if i%8 == 0 {
						time.Sleep(time.Microsecond) // a storm, not a flood that only drops
					}
					obj := pod
					obj.Name = fmt.Sprintf("p%d", i%50)
					r.Event(obj, events.Normal, "R", strconv.Itoa(i))
					returned.Store(int64(i + 1))
				}
			}()
			for range 5 {
				time.Sleep(2 * time.Millisecond)
				before := int(returned.Load())
				if err := b.Flush(context.Background()); err != nil {
					t.Fatalf("Flush: %v", err)
				}
				stored := map[string]bool{}
				for _, e := range sink.Events() {
					stored[e.Message] = true
				}
				for i := range before {
					if m := strconv.Itoa(i); !stored[m] {
						t.Fatalf("event %d of the %d recorded before Flush is not stored", i, before)
					} else if _, ok := handled.Load(m); !ok {
						t.Fatalf("event %d of the %d recorded before Flush is not handled", i, before)
					}
				}
			}
			close(stop)
			<-done
			shutdown(t, b)
		})
	}
}

// TestFlushHangingSink: Flush waits for a sink call that hangs, returns
// ctx.Err() when ctx ends, stops nothing (the sink goes on once released,
// and a later Flush succeeds), and returns at once after Shutdown.
func TestFlushHangingSink(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sink := eventstest.NewFakeSink()
				release := make(chan struct{})
				sink.Hook = func(context.Context, eventstest.Op, *events.Event) error { <-release; return nil }
				b := events.NewBroadcaster(events.WithSinkConcurrency(n))
				if _, err := b.StartRecordingToSink(sink); err != nil {
					t.Fatal(err)
				}
				r := b.NewRecorder(src)
				r.Event(pod, events.Normal, "R", "m")
				r.Event(pod2, events.Normal, "R", "m")
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := b.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("Flush with a hung sink: %v, want DeadlineExceeded", err)
				}
				flushed := make(chan error, 1)
				go func() { flushed <- b.Flush(context.Background()) }()
				synctest.Wait()
				select {
				case err := <-flushed:
					t.Fatalf("Flush returned %v with the sink still hung", err)
				default:
				}
				close(release)
				if err := <-flushed; err != nil {
					t.Fatalf("Flush: %v", err)
				}
				if got := len(sink.Events()); got != 2 {
					t.Fatalf("%d events stored after Flush, want 2", got)
				}
				r.Event(pod, events.Normal, "R", "again") // Flush stopped nothing
				if err := b.Flush(context.Background()); err != nil {
					t.Fatal(err)
				}
				if got := len(sink.Events()); got != 3 {
					t.Fatalf("%d events stored after the second Flush, want 3", got)
				}
				shutdown(t, b)
				start := time.Now()
				if err := b.Flush(context.Background()); err != nil || time.Since(start) != 0 {
					t.Errorf("Flush after Shutdown: %v after %v, want nil at once", err, time.Since(start))
				}
			})
		})
	}
}

// TestFlushStoppedSinkAndNoConsumer: Flush does not wait for a stopped sink
// (its queue is discarded), and with nothing started returns at once.
func TestFlushStoppedSinkAndNoConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
		b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
		if err := b.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		sink := eventstest.NewFakeSink()
		release := make(chan struct{})
		sink.Hook = func(context.Context, eventstest.Op, *events.Event) error { <-release; return nil }
		st, err := b.StartRecordingToSink(sink)
		if err != nil {
			t.Fatal(err)
		}
		b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
		synctest.Wait()
		st.Stop()
		// The sink's call still hangs: Flush does not wait for it (a
		// deadlock here fails the synctest bubble).
		if err := b.Flush(context.Background()); err != nil && !errors.Is(err, events.ErrLost) {
			t.Fatalf("Flush after Stop: %v", err)
		}
		close(release)
		shutdown(t, b)
	})
}

// TestLostError: Flush and Shutdown return a LostError, wrapping ErrLost,
// with the losses since the previous one; each loss is returned once; a
// run without losses returns nil.
func TestLostError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := eventstest.NewFakeSink()
		b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Normal, "R", "m")
		if err := b.Flush(context.Background()); err != nil {
			t.Fatalf("Flush without losses: %v", err)
		}
		sink.FailNext("", 1, events.ErrRejected)
		r.Event(pod2, events.Normal, "R", "rejected")
		r.Event(pod, "Bogus", "R", "m")
		err := b.Flush(context.Background())
		var lost *events.LostError
		if !errors.Is(err, events.ErrLost) || !errors.As(err, &lost) ||
			*lost != (events.LostError{Invalid: 1, Failed: 1}) {
			t.Fatalf("Flush: %v, want a LostError of 1 invalid and 1 failed", err)
		}
		if err := b.Flush(context.Background()); err != nil {
			t.Fatalf("second Flush: %v, want nil (the losses were returned once)", err)
		}
		r.Event(pod, events.Normal, "R", "m2")
		if err := b.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown without new losses: %v", err)
		}
		r.Event(pod, events.Normal, "R", "late")
		if err := b.Flush(context.Background()); !errors.As(err, &lost) || *lost != (events.LostError{Dropped: 1}) {
			t.Fatalf("Flush after a drop after Shutdown: %v, want a LostError of 1 dropped", err)
		}
	})
}

// TestStatsOf: each sink and watcher has its own counts, whose sum is
// Stats; they stay readable after Stop; a Stopper of another broadcaster
// has none.
func TestStatsOf(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
		good, bad := eventstest.NewFakeSink(), eventstest.NewFakeSink()
		bad.Hook = func(context.Context, eventstest.Op, *events.Event) error { return events.ErrRejected }
		sg, err := b.StartRecordingToSink(good)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := b.StartRecordingToSink(bad)
		if err != nil {
			t.Fatal(err)
		}
		sw, err := b.StartEventWatcher(func(*events.Event) {})
		if err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Normal, "R", "m")
		r.Event(pod, events.Normal, "R", "m")
		if err := b.Flush(context.Background()); !errors.Is(err, events.ErrLost) {
			t.Fatalf("Flush: %v, want a LostError", err)
		}
		sw.Stop()
		r.Event(pod2, events.Normal, "R", "m")
		shutdown(t, b)
		gs, ok1 := b.StatsOf(sg)
		bs, ok2 := b.StatsOf(sb)
		ws, ok3 := b.StatsOf(sw)
		if !ok1 || !ok2 || !ok3 {
			t.Fatal("StatsOf: not found")
		}
		if gs != (events.Stats{Recorded: 3, Written: 3}) {
			t.Errorf("good sink: %+v", gs)
		}
		if bs != (events.Stats{Recorded: 3, Failed: 3}) {
			t.Errorf("rejecting sink: %+v", bs)
		}
		if ws != (events.Stats{Recorded: 2, Handled: 2}) {
			t.Errorf("stopped watcher: %+v", ws)
		}
		sum := events.Stats{Recorded: 3}
		for _, s := range []events.Stats{gs, bs, ws} {
			sum.Dropped += s.Dropped
			sum.Written += s.Written
			sum.Failed += s.Failed
			sum.Handled += s.Handled
		}
		if st := b.Stats(); st != sum {
			t.Errorf("Stats %+v, want the sum of StatsOf %+v", st, sum)
		}
		other := events.NewBroadcaster()
		so, err := other.StartEventWatcher(func(*events.Event) {})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := b.StatsOf(so); ok {
			t.Error("StatsOf found another broadcaster's watcher")
		}
		shutdown(t, other)
	})
}

// TestFailingSinkReported: a sink that fails every call is reported at
// Warn, with its error, once it has failed for 30 s, at most once per 10 s,
// long before the event is given up; Shutdown then says the event was lost.
func TestFailingSinkReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lc := captureDefault(t)
		sink := eventstest.NewFakeSink()
		sink.Hook = func(context.Context, eventstest.Op, *events.Event) error {
			return errors.New("connection refused")
		}
		b := events.NewBroadcaster()
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
		time.Sleep(25 * time.Second)
		synctest.Wait()
		if n := len(lc.find("sink failing")); n != 0 {
			t.Fatalf("reported after 25 s of failures: %d records", n)
		}
		time.Sleep(40 * time.Second)
		synctest.Wait()
		recs := lc.find("sink failing")
		if len(recs) == 0 || recs[0].level != slog.LevelWarn || !strings.Contains(recs[0].attrs["err"], "connection refused") {
			t.Fatalf("not reported at Warn with the error after 65 s of failures: %+v", recs)
		}
		if len(recs) > 4 {
			t.Errorf("%d reports in 40 s, want at most 4 (one per 10 s at most)", len(recs))
		}
		err := b.Shutdown(context.Background())
		var lost *events.LostError
		if !errors.As(err, &lost) || lost.Failed != 1 {
			t.Errorf("Shutdown: %v, want a LostError with the event failed", err)
		}
	})
}
