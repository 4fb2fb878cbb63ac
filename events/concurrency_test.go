package events_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
	"github.com/heraldgo/herald/internal/testutil"
)

var errTry = errors.New("try again")

// orderSink wraps a FakeSink: each call takes a random time (0 to 3 ms)
// and fails, to be retried, with probability failP; it fails t if a call
// about an object starts while another call about it is in flight, or
// carries an older LastTimestamp than the previous call about it (events
// of one object are written one at a time, in recording order: guarantee
// 8). It records the most calls in flight at once.
type orderSink struct {
	*eventstest.FakeSink
	t     testing.TB
	failP float64

	mu       sync.Mutex
	rng      *rand.Rand
	busy     map[string]bool
	last     map[string]time.Time
	inFlight int
	maxIn    int
}

func newOrderSink(t testing.TB, seed uint64, failP float64) *orderSink {
	s := &orderSink{FakeSink: eventstest.NewFakeSink(), t: t, failP: failP,
		rng: rand.New(rand.NewPCG(seed, 1)), busy: map[string]bool{}, last: map[string]time.Time{}}
	s.Hook = s.hook
	return s
}

func (s *orderSink) hook(ctx context.Context, _ eventstest.Op, e *events.Event) error {
	o := &e.InvolvedObject
	key := o.Kind + "/" + o.Namespace + "/" + o.Name + "/" + o.UID + "/" + o.APIVersion
	s.mu.Lock()
	if s.busy[key] {
		s.t.Errorf("a call about %s began while another was in flight", key)
	}
	if e.LastTimestamp.Before(s.last[key]) {
		s.t.Errorf("a call about %s carries %v, older than the previous call's %v", key, e.LastTimestamp, s.last[key])
	}
	s.busy[key], s.last[key] = true, e.LastTimestamp
	s.inFlight++
	s.maxIn = max(s.maxIn, s.inFlight)
	d := time.Duration(s.rng.Int64N(int64(3 * time.Millisecond)))
	fail := s.rng.Float64() < s.failP
	s.mu.Unlock()
	time.Sleep(d)
	s.mu.Lock()
	s.busy[key] = false
	s.inFlight--
	s.mu.Unlock()
	if fail {
		return errTry
	}
	return nil
}

// stormEvent is one Recorder call of a storm.
type stormEvent struct {
	obj         events.ObjectReference
	typ, reason string
	message     string
}

// storm returns n Recorder calls about objects objects, with repeats (de-
// duplicated), up to 12 messages per reason (aggregated) and more than 25
// events for some objects (spam-filtered).
func storm(n, objects int, seed uint64) []stormEvent {
	rng := rand.New(rand.NewPCG(seed, 2))
	out := make([]stormEvent, n)
	for i := range out {
		o := rng.IntN(objects)
		if rng.IntN(2) == 0 {
			o = rng.IntN(max(1, objects/10)) // a hot set
		}
		out[i] = stormEvent{
			obj:     events.ObjectReference{Kind: "Pod", Namespace: fmt.Sprintf("ns%d", o%3), Name: fmt.Sprintf("pod-%d", o), UID: fmt.Sprint(o), APIVersion: "v1"},
			typ:     []string{events.Normal, events.Warning}[rng.IntN(2)],
			reason:  []string{"BackOff", "Pulled", "Unhealthy"}[rng.IntN(3)],
			message: fmt.Sprintf("m%d", rng.IntN(12)),
		}
	}
	return out
}

