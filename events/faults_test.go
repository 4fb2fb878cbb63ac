package events_test

// Fault injection: sinks that fail at random, hang or panic, handlers that
// panic, and Stoppers used in odd ways. Everything timed runs in a
// testing/synctest bubble, so 10-second retry sleeps and hour-long hangs
// pass at once, and a goroutine left blocked fails the bubble.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

// faultOutcome is what a chaosSink does with one call.
type faultOutcome int

const (
	outOK        faultOutcome = iota
	outTransient              // a plain error: retried
	outRejected               // ErrRejected: never retried
	outExists                 // ErrAlreadyExists: recorded
	outNotFound               // ErrNotFound (the stored event is deleted first on Patch)
	outSpike                  // a latency spike (honoring ctx), then stored
	outHang                   // an hour-long hang (honoring ctx), then a plain error
)

var outcomeNames = map[faultOutcome]string{
	outOK: "ok", outTransient: "transient", outRejected: "rejected", outExists: "exists",
	outNotFound: "notfound", outSpike: "spike", outHang: "hang",
}

// chaosCall is one call a chaosSink received.
type chaosCall struct {
	op         eventstest.Op
	reason     string // the event's identity in these tests
	count      int32
	out        faultOutcome
	err        error // what the call returned
	start, end time.Time
}

// chaosSink is a sink whose calls fail at random, seeded. It stores events
// by name, so Patch of a name never stored returns ErrNotFound and Create of
// a stored one ErrAlreadyExists, as a real store would.
type chaosSink struct {
	rng    *rand.Rand
	mu     sync.Mutex
	stored map[string]*events.Event
	calls  []chaosCall
}

func (s *chaosSink) pick() faultOutcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch n := s.rng.IntN(100); {
	case n < 40:
		return outOK
	case n < 65:
		return outTransient
	case n < 70:
		return outRejected
	case n < 75:
		return outExists
	case n < 85:
		return outNotFound
	case n < 95:
		return outSpike
	default:
		return outHang
	}
}

func (s *chaosSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	return s.do(ctx, eventstest.OpCreate, e, nil)
}

func (s *chaosSink) Patch(ctx context.Context, old *events.Event, p events.Patch) (*events.Event, error) {
	return s.do(ctx, eventstest.OpPatch, old, &p)
}

