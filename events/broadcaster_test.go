package events_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

// sinkStep summarizes a sink call for comparison.
type sinkStep struct {
	Op      eventstest.Op
	Count   int32
	Message string
}

func sinkSteps(s *eventstest.FakeSink) []sinkStep {
	var out []sinkStep
	for _, c := range s.Calls() {
		st := sinkStep{Op: c.Op, Count: c.Event.Count, Message: c.Event.Message}
		if c.Op == eventstest.OpPatch {
			st.Count, st.Message = c.Patch.Count, c.Patch.Message
		}
		out = append(out, st)
	}
	return out
}

func startSink(t *testing.T, b *events.Broadcaster) *eventstest.FakeSink {
	t.Helper()
	s := eventstest.NewFakeSink()
	if _, err := b.StartRecordingToSink(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Guarantee 1.
func TestGuaranteeRepeatsPatchWithCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster()
		s := startSink(t, b)
		r := b.NewRecorder(src)
		start := time.Now()
		for range 4 {
			r.Event(pod, events.Warning, "BackOff", "restarting")
			time.Sleep(time.Second)
			synctest.Wait()
		}
		shutdown(t, b)
		want := []sinkStep{
			{eventstest.OpCreate, 1, "restarting"},
			{eventstest.OpPatch, 2, "restarting"},
			{eventstest.OpPatch, 3, "restarting"},
			{eventstest.OpPatch, 4, "restarting"},
		}
		if diff := cmp.Diff(want, sinkSteps(s)); diff != "" {
			t.Fatalf("sink calls (-want +got):\n%s", diff)
		}
		// Each patch carries the ResourceVersion the sink returned last
		// (the correlator learned it through UpdateState).
		for i, c := range s.Calls()[1:] {
			if want := fmt.Sprint(i + 1); c.Event.ResourceVersion != want {
				t.Errorf("patch %d: ResourceVersion %q, want %q", i+1, c.Event.ResourceVersion, want)
			}
		}
		stored := s.Events()
		if len(stored) != 1 {
			t.Fatalf("stored %d events, want 1", len(stored))
		}
		e := stored[0]
		if wantName := fmt.Sprintf("%s.%x", pod.Name, start.UnixNano()); e.Name != wantName {
			t.Errorf("Name %q, want the first's %q", e.Name, wantName)
		}
		if !e.FirstTimestamp.Equal(start) || !e.LastTimestamp.Equal(start.Add(3*time.Second)) || e.Count != 4 {
			t.Errorf("stored %v..%v count %d, want %v..%v count 4", e.FirstTimestamp, e.LastTimestamp, e.Count, start, start.Add(3*time.Second))
		}
	})
}

// Guarantee 2, through the pipeline.
func TestGuaranteeAggregation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		s := startSink(t, b)
		r := b.NewRecorder(src)
		for i := 1; i <= 10; i++ {
			r.Eventf(pod, events.Warning, "Unhealthy", "probe failed: %d", i)
			time.Sleep(time.Second)
		}
		r.Eventf(pod, events.Warning, "Unhealthy", "probe failed: %d", 3) // a repeat: aggregated too
		time.Sleep(time.Second)
		shutdown(t, b)
		var want []sinkStep
		for i := 1; i <= 9; i++ {
			want = append(want, sinkStep{eventstest.OpCreate, 1, fmt.Sprint("probe failed: ", i)})
		}
		want = append(want,
			sinkStep{eventstest.OpCreate, 1, events.AggregatePrefix + "probe failed: 10"},
			sinkStep{eventstest.OpPatch, 2, events.AggregatePrefix + "probe failed: 3"})
		if diff := cmp.Diff(want, sinkSteps(s)); diff != "" {
			t.Fatalf("sink calls (-want +got):\n%s", diff)
		}
		if st := b.Stats(); st.Aggregated != 2 || st.Written != 11 {
			t.Errorf("Stats %+v, want Aggregated 2, Written 11", st)
		}
		if len(logs.find("aggregated")) == 0 {
			t.Error("aggregation not reported")
		}
	})
}