// runStorm records calls into a broadcaster with opts (and a fake clock
// that moves 1 µs per event) writing to sink, shuts it down, and returns
// what the sink stored, sorted by name, without ResourceVersions (a
// FakeSink numbers them in call order), and the sink's Stats.
func runStorm(t testing.TB, sink events.Sink, stored func() []events.Event, calls []stormEvent, opts ...events.Option) ([]events.Event, events.Stats) {
	t.Helper()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var tick atomic.Int64
	clock := func() time.Time { return start.Add(time.Duration(tick.Add(1)) * time.Microsecond) }
	opts = append([]events.Option{
		events.WithCorrelatorOptions(events.CorrelatorOptions{Now: clock, BurstSize: 60}),
		events.WithQueueLength(len(calls) + 1),
		events.WithRetry(50, time.Millisecond),
		events.WithLogger(slog.New(slog.DiscardHandler)),
	}, opts...)
	b := events.NewBroadcaster(opts...)
	st, err := b.StartRecordingToSink(sink)
	if err != nil {
		t.Fatal(err)
	}
	r := b.NewRecorder(events.Source{Component: "c", Host: "h"})
	for _, c := range calls {
		r.Event(c.obj, c.typ, c.reason, c.message)
	}
	if err := b.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	sst, _ := b.StatsOf(st)
	got := stored()
	for i := range got {
		got[i].ResourceVersion = ""
	}
	slices.SortFunc(got, func(a, b events.Event) int { return cmp.Compare(a.Name, b.Name) })
	return got, sst
}

// TestSinkConcurrencyOrderAndResult (guarantee 8): with WithSinkConcurrency
// and a sink whose calls take random times and sometimes fail, events about
// one object are written one at a time in recording order, calls about
// different objects overlap (at most n at once), and the sink stores the
// same events as with n = 1.
func TestSinkConcurrencyOrderAndResult(t *testing.T) {
	calls := storm(3000, 60, 1)
	synctest.Test(t, func(t *testing.T) {
		one := newOrderSink(t, 1, 0.1)
		want, wantSt := runStorm(t, one, one.Events, calls)
		if one.maxIn != 1 {
			t.Fatalf("n = 1: %d calls in flight at once", one.maxIn)
		}
		for _, n := range []int{2, 8, 64} {
			s := newOrderSink(t, uint64(n), 0.1)
			got, gotSt := runStorm(t, s, s.Events, calls, events.WithSinkConcurrency(n))
			if s.maxIn < 2 || s.maxIn > n {
				t.Errorf("n = %d: at most %d calls in flight at once, want between 2 and n", n, s.maxIn)
			}
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("n = %d: stored events differ from n = 1's (-want +got):\n%s", n, diff)
			}
			if wantSt != gotSt {
				t.Errorf("n = %d: Stats %+v, n = 1's %+v", n, gotSt, wantSt)
			}
		}
		if wantSt.Skipped == 0 || wantSt.Aggregated == 0 || wantSt.Written == 0 {
			t.Errorf("the storm exercises too little: %+v", wantSt)
		}
	})
}

// TestSinkConcurrencyRetryHoldsUpItsObjectOnly: while an event about A is
// retried, events about other objects are written; A's next event waits.
func TestSinkConcurrencyRetryHoldsUpItsObjectOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := eventstest.NewFakeSink()
		var failA atomic.Bool
		failA.Store(true)
		sink.Hook = func(_ context.Context, _ eventstest.Op, e *events.Event) error {
			if e.InvolvedObject.Name == pod.Name && failA.Load() {
				return errTry
			}
			return nil
		}
		b := events.NewBroadcaster(events.WithSinkConcurrency(2), events.WithRetry(100, time.Second),
			events.WithLogger(slog.New(slog.DiscardHandler)))
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		r.Event(pod, events.Warning, "A1", "m")
		r.Event(pod, events.Warning, "A2", "m")
		for i := range 5 {
			r.Eventf(pod2, events.Normal, "B", "b%d", i)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(sink.Events()); n != 5 {
			t.Errorf("%d events stored while A retried, want B's 5", n)
		}
		for _, c := range sink.Calls() {
			if c.Event.Reason == "A2" {
				t.Error("A2 was written while A1 was retried")
			}
		}
		failA.Store(false)
		shutdown(t, b)
		if n := len(sink.Events()); n != 7 {
			t.Errorf("%d events stored, want 7", n)
		}
	})
}