func (s *chaosSink) do(ctx context.Context, op eventstest.Op, e *events.Event, p *events.Patch) (*events.Event, error) {
	c := chaosCall{op: op, reason: e.Reason, count: e.Count, out: s.pick(), start: time.Now()}
	var err error
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	switch c.out {
	case outTransient:
		err = errTransient
	case outRejected:
		err = fmt.Errorf("%w: quota", events.ErrRejected)
	case outExists:
		err = fmt.Errorf("wrapped: %w", events.ErrAlreadyExists)
	case outNotFound:
		err = events.ErrNotFound
	case outHang:
		wait(time.Hour)
		err = fmt.Errorf("hung up: %w", errTransient)
	case outSpike:
		if !wait(time.Duration(1+s.rng.IntN(30)) * time.Second) {
			err = ctx.Err()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		_, ok := s.stored[e.Name]
		switch {
		case p == nil && ok:
			err = events.ErrAlreadyExists
		case p != nil && !ok:
			err = events.ErrNotFound
		default:
			s.stored[e.Name] = e.Clone()
		}
	} else if c.out == outNotFound && p != nil {
		delete(s.stored, e.Name) // gone
	}
	c.err, c.end = err, time.Now()
	s.calls = append(s.calls, c)
	if err != nil {
		return nil, err
	}
	return e.Clone(), nil
}

// retryVerdict is how the retry rules end one correlator decision.
type retryVerdict int

const (
	verdictWritten retryVerdict = iota
	verdictFailed
)

// checkRetries checks the calls of one decision (the event reason, count
// count) against guarantee 4 and WithRetry(maxTries, sleep), and returns its
// verdict:
//
//   - a try is one call, or Patch answered ErrNotFound followed at once by a
//     Create of the same event (the fallback);
//   - nil or ErrAlreadyExists ends the decision as written; ErrRejected ends
//     it as failed; any other error, ErrNotFound from Create included, is
//     followed by another try, unless it was try maxTries (failed);
//   - the first sleep between tries is within [0, sleep] (jittered), the
//     others are exactly sleep (synctest's clock is exact).
func checkRetries(t *testing.T, calls []chaosCall, maxTries int, sleep time.Duration) retryVerdict {
	t.Helper()
	desc := func() string {
		var b strings.Builder
		for _, c := range calls {
			fmt.Fprintf(&b, " %s(%s)", c.op, outcomeNames[c.out])
		}
		return b.String()
	}
	try := 1
	for i := 0; i < len(calls); i++ {
		c := calls[i]
		if c.op == eventstest.OpPatch && errors.Is(c.err, events.ErrNotFound) {
			if i+1 >= len(calls) || calls[i+1].op != eventstest.OpCreate || !calls[i+1].start.Equal(c.end) {
				t.Errorf("%s/%d: Patch answered ErrNotFound not followed at once by a Create:%s", c.reason, c.count, desc())
				return verdictFailed
			}
			i++
			c = calls[i]
		}
		last := i == len(calls)-1
		switch {
		case c.err == nil || errors.Is(c.err, events.ErrAlreadyExists):
			if !last {
				t.Errorf("%s/%d: tried again after it was stored:%s", c.reason, c.count, desc())
			}
			return verdictWritten
		case errors.Is(c.err, events.ErrRejected):
			if !last {
				t.Errorf("%s/%d: retried after ErrRejected:%s", c.reason, c.count, desc())
			}
			return verdictFailed
		case try == maxTries:
			if !last {
				t.Errorf("%s/%d: more than %d tries:%s", c.reason, c.count, maxTries, desc())
			}
			return verdictFailed
		case last:
			t.Errorf("%s/%d: gave up after try %d of %d on a retriable error:%s", c.reason, c.count, try, maxTries, desc())
			return verdictFailed
		}
		gap := calls[i+1].start.Sub(c.end)
		if try == 1 && (gap < 0 || gap > sleep) || try > 1 && gap != sleep {
			t.Errorf("%s/%d: slept %v after try %d, want %s", c.reason, c.count, gap, try,
				map[bool]string{true: "a jittered fraction of " + sleep.String(), false: sleep.String()}[try == 1])
		}
		try++
	}
	t.Errorf("no calls")
	return verdictFailed
}

// TestFaultsRandomSink: a sink failing at random (transient errors,
// ErrRejected, ErrAlreadyExists, ErrNotFound, latency spikes, hangs); every
// event's calls follow the retry rules, events are written in recording
// order, and Stats count each outcome.
func TestFaultsRandomSink(t *testing.T) {
	const maxTries, sleep = 4, 10 * time.Second
	for seed := range uint64(12) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				sink := &chaosSink{rng: rand.New(rand.NewPCG(seed, 7)), stored: map[string]*events.Event{}}
				b, logs := newLogged(events.WithRetry(maxTries, sleep),
					events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: events.Disable, MaxEvents: events.Disable}))
				if _, err := b.StartRecordingToSink(sink); err != nil {
					t.Fatal(err)
				}
				// 40 events, each recorded 1 to 3 times, interleaved: with
				// spam filter and aggregation off, the k-th occurrence of
				// an event is a decision with Count k (a Create for k = 1).
				type decision struct {
					reason string
					count  int32
				}
				var want []decision
				seen := map[string]int32{}
				r := b.NewRecorder(src)
				for range 80 {
					reason := fmt.Sprint("R", rng.IntN(40))
					seen[reason]++
					want = append(want, decision{reason, seen[reason]})
					r.Event(pod, events.Warning, reason, "m")
				}
				ctx, cancel := context.WithTimeout(context.Background(), 1000*time.Hour)
				defer cancel()
				if err := b.Shutdown(ctx); err != nil && !errors.Is(err, events.ErrLost) {
					t.Fatalf("Shutdown: %v", err)
				}

				// Group the calls by decision, in order.
				var got []decision
				var groups [][]chaosCall
				for _, c := range sink.calls {
					d := decision{c.reason, c.count}
					if len(got) == 0 || got[len(got)-1] != d {
						got = append(got, d)
						groups = append(groups, nil)
					}
					groups[len(groups)-1] = append(groups[len(groups)-1], c)
				}
				if diff := cmp.Diff(want, got, cmp.AllowUnexported(decision{})); diff != "" {
					t.Fatalf("decisions written (-want +got):\n%s", diff)
				}
				var written, failed uint64
				for i, g := range groups {
					if wantOp := map[bool]eventstest.Op{true: eventstest.OpCreate, false: eventstest.OpPatch}[want[i].count == 1]; g[0].op != wantOp {
						t.Errorf("%v: first call %s, want %s", want[i], g[0].op, wantOp)
					}
					if checkRetries(t, g, maxTries, sleep) == verdictWritten {
						written++
					} else {
						failed++
					}
				}
				st := b.Stats()
				if diff := cmp.Diff(events.Stats{Recorded: 80, Written: written, Failed: failed}, st); diff != "" {
					t.Errorf("Stats (-want +got):\n%s", diff)
				}
				if failed > 0 && len(logs.find("rejected"))+len(logs.find("retry limit")) == 0 {
					t.Error("failed events not reported")
				}
			})
		})
	}
}

// hangSink blocks every call until release is closed, ignoring its ctx,
// then returns err; it records whether ctx had been canceled by then.
type hangSink struct {
	release  chan struct{}
	err      error
	calls    atomic.Int32
	canceled atomic.Bool
}

func (s *hangSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	s.calls.Add(1)
	<-s.release
	s.canceled.Store(ctx.Err() != nil)
	if s.err != nil {
		return nil, s.err
	}
	return e, nil
}