// Guarantee 3: burst 25, then one per 5 minutes.
func TestGuaranteeSpamFilterBurstThenRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		s := startSink(t, b)
		r := b.NewRecorder(src)
		record := func(n int, tag string) {
			for i := range n {
				r.Event(pod, events.Normal, fmt.Sprintf("%s%d", tag, i), "m") // distinct: neither counted nor aggregated
			}
			synctest.Wait()
		}
		record(30, "Burst")
		if n := s.CallCount(""); n != 25 {
			t.Fatalf("burst: %d writes, want 25", n)
		}
		time.Sleep(5 * time.Minute)
		record(3, "Later")
		if n := s.CallCount(""); n != 26 {
			t.Fatalf("after 5 minutes: %d writes, want 26", n)
		}
		time.Sleep(10 * time.Minute)
		record(3, "Much later")
		if n := s.CallCount(""); n != 28 {
			t.Fatalf("after 10 more minutes: %d writes, want 28", n)
		}
		shutdown(t, b)
		if st := b.Stats(); st.Skipped != 36-28 {
			t.Errorf("Skipped %d, want %d", st.Skipped, 36-28)
		}
		if len(logs.find("spam filter")) == 0 {
			t.Error("skips not reported")
		}
	})
}

func TestSpamFilterOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster(events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: events.Disable}))
		s := startSink(t, b)
		r := b.NewRecorder(src)
		for i := range 100 {
			r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
		}
		shutdown(t, b)
		if n := s.CallCount(""); n != 100 {
			t.Fatalf("%d writes, want 100", n)
		}
	})
}

var errTransient = errors.New("connection refused")

// Guarantee 4: retries, give-up, NotFound fallback, no retry for
// AlreadyExists and Rejected.
func TestGuaranteeSinkFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		tries   int
		setup   func(s *eventstest.FakeSink)
		repeat  bool // record the event twice (second is a Patch)
		want    []sinkStep
		stats   events.Stats
		logSubs string
	}{
		{
			name: "transient errors retried", tries: 5,
			setup: func(s *eventstest.FakeSink) { s.FailNext(eventstest.OpCreate, 3, errTransient) },
			want: []sinkStep{
				{eventstest.OpCreate, 1, "m"}, {eventstest.OpCreate, 1, "m"},
				{eventstest.OpCreate, 1, "m"}, {eventstest.OpCreate, 1, "m"},
			},
			stats: events.Stats{Recorded: 1, Written: 1},
		},
		{
			name: "give up after maxTries", tries: 4,
			setup: func(s *eventstest.FakeSink) { s.FailNext("", 100, errTransient) },
			want: []sinkStep{
				{eventstest.OpCreate, 1, "m"}, {eventstest.OpCreate, 1, "m"},
				{eventstest.OpCreate, 1, "m"}, {eventstest.OpCreate, 1, "m"},
			},
			stats:   events.Stats{Recorded: 1, Failed: 1},
			logSubs: "retry limit",
		},
		{
			name: "rejected not retried", tries: 12,
			setup: func(s *eventstest.FakeSink) {
				s.FailNext("", 1, fmt.Errorf("%w: namespace terminating", events.ErrRejected))
			},
			want:    []sinkStep{{eventstest.OpCreate, 1, "m"}},
			stats:   events.Stats{Recorded: 1, Failed: 1},
			logSubs: "rejected",
		},
		{
			name: "already exists is recorded", tries: 12,
			setup: func(s *eventstest.FakeSink) { s.FailNext("", 1, events.ErrAlreadyExists) },
			want:  []sinkStep{{eventstest.OpCreate, 1, "m"}},
			stats: events.Stats{Recorded: 1, Written: 1},
		},
		{
			name: "patch of a gone event falls back to create", tries: 12, repeat: true,
			setup: func(s *eventstest.FakeSink) {
				s.Hook = func(_ context.Context, op eventstest.Op, e *events.Event) error {
					if op == eventstest.OpPatch {
						s.Delete(e.Namespace, e.Name) // gone before the patch
					}
					return nil
				}
			},
			want: []sinkStep{
				{eventstest.OpCreate, 1, "m"}, {eventstest.OpPatch, 2, "m"}, {eventstest.OpCreate, 2, "m"},
			},
			stats: events.Stats{Recorded: 2, Written: 2},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, logs := newLogged(events.WithRetry(tc.tries, 10*time.Second))
				s := eventstest.NewFakeSink()
				tc.setup(s)
				if _, err := b.StartRecordingToSink(s); err != nil {
					t.Fatal(err)
				}
				r := b.NewRecorder(src)
				r.Event(pod, events.Normal, "Pulled", "m")
				if tc.repeat {
					synctest.Wait()
					r.Event(pod, events.Normal, "Pulled", "m")
				}
				start := time.Now()
				shutdown(t, b)
				if diff := cmp.Diff(tc.want, sinkSteps(s)); diff != "" {
					t.Errorf("sink calls (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(tc.stats, b.Stats()); diff != "" {
					t.Errorf("Stats (-want +got):\n%s", diff)
				}
				// Retries sleep: the first a jittered fraction of 10s, the others 10s.
				if n := len(tc.want) - 1; n > 0 && !tc.repeat {
					el := time.Since(start)
					if el < time.Duration(n-1)*10*time.Second || el > time.Duration(n)*10*time.Second {
						t.Errorf("%d retries took %v", n, el)
					}
				}
				if tc.logSubs != "" && len(logs.find(tc.logSubs)) == 0 {
					t.Errorf("no report containing %q", tc.logSubs)
				}
			})
		})
	}
}