// TestSinkConcurrencyQueueLength: events waiting for their object's turn
// count against WithQueueLength: with a queue of 10 and a sink hung on one
// object, 1 event is in flight, 10 wait, and the rest are dropped,
// counted and reported.
func TestSinkConcurrencyQueueLength(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := eventstest.NewFakeSink()
		release := make(chan struct{})
		sink.Hook = func(context.Context, eventstest.Op, *events.Event) error { <-release; return nil }
		b, logs := newLogged(events.WithSinkConcurrency(4), events.WithQueueLength(10))
		st, err := b.StartRecordingToSink(sink)
		if err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 100 {
			r.Eventf(pod, events.Normal, "R", "m%d", i)
			synctest.Wait() // each event reaches the sink's goroutine before the next
		}
		close(release)
		if err := b.Shutdown(context.Background()); !errors.Is(err, events.ErrLost) {
			t.Errorf("Shutdown: %v, want a LostError", err)
		}
		s, _ := b.StatsOf(st)
		if s.Written+s.Aggregated == 0 || s.Written != 11 || s.Dropped != 89 {
			t.Errorf("sink Stats %+v: want 11 written (1 in flight, 10 waiting), 89 dropped", s)
		}
		if len(logs.find("queue full")) == 0 {
			t.Error("drops not reported")
		}
	})
}

// TestWithSinkConcurrencyPanics: n < 1 is a configuration mistake.
func TestWithSinkConcurrencyPanics(t *testing.T) {
	for _, n := range []int{0, -1} {
		msg, panicked := testutil.PanicMessage(func() { events.WithSinkConcurrency(n) })
		if !panicked || msg[:8] != "events: " {
			t.Errorf("WithSinkConcurrency(%d): panicked %v with %q, want an \"events: \" panic", n, panicked, msg)
		}
	}
}

// TestSinkConcurrencyGoroutines: no goroutine is left for a concurrent
// sink at rest, and at most n write at once.
func TestSinkConcurrencyGoroutines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := newOrderSink(t, 3, 0)
		b := events.NewBroadcaster(events.WithSinkConcurrency(16))
		if _, err := b.StartRecordingToSink(sink); err != nil {
			t.Fatal(err)
		}
		r := b.NewRecorder(src)
		for i := range 200 {
			r.Eventf(events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("p%d", i)}, events.Normal, "R", "m")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if got := writers(); got != 0 {
			t.Errorf("%d writing goroutines at rest, want 0", got)
		}
		shutdown(t, b)
		if sink.maxIn != 16 {
			t.Errorf("at most %d calls in flight, want 16", sink.maxIn)
		}
	})
}

// writers counts the goroutines of concurrent sinks.
func writers() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return strings.Count(string(buf), "events.(*dispatch).write(")
}

// FuzzSinkConcurrency decodes a stream of Recorder calls (few objects,
// reasons and messages, so that repeats, aggregation and the spam filter
// all happen) and a concurrency from the input, and checks guarantee 8:
// with a sink of random latencies and failures, each object's calls are
// one at a time and in order (orderSink), and the stored events and the
// sink's counts are those of n = 1.
func FuzzSinkConcurrency(f *testing.F) {
	f.Add([]byte{4, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte{64, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{2, 0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x98, 0xa9, 0xba, 0xcb, 0xdc, 0xed, 0xfe})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 2 || len(data) > 2000 {
			return
		}
		n := 2 + int(data[0])%63
		calls := make([]stormEvent, 0, len(data)-1)
		for _, b := range data[1:] {
			o := int(b & 3)
			calls = append(calls, stormEvent{
				obj:     events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: fmt.Sprintf("p%d", o), UID: fmt.Sprint(o), APIVersion: "v1"},
				typ:     []string{events.Normal, events.Warning}[b>>2&1],
				reason:  []string{"A", "B"}[b>>3&1],
				message: fmt.Sprintf("m%d", b>>4),
			})
		}
		synctest.Test(t, func(t *testing.T) {
			one := newOrderSink(t, 1, 0.1)
			want, wantSt := runStorm(t, one, one.Events, calls)
			s := newOrderSink(t, uint64(len(data)), 0.1)
			got, gotSt := runStorm(t, s, s.Events, calls, events.WithSinkConcurrency(n))
			if diff := gocmp.Diff(want, got); diff != "" {
				t.Errorf("n = %d: stored events differ from n = 1's (-want +got):\n%s", n, diff)
			}
			if wantSt != gotSt {
				t.Errorf("n = %d: Stats %+v, n = 1's %+v", n, gotSt, wantSt)
			}
		})
	})
}