func (s *hangSink) Patch(ctx context.Context, e *events.Event, _ events.Patch) (*events.Event, error) {
	return s.Create(ctx, e)
}

// TestFaultsHangingSink: a sink that ignores its ctx cannot hold up
// Shutdown(ctx) past its deadline; other sinks and watchers still get
// everything; the hanging sink's ctx is canceled; every event it did not
// store is counted (Abandoned) and reported; its worker exits as soon as the
// call returns and makes no further call (the bubble would not end
// otherwise).
func TestFaultsHangingSink(t *testing.T) {
	for _, tc := range []struct {
		name          string
		err           error // what the hung call returns once released
		wantWritten   uint64
		wantAbandoned uint64
	}{
		{"hung call then succeeds", nil, 1, 4},
		{"hung call then fails", errTransient, 0, 5},
		{"hung call then rejected", events.ErrRejected, 0, 4}, // the rejected one is Failed
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, logs := newLogged(events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: events.Disable}))
				hang := &hangSink{release: make(chan struct{}), err: tc.err}
				if _, err := b.StartRecordingToSink(hang); err != nil {
					t.Fatal(err)
				}
				good := startSink(t, b)
				var handled atomic.Int32
				if _, err := b.StartEventWatcher(func(*events.Event) { handled.Add(1) }); err != nil {
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
					t.Errorf("Shutdown returned after %v, want its 30s deadline", el)
				}
				if n := len(good.Events()); n != 5 || handled.Load() != 5 {
					t.Errorf("the other sink stored %d, the watcher handled %d; want 5 and 5", n, handled.Load())
				}
				if len(logs.find("Shutdown gave up")) == 0 {
					t.Error("giving up not reported")
				}
				close(hang.release)
				synctest.Wait()
				if !hang.canceled.Load() {
					t.Error("the hanging sink's ctx was not canceled")
				}
				if n := hang.calls.Load(); n != 1 {
					t.Errorf("hanging sink called %d times, want 1: nothing is tried once Shutdown gave up", n)
				}
				st := b.Stats()
				wantFailed := uint64(0)
				if errors.Is(tc.err, events.ErrRejected) {
					wantFailed = 1
				}
				want := events.Stats{Recorded: 5, Written: 5 + tc.wantWritten, Handled: 5, Abandoned: tc.wantAbandoned, Failed: wantFailed}
				if diff := cmp.Diff(want, st); diff != "" {
					t.Errorf("Stats (-want +got):\n%s", diff)
				}
				// The queued events are reported by count, the one in the
				// sink call (if not stored) by the event.
				recs := logs.find("abandoned at Shutdown")
				if len(recs) != 1 || recs[0].attrs["abandoned"] != "4" {
					t.Errorf("abandoned report %+v, want one with abandoned=4", recs)
				}
				if tc.err != nil && !errors.Is(tc.err, events.ErrRejected) {
					if recs := logs.find("stopped or shut down while retrying"); len(recs) == 0 || recs[0].attrs["event.reason"] != "R0" {
						t.Errorf("the event in the hung call not reported: %+v", recs)
					}
				}
				if err := b.Shutdown(context.Background()); err != nil && !errors.Is(err, events.ErrLost) {
					t.Errorf("Shutdown after the first gave up: %v, want nil", err)
				}
			})
		})
	}
}