func TestRetryFirstSleepJittered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var firsts []time.Duration
		for range 20 {
			b := events.NewBroadcaster(events.WithRetry(2, 10*time.Second), events.WithLogger(slog.New(slog.DiscardHandler)))
			s := eventstest.NewFakeSink()
			var calls []time.Time
			s.Hook = func(context.Context, eventstest.Op, *events.Event) error {
				calls = append(calls, time.Now())
				return errTransient
			}
			if _, err := b.StartRecordingToSink(s); err != nil {
				t.Fatal(err)
			}
			b.NewRecorder(src).Event(pod, events.Normal, "Pulled", "m")
			shutdown(t, b)
			if len(calls) != 2 {
				t.Fatalf("%d calls, want 2", len(calls))
			}
			firsts = append(firsts, calls[1].Sub(calls[0]))
		}
		distinct := map[time.Duration]bool{}
		for _, d := range firsts {
			if d < 0 || d > 10*time.Second {
				t.Fatalf("first sleep %v out of [0, 10s]", d)
			}
			distinct[d] = true
		}
		if len(distinct) < 10 {
			t.Fatalf("first sleeps not jittered: %v", firsts)
		}
	})
}

// Guarantee 5.
func TestGuaranteeRecorderNeverBlocks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged(events.WithQueueLength(10))
		release := make(chan struct{})
		s := eventstest.NewFakeSink()
		s.Hook = func(context.Context, eventstest.Op, *events.Event) error { <-release; return nil }
		if _, err := b.StartRecordingToSink(s); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 100 { // the sink is stuck: the queue fills up
			r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
		}
		st := b.Stats()
		if st.Recorded != 100 || st.Dropped == 0 || st.Dropped > 90 {
			t.Errorf("Stats %+v: want 100 recorded, some dropped", st)
		}
		if len(logs.find("queue full")) == 0 {
			t.Error("drops not reported")
		}
		close(release)
		shutdown(t, b)
		// After Shutdown: dropped, reported, no panic.
		r.Event(pod, events.Normal, "Late", "m")
		r.Eventf(pod, events.Normal, "Late", "%d", 1)
		r.AnnotatedEventf(pod, map[string]string{"a": "b"}, events.Normal, "Late", "m")
		if got := b.Stats().Dropped - st.Dropped; got != 3 {
			t.Errorf("after Shutdown: %d more dropped, want 3", got)
		}
		if len(logs.find("after Shutdown")) == 0 {
			t.Error("recording after Shutdown not reported")
		}
		for name, start := range map[string]func() (events.Stopper, error){
			"StartEventWatcher":      func() (events.Stopper, error) { return b.StartEventWatcher(func(*events.Event) {}) },
			"StartRecordingToSink":   func() (events.Stopper, error) { return b.StartRecordingToSink(s) },
			"StartLogging":           func() (events.Stopper, error) { return b.StartLogging(t.Logf) },
			"StartStructuredLogging": func() (events.Stopper, error) { return b.StartStructuredLogging(nil, slog.LevelInfo) },
		} {
			st, err := start()
			if !errors.Is(err, broadcast.ErrClosed) {
				t.Errorf("%s after Shutdown: %v, want broadcast.ErrClosed", name, err)
			}
			st.Stop() // usable all the same
		}
	})
}

func TestInvalidTypeNotRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		var got []*events.Event
		if _, err := b.StartEventWatcher(func(e *events.Event) { got = append(got, e) }); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, "Error", "Failed", "m")
		r.Event(pod, "normal", "Failed", "m")
		r.Event(pod, events.Normal, "Fine", "m")
		shutdown(t, b)
		if len(got) != 1 || got[0].Reason != "Fine" {
			t.Errorf("watcher got %d events, want only the valid one", len(got))
		}
		if st := b.Stats(); st.Invalid != 2 || st.Recorded != 1 {
			t.Errorf("Stats %+v: want Invalid 2, Recorded 1", st)
		}
		recs := logs.find("invalid event")
		if len(recs) == 0 || recs[0].attrs["type"] != "Error" {
			t.Errorf("invalid type not reported: %+v", recs)
		}
	})
}

// Guarantee 6.
func TestGuaranteeCopiesIsolated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster()
		mutate := func(e *events.Event) {
			e.Message = "mutated"
			e.Annotations["team"] = "mutated"
			e.Annotations["new"] = "x"
			e.InvolvedObject.Name = "mutated"
		}
		var seen [2][]events.Event
		var mu sync.Mutex
		for i := range 2 {
			if _, err := b.StartEventWatcher(func(e *events.Event) {
				mu.Lock()
				seen[i] = append(seen[i], *e.Clone())
				mu.Unlock()
				mutate(e)
			}); err != nil {
				t.Fatal(err)
			}
		}
		mutating := eventstest.NewFakeSink()
		mutating.Hook = func(_ context.Context, _ eventstest.Op, e *events.Event) error {
			mutate(e)
			return nil
		}
		sink := startSink(t, b)
		if _, err := b.StartRecordingToSink(mutating); err != nil {
			t.Fatal(err)
		}
		mine := map[string]string{"team": "storage"}
		r := b.NewRecorder(src)
		r.AnnotatedEventf(pod, mine, events.Warning, "FailedMount", "volume %s", "data")
		mine["team"] = "changed by the caller"
		shutdown(t, b)
		for i, evs := range seen {
			if len(evs) != 1 {
				t.Fatalf("watcher %d got %d events", i, len(evs))
			}
			e := evs[0]
			if e.Message != "volume data" || e.InvolvedObject.Name != pod.Name ||
				!cmp.Equal(e.Annotations, map[string]string{"team": "storage"}) {
				t.Errorf("watcher %d saw a changed event: %+v", i, e)
			}
		}
		stored := sink.Events()
		if len(stored) != 1 || stored[0].Message != "volume data" || stored[0].Annotations["team"] != "storage" {
			t.Errorf("sink saw a changed event: %+v", stored)
		}
	})
}

// Guarantee 7: Shutdown flushes.
func TestGuaranteeShutdownFlushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster(events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: events.Disable}))
		sinks := []*eventstest.FakeSink{startSink(t, b), startSink(t, b)}
		// The second sink fails twice first: the flush waits for its retries.
		sinks[1].FailNext(eventstest.OpCreate, 2, errTransient)
		var handled atomic.Int64
		if _, err := b.StartEventWatcher(func(*events.Event) { handled.Add(1) }); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 500 {
			r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if err := b.Shutdown(ctx); err != nil && !errors.Is(err, events.ErrLost) {
			t.Fatalf("Shutdown: %v", err)
		}
		for i, s := range sinks {
			if n := len(s.Events()); n != 500 {
				t.Errorf("sink %d stored %d events, want 500", i, n)
			}
		}
		if handled.Load() != 500 {
			t.Errorf("handler got %d events, want 500", handled.Load())
		}
		if err := b.Shutdown(ctx); err != nil && !errors.Is(err, events.ErrLost) {
			t.Errorf("second Shutdown: %v", err)
		}
	})
}