// TestFaultsHandlerPanics: a panicking handler is recovered, reported with
// its stack, counted in Failed; its watcher goes on with the next events,
// and the other watchers, loggers and sinks see everything.
func TestFaultsHandlerPanics(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(b *events.Broadcaster, boom func(e *events.Event)) (events.Stopper, error)
	}{
		{"StartEventWatcher", func(b *events.Broadcaster, boom func(*events.Event)) (events.Stopper, error) {
			return b.StartEventWatcher(boom)
		}},
		{"StartLogging", func(b *events.Broadcaster, boom func(*events.Event)) (events.Stopper, error) {
			return b.StartLogging(func(format string, args ...any) {
				msg := fmt.Sprintf(format, args...)
				boom(&events.Event{Reason: map[bool]string{true: "Boom", false: ""}[strings.Contains(msg, "'Boom'")]})
			})
		}},
		{"StartStructuredLogging", func(b *events.Broadcaster, boom func(*events.Event)) (events.Stopper, error) {
			return b.StartStructuredLogging(slog.New(&panicHandler{boom: boom}), slog.LevelInfo)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, logs := newLogged()
				var calls, booms atomic.Int32
				boom := func(e *events.Event) {
					calls.Add(1)
					if e.Reason == "Boom" {
						booms.Add(1)
						panicHere(booms.Load())
					}
				}
				if _, err := tc.start(b, boom); err != nil {
					t.Fatal(err)
				}
				var other []string
				if _, err := b.StartEventWatcher(func(e *events.Event) { other = append(other, e.Reason) }); err != nil {
					t.Fatal(err)
				}
				sink := startSink(t, b)
				r := b.NewRecorder(src)
				var want []string
				for i := range 10 {
					reason := fmt.Sprint("Fine", i)
					if i%3 == 0 {
						reason = "Boom"
					}
					want = append(want, reason)
					r.Event(pod, events.Normal, reason, fmt.Sprint(i))
				}
				shutdown(t, b)
				if calls.Load() != 10 || booms.Load() != 4 {
					t.Errorf("handler called %d times (%d panics), want 10 (4): the watcher goes on after a panic", calls.Load(), booms.Load())
				}
				if diff := cmp.Diff(want, other); diff != "" {
					t.Errorf("the other watcher (-want +got):\n%s", diff)
				}
				st := b.Stats()
				if st.Failed != 4 || st.Handled != 6+10 || st.Written != 10 || len(sink.Events()) != 10 {
					t.Errorf("Stats %+v, stored %d: want Failed 4, Handled 16, Written 10 (10 events)", st, len(sink.Events()))
				}
				recs := logs.find("panicked")
				if len(recs) != 4 {
					t.Fatalf("%d panic reports, want 4 (one per panic)", len(recs))
				}
				for _, rec := range recs {
					if !strings.HasPrefix(rec.attrs["panic"], "boom ") || !strings.Contains(rec.attrs["stack"], "panicHere") {
						t.Errorf("panic report without the panic value or the panicking function's stack: panic=%q stack=%.200q",
							rec.attrs["panic"], rec.attrs["stack"])
					}
				}
			})
		})
	}
}

//go:noinline
func panicHere(n int32) { panic(fmt.Sprint("boom ", n)) }

// panicHandler is a slog.Handler that calls boom with the record's reason.
type panicHandler struct{ boom func(*events.Event) }

func (h *panicHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *panicHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *panicHandler) WithGroup(string) slog.Handler            { return h }
func (h *panicHandler) Handle(_ context.Context, r slog.Record) error {
	e := &events.Event{}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "reason" {
			e.Reason = a.Value.String()
		}
		return true
	})
	h.boom(e)
	return nil
}

// TestFaultsHandlerPanicNil: panic(nil) is a panic too (Go 1.21+): counted
// and reported, not taken for a normal return.
func TestFaultsHandlerPanicNil(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged()
		n := 0
		if _, err := b.StartEventWatcher(func(*events.Event) { n++; panic(nil) }); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Normal, "A", "m")
		r.Event(pod, events.Normal, "B", "m")
		shutdown(t, b)
		if st := b.Stats(); n != 2 || st.Failed != 2 || st.Handled != 0 {
			t.Errorf("handler ran %d times, Stats %+v: want 2 runs, Failed 2, Handled 0", n, st)
		}
		if len(logs.find("panicked")) != 2 {
			t.Error("panic(nil) not reported")
		}
	})
}

// panicSink panics in the first call of op boom[op] whose event reason is
// that value.
type panicSink struct {
	*eventstest.FakeSink
	boom map[eventstest.Op]string
}

func (s *panicSink) maybePanic(op eventstest.Op, e *events.Event) {
	if r, ok := s.boom[op]; ok && r == e.Reason {
		delete(s.boom, op)
		panicHere(1)
	}
}

func (s *panicSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	s.maybePanic(eventstest.OpCreate, e)
	return s.FakeSink.Create(ctx, e)
}

func (s *panicSink) Patch(ctx context.Context, e *events.Event, p events.Patch) (*events.Event, error) {
	s.maybePanic(eventstest.OpPatch, e)
	return s.FakeSink.Patch(ctx, e, p)
}

// TestFaultsSinkPanics: a sink call that panics is recovered, reported with
// the stack, counted in Failed, and not retried (a panic is a bug, not a
// transient failure); the worker goes on. The correlator has still observed
// the event, so its next occurrence patches it, finds it gone and creates
// it (guarantee 4's fallback).
func TestFaultsSinkPanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		boom map[eventstest.Op]string
		want []sinkStep
	}{
		{
			name: "Create panics",
			boom: map[eventstest.Op]string{eventstest.OpCreate: "A"},
			want: []sinkStep{
				// A's Create panicked before the FakeSink saw it.
				{eventstest.OpPatch, 2, "m"}, {eventstest.OpCreate, 2, "m"}, // A again: gone, created
				{eventstest.OpCreate, 1, "m"}, // B
			},
		},
		{
			name: "Patch panics",
			boom: map[eventstest.Op]string{eventstest.OpPatch: "A"},
			want: []sinkStep{
				{eventstest.OpCreate, 1, "m"}, // A
				// A again: Patch panicked, not retried, no fallback.
				{eventstest.OpCreate, 1, "m"}, // B
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b, logs := newLogged()
				s := &panicSink{FakeSink: eventstest.NewFakeSink(), boom: tc.boom}
				if _, err := b.StartRecordingToSink(s); err != nil {
					t.Fatal(err)
				}
				r := b.NewRecorder(src)
				r.Event(pod, events.Normal, "A", "m")
				r.Event(pod, events.Normal, "A", "m")
				r.Event(pod, events.Normal, "B", "m")
				shutdown(t, b)
				if diff := cmp.Diff(tc.want, sinkSteps(s.FakeSink)); diff != "" {
					t.Errorf("sink calls (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(events.Stats{Recorded: 3, Written: 2, Failed: 1}, b.Stats()); diff != "" {
					t.Errorf("Stats (-want +got):\n%s", diff)
				}
				recs := logs.find("panicked")
				if len(recs) != 1 || !strings.Contains(recs[0].attrs["stack"], "panicHere") || !strings.Contains(recs[0].attrs["by"], "sink") {
					t.Errorf("panic reports %+v, want one naming the sink, with the stack", recs)
				}
			})
		})
	}
}

// TestFaultsStopTwice: Stop is idempotent, safe from many goroutines at once
// (-race), from inside its handler, and after Shutdown; a Stopper from a
// failed Start can be stopped too. Stopping one watcher leaves the others
// alone.
func TestFaultsStopTwice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newLogged()
		var a, c atomic.Int32
		sa, err := b.StartEventWatcher(func(*events.Event) { a.Add(1) })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.StartEventWatcher(func(*events.Event) { c.Add(1) }); err != nil {
			t.Fatal(err)
		}
		var self events.Stopper
		var selfRuns atomic.Int32
		self, err = b.StartEventWatcher(func(*events.Event) {
			selfRuns.Add(1)
			self.Stop()
			self.Stop()
		})
		if err != nil {
			t.Fatal(err)
		}
		sk, err := b.StartRecordingToSink(eventstest.NewFakeSink())
		if err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Normal, "A", "m")
		synctest.Wait()
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				sa.Stop()
				sk.Stop()
				runtime.Gosched()
				sa.Stop()
			})
		}
		wg.Wait()
		r.Event(pod, events.Normal, "B", "m")
		shutdown(t, b)
		sa.Stop()
		sk.Stop()
		self.Stop()
		if a.Load() != 1 || c.Load() != 2 || selfRuns.Load() != 1 {
			t.Errorf("stopped watcher ran %d times (want 1), the other %d (want 2), the self-stopping one %d (want 1)",
				a.Load(), c.Load(), selfRuns.Load())
		}
		late, err := b.StartEventWatcher(func(*events.Event) {})
		if err == nil {
			t.Fatal("StartEventWatcher after Shutdown: nil error")
		}
		late.Stop()
		late.Stop()
	})
}

// TestFaultsStopMidCall: Stop returns at once while the sink is inside a
// call that ignores its ctx; the ctx is canceled; the worker exits when the
// call returns, without another call; Shutdown waits for it.
func TestFaultsStopMidCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newLogged()
		hang := &hangSink{release: make(chan struct{}), err: errTransient}
		stop, err := b.StartRecordingToSink(hang)
		if err != nil {
			t.Fatal(err)
		}
		b.NewRecorder(src).Event(pod, events.Normal, "A", "m")
		synctest.Wait() // inside the call
		stopped := make(chan struct{})
		go func() { stop.Stop(); close(stopped) }()
		synctest.Wait()
		select {
		case <-stopped:
		default:
			t.Fatal("Stop waited for the sink call")
		}
		shut := make(chan error, 1)
		go func() { shut <- b.Shutdown(context.Background()) }()
		synctest.Wait()
		select {
		case err := <-shut:
			t.Fatalf("Shutdown returned %v while a worker was still in a sink call", err)
		default:
		}
		close(hang.release)
		if err := <-shut; err != nil && !errors.Is(err, events.ErrLost) {
			t.Fatalf("Shutdown: %v", err)
		}
		if !hang.canceled.Load() || hang.calls.Load() != 1 {
			t.Errorf("ctx canceled %v, %d calls: want canceled, 1 call", hang.canceled.Load(), hang.calls.Load())
		}
		if st := b.Stats(); st.Failed != 1 || st.Written != 0 {
			t.Errorf("Stats %+v: want the event given up at Stop counted in Failed", st)
		}
	})
}

// loseA runs the scenario of the tests of user code that fails on the
// event with reason "A": a FakeSink (prepared by setup, if not nil) on a
// broadcaster with opts, events A then B recorded, Shutdown. It checks that
// the sink stored B alone and that Stats are want, and returns the reports.
// Call it inside a synctest bubble.
func loseA(t *testing.T, opts events.CorrelatorOptions, setup func(*eventstest.FakeSink), want events.Stats) *logCapture {
	t.Helper()
	b, logs := newLogged(events.WithCorrelatorOptions(opts))
	s := eventstest.NewFakeSink()
	if setup != nil {
		setup(s)
	}
	if _, err := b.StartRecordingToSink(s); err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(src)
	r.Event(pod, events.Normal, "A", "m")
	r.Event(pod, events.Normal, "B", "m")
	shutdown(t, b)
	if diff := cmp.Diff(want, b.Stats()); diff != "" {
		t.Errorf("Stats (-want +got):\n%s", diff)
	}
	if got := s.Events(); len(got) != 1 || got[0].Reason != "B" {
		t.Errorf("sink holds %+v, want only B", got)
	}
	return logs
}