// Guarantee 7, deadline: a sink that ignores its context.
func TestGuaranteeShutdownDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		release := make(chan struct{})
		var ctxCanceled atomic.Bool
		s := eventstest.NewFakeSink()
		s.Hook = func(ctx context.Context, _ eventstest.Op, _ *events.Event) error {
			<-release // ignores ctx
			ctxCanceled.Store(ctx.Err() != nil)
			return nil
		}
		if _, err := b.StartRecordingToSink(s); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 5 {
			r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		start := time.Now()
		if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v, want DeadlineExceeded", err)
		}
		if el := time.Since(start); el != 30*time.Second {
			t.Errorf("Shutdown took %v, want 30s", el)
		}
		if len(logs.find("Shutdown gave up")) == 0 {
			t.Error("giving up not reported")
		}
		close(release) // the worker exits as soon as the call returns
		synctest.Wait()
		if !ctxCanceled.Load() {
			t.Error("the sink's ctx was not canceled")
		}
		st := b.Stats()
		if st.Written != 1 || st.Abandoned != 4 {
			t.Errorf("Stats %+v: want Written 1, Abandoned 4", st)
		}
		if len(logs.find("abandoned")) == 0 {
			t.Error("abandoned events not reported")
		}
	})
}

func TestShutdownDuringRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newLogged() // 12 tries, 10s: two minutes of retrying per event
		s := eventstest.NewFakeSink()
		s.FailNext("", 1000, errTransient)
		if _, err := b.StartRecordingToSink(s); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Normal, "A", "m")
		r.Event(pod, events.Normal, "B", "m")
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		start := time.Now()
		if err := b.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Shutdown: %v", err)
		}
		if el := time.Since(start); el != 15*time.Second {
			t.Errorf("Shutdown took %v, want 15s", el)
		}
		synctest.Wait() // the worker stops sleeping at once and exits
		calls := s.CallCount("")
		time.Sleep(time.Hour)
		if s.CallCount("") != calls {
			t.Error("retries went on after Shutdown gave up")
		}
		if st := b.Stats(); st.Abandoned != 2 || st.Written != 0 {
			t.Errorf("Stats %+v, want 2 abandoned", st)
		}
	})
}

func TestRecordingWhileShutdown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)),
			events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: events.Disable, MaxEvents: events.Disable}))
		s := startSink(t, b)
		var handled atomic.Uint64
		if _, err := b.StartEventWatcher(func(*events.Event) { handled.Add(1) }); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for g := range 100 {
			wg.Go(func() {
				r := b.NewRecorder(events.Source{Component: fmt.Sprint("c", g)})
				for i := range 50 {
					r.Eventf(pod, events.Normal, "R", "%d/%d", g, i)
					if i%10 == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			})
		}
		time.Sleep(2 * time.Millisecond)
		shutdown(t, b)
		wg.Wait()
		st := b.Stats()
		if st.Recorded+st.Dropped != 100*50 {
			t.Errorf("Stats %+v: recorded+dropped != 5000", st)
		}
		if handled.Load() != st.Recorded {
			t.Errorf("handler saw %d of %d recorded", handled.Load(), st.Recorded)
		}
		if st.Written != st.Recorded || uint64(len(s.Events())) != st.Recorded {
			t.Errorf("sink stored %d, Stats %+v", len(s.Events()), st)
		}
	})
}

func TestStopperStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newLogged()
		s := eventstest.NewFakeSink()
		s.FailNext("", 1000, errTransient)
		stop, err := b.StartRecordingToSink(s)
		if err != nil {
			t.Fatal(err)
		}
		var n atomic.Int32
		var self events.Stopper
		self, err = b.StartEventWatcher(func(*events.Event) {
			n.Add(1)
			self.Stop() // from inside the handler
		})
		if err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Normal, "A", "m")
		synctest.Wait()
		r.Event(pod, events.Normal, "B", "m")
		synctest.Wait()
		stop.Stop() // the retry in progress gives up at once
		stop.Stop()
		synctest.Wait()
		calls := s.CallCount("")
		time.Sleep(time.Hour)
		if s.CallCount("") != calls {
			t.Error("retries went on after Stop")
		}
		if n.Load() != 1 {
			t.Errorf("stopped handler called %d times, want 1", n.Load())
		}
		shutdown(t, b)
		if st := b.Stats(); st.Failed < 1 {
			t.Errorf("Stats %+v: the event given up at Stop not counted", st)
		}
	})
}

func TestHandlerPanicReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		var n int
		if _, err := b.StartEventWatcher(func(e *events.Event) {
			n++
			if e.Reason == "Boom" {
				panic("boom")
			}
		}); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Normal, "Boom", "m")
		r.Event(pod, events.Normal, "Fine", "m")
		shutdown(t, b)
		if n != 2 {
			t.Errorf("handler called %d times, want 2: the watcher goes on after a panic", n)
		}
		if st := b.Stats(); st.Failed != 1 || st.Handled != 1 {
			t.Errorf("Stats %+v", st)
		}
		if len(logs.find("panicked")) == 0 {
			t.Error("panic not reported")
		}
	})
}