// TestFaultsCorrelatorOptionPanics: a KeyFunc, MessageFunc or SpamKeyFunc
// that panics inside a sink's correlator loses that one event (counted in
// Failed, reported with its stack), not the process; the sink goes on with
// the next event, and Shutdown still returns nil. A Now that panics in a
// Recorder does not reach the Recorder's caller: the event is stamped with
// time.Now instead, and the panic is reported.
func TestFaultsCorrelatorOptionPanics(t *testing.T) {
	boom := func(e *events.Event) {
		if e.Reason == "A" {
			panic("option panicked on A")
		}
	}
	for _, tc := range []struct {
		name string
		opts events.CorrelatorOptions
		want events.Stats
	}{
		{"KeyFunc", events.CorrelatorOptions{KeyFunc: func(e *events.Event) (string, string) {
			boom(e)
			return e.Reason, e.Message
		}}, events.Stats{Recorded: 2, Written: 1, Failed: 1}},
		{"SpamKeyFunc", events.CorrelatorOptions{SpamKeyFunc: func(e *events.Event) string {
			boom(e)
			return e.Reason
		}}, events.Stats{Recorded: 2, Written: 1, Failed: 1}},
		{"MessageFunc", events.CorrelatorOptions{MaxEvents: 1, MessageFunc: func(e *events.Event) string {
			boom(e)
			return "combined: " + e.Message
		}}, events.Stats{Recorded: 2, Aggregated: 1, Written: 1, Failed: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := loseA(t, tc.opts, nil, tc.want)
				recs := logs.find("panicked")
				if len(recs) != 1 || !strings.Contains(recs[0].attrs["panic"], "option panicked on A") ||
					!strings.Contains(recs[0].attrs["stack"], "TestFaultsCorrelatorOptionPanics") ||
					!strings.Contains(recs[0].attrs["by"], "sink") {
					t.Errorf("panic reports %+v, want one naming the sink, with the panic and its stack", recs)
				}
			})
		})
	}
	t.Run("Now", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			calls := 0
			b, logs := newLogged(events.WithCorrelatorOptions(events.CorrelatorOptions{Now: func() time.Time {
				calls++
				if calls == 1 {
					panic("clock panicked")
				}
				return time.Now()
			}}))
			s := eventstest.NewFakeSink()
			if _, err := b.StartRecordingToSink(s); err != nil {
				t.Fatal(err)
			}
			r := b.NewRecorder(src)
			r.Event(pod, events.Normal, "A", "m") // Now panics: stamped with time.Now
			r.Event(pod, events.Normal, "B", "m")
			shutdown(t, b)
			if diff := cmp.Diff(events.Stats{Recorded: 2, Written: 2}, b.Stats()); diff != "" {
				t.Errorf("Stats (-want +got):\n%s", diff)
			}
			if got := s.Events(); len(got) != 2 || !got[0].FirstTimestamp.Equal(time.Now()) {
				t.Errorf("sink holds %+v, want A and B, A stamped with time.Now (%v)", got, time.Now())
			}
			recs := logs.find("panicked")
			if len(recs) != 1 || !strings.Contains(recs[0].attrs["panic"], "clock panicked") {
				t.Errorf("panic reports %+v, want one with the panic", recs)
			}
		})
	})
}

// TestFaultsLoggerPanics: a WithLogger logger whose handler panics costs
// its reports, nothing else: a Recorder that reports (an invalid type)
// does not panic, a sink worker that reports (a retry, a skipped event)
// goes on, and Shutdown, which reports what is left, returns nil.
func TestFaultsLoggerPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logger := slog.New(&panicHandler{boom: func(*events.Event) { panic("logger panicked") }})
		b := events.NewBroadcaster(events.WithLogger(logger),
			events.WithRetry(3, time.Second),
			events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: 1}))
		s := eventstest.NewFakeSink()
		s.FailNext(eventstest.OpCreate, 1, errors.New("transient"))
		if _, err := b.StartRecordingToSink(s); err != nil {
			t.Fatal(err)
		}
		lost := events.CaptureLostReports()
		r := b.NewRecorder(src)
		r.Event(pod, "Bogus", "A", "m")           // invalid: reported by the Recorder
		r.Event(pod, events.Normal, "A", "m")     // retried once: reported at Debug
		r.Event(pod, events.Normal, "B", "other") // over the burst: skipped, reported
		shutdown(t, b)
		if diff := cmp.Diff(events.Stats{Recorded: 2, Invalid: 1, Written: 1, Skipped: 1}, b.Stats()); diff != "" {
			t.Errorf("Stats (-want +got):\n%s", diff)
		}
		if got := s.Events(); len(got) != 1 || got[0].Reason != "A" {
			t.Errorf("sink holds %+v, want A", got)
		}
		// The three reports (invalid, retry, skipped) are each said lost;
		// flush at Shutdown had nothing pending.
		if got := strings.Count(lost(), "events: the logger panicked (logger panicked); a report was lost\n"); got != 3 {
			t.Errorf("%d lines say a report was lost, want 3", got)
		}
	})
}

// isPanicErr is an error whose Is method panics.
type isPanicErr struct{}

func (isPanicErr) Error() string { return "an error whose Is panics" }
func (isPanicErr) Is(error) bool { panic("Is panicked") }

// TestFaultsSinkErrorPanics: an error from the sink whose Is method panics
// (errors.Is calls it while the worker classifies the error) loses that
// event only, as a panicking sink call does.
func TestFaultsSinkErrorPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := loseA(t, events.CorrelatorOptions{},
			func(s *eventstest.FakeSink) { s.FailNext(eventstest.OpCreate, 1, isPanicErr{}) },
			events.Stats{Recorded: 2, Written: 1, Failed: 1})
		if recs := logs.find("panicked"); len(recs) != 1 || !strings.Contains(recs[0].attrs["panic"], "Is panicked") {
			t.Errorf("panic reports %+v, want one with the panic", recs)
		}
	})
}

// TestFaultsStopIsNotAbandon: the events that Stop discards, and the one
// whose sink call it cuts short, are counted in Failed, never in Abandoned
// (which is Shutdown's deadline's), however the worker, woken by the
// canceled context, races Stop. Real goroutines, not a bubble: the race
// needs the worker to run on another processor while Stop is still
// inside. Before Stop set a flag ahead of canceling, most runs counted
// them as Abandoned.
func TestFaultsStopIsNotAbandon(t *testing.T) {
	const n = 50
	for run := range 100 {
		b, logs := newLogged()
		s := eventstest.NewFakeSink()
		inside := make(chan struct{}, 1)
		s.Hook = func(ctx context.Context, _ eventstest.Op, _ *events.Event) error {
			select {
			case inside <- struct{}{}:
			default:
			}
			<-ctx.Done() // a sink that waits until its context ends
			return ctx.Err()
		}
		st, err := b.StartRecordingToSink(s)
		if err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range n {
			r.Event(pod, events.Normal, "R", fmt.Sprint(i))
		}
		<-inside // the worker is inside the first sink call
		// Recorders keep pubMu busy while Stop runs, which widens the
		// window between Stop's cancel and its unregistering the watcher.
		var wg sync.WaitGroup
		stop, started := make(chan struct{}), make(chan struct{}, 2)
		for range 2 {
			wg.Go(func() {
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
						r.Event(pod2, events.Normal, "R", "m")
					}
					if i == 100 {
						started <- struct{}{}
					}
				}
			})
		}
		<-started
		<-started
		st.Stop()
		close(stop)
		wg.Wait()
		shutdown(t, b)
		if got := b.Stats(); got.Abandoned != 0 || got.Failed < n || got.Written != 0 {
			t.Fatalf("run %d: Stats %+v, want nothing Abandoned or Written and at least %d Failed", run, got, n)
		}
		if recs := logs.find("abandoned"); len(recs) != 0 {
			t.Fatalf("run %d: abandoned reports %+v, want none", run, recs)
		}
	}
}

// renamingSink stores events under names of its own, as an API server with
// generateName would, setting them on its copy in place (the copy is the
// sink's: the Sink interface's doc), and patches by those names.
type renamingSink struct {
	next   int
	stored map[string]events.Event
	calls  []string
}

func (s *renamingSink) Create(_ context.Context, e *events.Event) (*events.Event, error) {
	s.next++
	e.Name = fmt.Sprintf("srv-%d", s.next)
	e.ResourceVersion = fmt.Sprint(s.next)
	s.stored[e.Name] = *e
	s.calls = append(s.calls, fmt.Sprintf("Create %s count=%d", e.Name, e.Count))
	return e, nil
}

func (s *renamingSink) Patch(_ context.Context, old *events.Event, p events.Patch) (*events.Event, error) {
	if _, ok := s.stored[old.Name]; !ok {
		s.calls = append(s.calls, fmt.Sprintf("Patch %s: not found", old.Name))
		return nil, events.ErrNotFound
	}
	old.Count = p.Count
	s.stored[old.Name] = *old
	s.calls = append(s.calls, fmt.Sprintf("Patch %s count=%d", old.Name, p.Count))
	return old, nil
}