func TestStartLogging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster()
		var lines []string
		if _, err := b.StartLogging(func(format string, args ...any) { lines = append(lines, fmt.Sprintf(format, args...)) }); err != nil {
			t.Fatal(err)
		}
		lc := &logCapture{}
		if _, err := b.StartStructuredLogging(lc.logger(), slog.LevelInfo); err != nil {
			t.Fatal(err)
		}
		b.NewRecorder(src).Event(pod, events.Warning, "BackOff", "restarting")
		shutdown(t, b)
		want := fmt.Sprintf("Event(%#v): type: 'Warning' reason: 'BackOff' restarting", pod)
		if len(lines) != 1 || lines[0] != want {
			t.Errorf("StartLogging wrote %q, want %q", lines, want)
		}
		recs := lc.find("Event occurred")
		if len(recs) != 1 {
			t.Fatalf("structured: %d records", len(recs))
		}
		wantAttrs := map[string]string{
			"object": "ns/web-1", "fieldPath": "", "kind": "Pod", "apiVersion": "v1",
			"type": "Warning", "reason": "BackOff", "message": "restarting",
		}
		if diff := cmp.Diff(wantAttrs, recs[0].attrs); diff != "" {
			t.Errorf("structured attrs (-want +got):\n%s", diff)
		}
	})
}

func TestRecorderEventFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := events.NewBroadcaster()
		var got []*events.Event
		if _, err := b.StartEventWatcher(func(e *events.Event) { got = append(got, e) }); err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		obj := events.ObjectReference{Kind: "Node", Name: "n1"} // no namespace
		b.NewRecorder(src).Eventf(obj, events.Normal, "NodeReady", "node %s is %d%% ready", "n1", 100)
		b.NewRecorder(src).Event(obj, events.Normal, "Raw", "100%%")
		shutdown(t, b)
		want := &events.Event{
			Name: fmt.Sprintf("n1.%x", now.UnixNano()), Namespace: "default", InvolvedObject: obj,
			Reason: "NodeReady", Message: "node n1 is 100% ready", Type: events.Normal, Source: src,
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
			ReportingController: src.Component, ReportingInstance: src.Host,
		}
		if len(got) != 2 {
			t.Fatalf("got %d events", len(got))
		}
		if diff := cmp.Diff(want, got[0]); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if got[1].Message != "100%%" {
			t.Errorf("Event formatted its message: %q", got[1].Message)
		}
	})
}

func TestOptionsPanic(t *testing.T) {
	for name, f := range map[string]func(){
		"WithRetry tries": func() { events.WithRetry(0, time.Second) },
		"WithRetry sleep": func() { events.WithRetry(1, -1) },
		"WithQueueLength": func() { events.WithQueueLength(0) },
		"correlator options": func() {
			events.NewBroadcaster(events.WithCorrelatorOptions(events.CorrelatorOptions{LRUCacheSize: -1}))
		},
		"nil handler": func() { events.NewBroadcaster().StartEventWatcher(nil) },
		"nil sink":    func() { events.NewBroadcaster().StartRecordingToSink(nil) },
		"nil logf":    func() { events.NewBroadcaster().StartLogging(nil) },
	} {
		func() {
			defer func() {
				if s, _ := recover().(string); !strings.HasPrefix(s, "events: ") {
					t.Errorf("%s: want an \"events: \" panic, got %q", name, s)
				}
			}()
			f()
		}()
	}
}

// Shutdown with a ctx that has already ended does not wait, and loses
// nothing that was written already.
func TestShutdownExpiredContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newLogged()
		s := startSink(t, b)
		b.NewRecorder(src).Event(pod, events.Normal, "A", "m")
		synctest.Wait() // written already
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		start := time.Now()
		if err := b.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Shutdown: %v", err)
		}
		synctest.Wait()
		if time.Since(start) != 0 || len(s.Events()) != 1 || b.Stats().Abandoned != 0 {
			t.Fatalf("waited %v, stored %d, Stats %+v", time.Since(start), len(s.Events()), b.Stats())
		}
	})
}