// TestSinkChangesItsCopy: a sink that names the stored event itself and
// sets the name on its own copy in place (returning that copy) gets the
// repeats as Patches of that name, as one that returns a new value does.
// The worker used to compare the sink's result with the copy it had
// handed over, found no change, and kept the name the sink never stored.
func TestSinkChangesItsCopy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newLogged()
		s := &renamingSink{stored: map[string]events.Event{}}
		if _, err := b.StartRecordingToSink(s); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for range 3 {
			r.Event(pod, events.Normal, "R", "m")
		}
		shutdown(t, b)
		want := []string{"Create srv-1 count=1", "Patch srv-1 count=2", "Patch srv-1 count=3"}
		if diff := cmp.Diff(want, s.calls); diff != "" {
			t.Errorf("sink calls (-want +got):\n%s", diff)
		}
	})
}

// TestAggregatedCountsWrittenOnly: Stats.Aggregated counts the events
// written as part of an aggregate event, a part of Written; an aggregated
// event the sink rejects is Failed only (it was counted in both).
func TestAggregatedCountsWrittenOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, logs := newLogged(events.WithCorrelatorOptions(events.CorrelatorOptions{MaxEvents: 1}))
		s := eventstest.NewFakeSink()
		s.FailNext(eventstest.OpCreate, 2, events.ErrRejected)
		if _, err := b.StartRecordingToSink(s); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 4 { // every event aggregates; the first two creates are rejected
			r.Event(pod, events.Normal, "R", fmt.Sprint("m", i))
		}
		shutdown(t, b)
		if diff := cmp.Diff(events.Stats{Recorded: 4, Aggregated: 2, Written: 2, Failed: 2}, b.Stats()); diff != "" {
			t.Errorf("Stats (-want +got):\n%s", diff)
		}
		var reported uint64
		for _, rec := range logs.find("aggregated") {
			n, _ := strconv.ParseUint(rec.attrs["count"], 10, 64)
			reported += n
		}
		if reported != 2 {
			t.Errorf("reports count %d aggregated events, want 2", reported)
		}
	})
}

// goexitErr is an error whose Is method calls runtime.Goexit.
type goexitErr struct{}

func (goexitErr) Error() string { return "an error whose Is calls Goexit" }
func (goexitErr) Is(error) bool { runtime.Goexit(); return false }

// TestFaultsGoexitOutsideCalls: runtime.Goexit (t.Fatal in a test's
// KeyFunc, say) from user code that runs outside the handler or sink call
// (a CorrelatorOptions function, a sink error's Is method) loses that event
// only, counted in Failed and reported, as a panic there does; it was
// neither (found by a review).
func TestFaultsGoexitOutsideCalls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  events.CorrelatorOptions
		setup func(*eventstest.FakeSink)
	}{
		{name: "KeyFunc", opts: events.CorrelatorOptions{KeyFunc: func(e *events.Event) (string, string) {
			if e.Reason == "A" {
				runtime.Goexit()
			}
			return e.Reason, e.Message
		}}},
		{name: "error's Is", setup: func(s *eventstest.FakeSink) { s.FailNext(eventstest.OpCreate, 1, goexitErr{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				logs := loseA(t, tc.opts, tc.setup, events.Stats{Recorded: 2, Written: 1, Failed: 1})
				if recs := logs.find("Goexit"); len(recs) != 1 || !strings.Contains(recs[0].attrs["by"], "sink") {
					t.Errorf("Goexit reports %+v, want one naming the sink", recs)
				}
			})
		})
	}
}

// TestStoppedWorkersForgotten: a stopped sink or watcher is forgotten once
// its goroutine has exited, so that starting and stopping sinks does not
// keep every sink and correlator for the broadcaster's life (they were
// kept: about 0.7 MB per stopped sink, found by a review); what its queue
// dropped stays in Stats.
func TestStoppedWorkersForgotten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := newLogged(events.WithQueueLength(1))
		r := b.NewRecorder(src)
		for range 20 {
			s := eventstest.NewFakeSink()
			st, err := b.StartRecordingToSink(s)
			if err != nil {
				t.Fatal(err)
			}
			r.Event(pod, events.Normal, "R", "m")
			synctest.Wait()
			st.Stop()
		}
		// One more, whose queue overflows before Stop: 1 in the sink call,
		// 1 queued (discarded by Stop), 3 dropped.
		release := make(chan struct{})
		s := eventstest.NewFakeSink()
		s.Hook = func(ctx context.Context, _ eventstest.Op, _ *events.Event) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
		st, err := b.StartRecordingToSink(s)
		if err != nil {
			t.Fatal(err)
		}
		r.Event(pod, events.Normal, "A", "m")
		synctest.Wait() // in the sink call
		for range 4 {
			r.Event(pod, events.Normal, "A", "m")
		}
		st.Stop()
		close(release)
		synctest.Wait()
		if n := events.Workers(b); n != 0 {
			t.Errorf("the broadcaster keeps %d workers after all were stopped, want 0", n)
		}
		if got := b.Stats().Dropped; got != 3 {
			t.Errorf("Stats().Dropped %d after the workers were forgotten, want 3", got)
		}
		shutdown(t, b)
	})
}
