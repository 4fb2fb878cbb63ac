package events_test

// Soak tests: many goroutines record a long mixed stream through the whole
// pipeline (Recorder → Broadcaster → Correlator → a sink with injected
// latency, plus an event watcher), and the counters, the sink's final state
// and the heap are checked exactly at the end.
//
// The short form runs in make test. The long form (100 goroutines, 1 million
// events over 10 000 objects) runs with HERALD_SOAK=1:
//
//	HERALD_SOAK=1 go test -run Soak -v -count=1 -timeout 30m ./events/

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/heraldgo/herald/events"
)

// soakShape is the size of a soak run.
type soakShape struct {
	goroutines, events, objects int
}

func soakSize() (soakShape, bool) {
	if os.Getenv("HERALD_SOAK") == "1" {
		return soakShape{goroutines: 100, events: 1_000_000, objects: 10_000}, true
	}
	return soakShape{goroutines: 100, events: 25_000, objects: 1_250}, false
}

// tickClock is a deterministic clock: every call returns a time 1µs after
// the previous one, so that recorded events and aggregate events get
// distinct, reproducible timestamps whatever the machine's clock does, and a
// run of a million events spans a few seconds of clock time (less than
// MaxInterval: no aggregation group expires during a soak; the fuzz target
// covers expiry).
type tickClock struct {
	base time.Time
	n    atomic.Int64
}

func (c *tickClock) now() time.Time {
	return c.base.Add(time.Duration(c.n.Add(1)) * time.Microsecond)
}

// soakObjects are the objects of a soak; object o is reported by source o%10.
type soakObject struct {
	ref events.ObjectReference
	src int
}

func makeSoakObjects(n int) []soakObject {
	kinds := []string{"Pod", "Deployment", "ReplicaSet", "Node"}
	objs := make([]soakObject, n)
	for o := range objs {
		ref := events.ObjectReference{
			Kind: kinds[o%4], Namespace: fmt.Sprintf("ns-%d", o%20), Name: fmt.Sprintf("obj-%d", o),
			UID: fmt.Sprintf("uid-%d", o), APIVersion: "v1",
		}
		if ref.Kind == "Node" {
			ref.Namespace = ""
		}
		objs[o] = soakObject{ref: ref, src: o % 10}
	}
	return objs
}

func soakSources() []events.Source {
	s := make([]events.Source, 10)
	for i := range s {
		s[i] = events.Source{Component: fmt.Sprintf("ctrl-%d", i), Host: fmt.Sprintf("node-%d", i)}
	}
	return s
}

// soakReasons: per reason, its type and its number of message variants
// (groups of 12 and 15 variants reach 10 distinct messages and aggregate).
var soakReasons = []struct {
	reason   string
	typ      string
	variants int
}{
	{"Scheduled", events.Normal, 1},
	{"Pulling", events.Normal, 3},
	{"BackOff", events.Warning, 12},
	{"Unhealthy", events.Warning, 15},
	{"FailedMount", events.Warning, 2},
	{"Started", events.Normal, 1},
}

// soakEvent is one event a soak goroutine records.
type soakEvent struct {
	obj, reason, variant int
	typ                  string // overrides the reason's type for some events
	invalid              bool
	call                 int // 0 Event, 1 Eventf, 2 AnnotatedEventf
}

// soakGen makes goroutine g's events: 40% repeat one of its last 32 events
// exactly (de-duplication), half are about a hot fiftieth of the objects, one
// in 997 has an invalid type.
type soakGen struct {
	rng    *rand.Rand
	recent [32]soakEvent
	n      int
	nobj   int
}

func (g *soakGen) next() soakEvent {
	var e soakEvent
	if g.n > 0 && g.rng.Float64() < 0.4 {
		e = g.recent[g.rng.IntN(min(g.n, len(g.recent)))]
	} else {
		if g.rng.IntN(2) == 0 {
			e.obj = g.rng.IntN(max(1, g.nobj/50))
		} else {
			e.obj = g.rng.IntN(g.nobj)
		}
		e.reason = g.rng.IntN(len(soakReasons))
		e.variant = g.rng.IntN(soakReasons[e.reason].variants)
		e.typ = soakReasons[e.reason].typ
		if g.rng.IntN(8) == 0 { // both types for one reason
			e.typ = map[string]string{events.Normal: events.Warning, events.Warning: events.Normal}[e.typ]
		}
		e.call = g.rng.IntN(3)
	}
	e.invalid = g.rng.IntN(997) == 0
	g.recent[g.n%len(g.recent)] = e
	g.n++
	return e
}

func (e soakEvent) record(recs []events.Recorder, objs []soakObject) {
	o := &objs[e.obj]
	r := recs[o.src]
	typ := e.typ
	if e.invalid {
		typ = "Bogus"
	}
	reason := soakReasons[e.reason].reason
	switch e.call {
	case 0:
		r.Event(o.ref, typ, reason, reason+" variant "+fmt.Sprint(e.variant))
	case 1:
		r.Eventf(o.ref, typ, reason, "%s variant %d", reason, e.variant)
	default:
		r.AnnotatedEventf(o.ref, map[string]string{"variant": fmt.Sprint(e.variant)}, typ, reason, "%s variant %d", reason, e.variant)
	}
}

// soakSpamKey is the spam filter's default bucket: source, object, type.
func soakSpamKey(e *events.Event) string {
	o := &e.InvolvedObject
	return strings.Join([]string{e.Source.Component, e.Source.Host, o.Kind, o.Namespace, o.Name, o.UID, o.APIVersion, e.Type}, "\x00")
}

type soakStored struct {
	count int32
	rv    string
}

// soakSink stores events by namespace/name and checks every call as it
// comes:
//
//   - a Create is of a name not stored yet, with Count 1; a Patch is of a
//     stored name, with Count one more than stored (so the final Count of
//     every stored event is the number of writes of it);
//   - a plain Patch carries the ResourceVersion the sink returned last (the
//     correlator learned it through UpdateState);
//   - if shadow is set, each call is what a second Correlator with the same
//     options decides for the same input in the same order (the
//     sink's calls are then exactly the pipeline correlator's decisions,
//     none lost, reordered or altered between correlator and sink).
//
// The worker calls a sink from one goroutine; mu is for the test's reads.
type soakSink struct {
	mu           sync.Mutex
	shadow       *events.Correlator
	shadowNow    time.Time
	latencyEvery int
	latency      time.Duration

	stored                       map[string]*soakStored
	aggNames                     map[string]string // shadow's aggregate name → pipeline's
	perKey                       map[string]int    // writes per spam key
	calls, creates, patches, agg int
	rv                           int
	errs                         []string
	done                         atomic.Uint64 // calls returned, for pacing
}

func newSoakSink() *soakSink {
	return &soakSink{stored: map[string]*soakStored{}, perKey: map[string]int{}}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func (s *soakSink) fail(format string, args ...any) {
	if len(s.errs) < 10 {
		s.errs = append(s.errs, fmt.Sprintf(format, args...))
	}
}

func (s *soakSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	return s.write(e, nil)
}

func (s *soakSink) Patch(ctx context.Context, old *events.Event, p events.Patch) (*events.Event, error) {
	return s.write(old, &p)
}

func (s *soakSink) write(e *events.Event, p *events.Patch) (*events.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.done.Add(1)
	s.calls++
	if s.latencyEvery > 0 && s.calls%s.latencyEvery == 0 {
		time.Sleep(s.latency) // a slow store: the queue fills, drops are counted
	}
	aggregated := strings.HasPrefix(e.Message, events.AggregatePrefix)
	if s.shadow != nil {
		s.checkShadow(e, p, aggregated)
	}
	key := e.Namespace + "/" + e.Name
	st := s.stored[key]
	if p == nil {
		if st != nil {
			s.fail("Create of %s, stored already", key)
		}
		if e.Count != 1 {
			s.fail("Create of %s with Count %d", key, e.Count)
		}
		st = &soakStored{}
		s.stored[key] = st
		s.creates++
	} else {
		if st == nil {
			s.fail("Patch of %s, not stored", key)
			return nil, events.ErrNotFound
		}
		if p.Count != st.count+1 {
			s.fail("Patch of %s: Count %d, stored %d", key, p.Count, st.count)
		}
		if !aggregated && e.ResourceVersion != st.rv {
			s.fail("Patch of %s: ResourceVersion %q, stored %q", key, e.ResourceVersion, st.rv)
		}
		if e.Count != p.Count || e.Message != p.Message || !e.LastTimestamp.Equal(p.LastTimestamp) {
			s.fail("Patch of %s: old %+v does not have the patch %+v applied", key, e, *p)
		}
		s.patches++
	}
	if aggregated {
		s.agg++
	}
	st.count = e.Count
	s.rv++
	st.rv = fmt.Sprint(s.rv)
	s.perKey[soakSpamKey(e)]++
	out := e.Clone()
	out.ResourceVersion = st.rv
	if s.shadow != nil && !aggregated {
		s.shadow.UpdateState(out) // as the worker does: the sink changed the ResourceVersion
	}
	return out, nil
}

// checkShadow feeds the shadow correlator the event the pipeline's
// correlator was given (rebuilt from the call) and compares decisions.
func (s *soakSink) checkShadow(e *events.Event, p *events.Patch, aggregated bool) {
	in := e.Clone()
	in.Message = strings.TrimPrefix(e.Message, events.AggregatePrefix)
	in.Count, in.ResourceVersion = 1, ""
	in.FirstTimestamp = e.LastTimestamp
	if aggregated {
		in.Annotations = nil // aggregate events carry none; keys ignore them
	}
	// The pipeline's correlator read its clock for this decision; an
	// aggregate event's timestamps are that reading. No group expires in a
	// soak, so for plain events any reading gives the same decision.
	s.shadowNow = e.LastTimestamp
	res, err := s.shadow.Correlate(in)
	nameOK := err == nil && !res.Skip && res.Event.Name == e.Name
	if err == nil && !res.Skip && res.Aggregated && aggregated {
		// The pipeline names a new aggregate event after the recorded event
		// it replaces (unique in the Broadcaster), which the shadow cannot
		// know: it names it after its clock. Each shadow aggregate must
		// correspond to one pipeline aggregate, from its Create on.
		if p == nil {
			if s.aggNames == nil {
				s.aggNames = map[string]string{}
			}
			s.aggNames[res.Event.Name] = e.Name
		}
		nameOK = s.aggNames[res.Event.Name] == e.Name
	}
	switch {
	case err != nil:
		s.fail("shadow Correlate: %v", err)
	case res.Skip:
		s.fail("shadow skipped %s, the pipeline wrote it", e.Name)
	case (res.Patch == nil) != (p == nil):
		s.fail("shadow decided patch=%v for %s/%s %q, the pipeline patch=%v", res.Patch != nil, e.Namespace, e.Name, e.Message, p != nil)
	case res.Aggregated != aggregated, !nameOK, res.Event.Count != e.Count,
		res.Event.Message != e.Message, !res.Event.FirstTimestamp.Equal(e.FirstTimestamp),
		!res.Event.LastTimestamp.Equal(e.LastTimestamp):
		s.fail("shadow decided %+v, the pipeline wrote %+v", *res.Event, *e)
	}
}

// heapSampler records the peak of the live heap while a soak runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			if b := heapBytes(); b > h.peak.Load() {
				h.peak.Store(b)
			}
			select {
			case <-tk.C:
			case <-h.stop:
				return
			}
		}
	}()
	return h
}

func (h *heapSampler) end() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

func settledHeap() uint64 {
	runtime.GC()
	runtime.GC()
	return heapBytes()
}

// soakRun records the stream of shape from goroutines, then shuts b down.
// It returns the number of Recorder calls and of invalid ones, per spam key
// the number of valid events, and the time recording took.
//
// If pace is not nil, each goroutine waits, every 64 events, while pace
// reports that too much is in flight: without it, 100 goroutines outrun the
// slow sink and nearly everything is dropped, which tests little of the
// correlator. (Pacing is load shaping, not an assertion: nothing checked
// depends on timing.)
func soakRun(t *testing.T, b *events.Broadcaster, shape soakShape, seed uint64, pace func() bool) (calls, invalid int, perKey map[string]int, took time.Duration) {
	t.Helper()
	objs := makeSoakObjects(shape.objects)
	srcs := soakSources()
	recs := make([]events.Recorder, len(srcs))
	for i, s := range srcs {
		recs[i] = b.NewRecorder(s)
	}
	perG := shape.events / shape.goroutines
	counts := make([]map[string]int, shape.goroutines)
	invalids := make([]int, shape.goroutines)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range shape.goroutines {
		wg.Go(func() {
			gen := &soakGen{rng: rand.New(rand.NewPCG(seed, uint64(g))), nobj: shape.objects}
			m := map[string]int{}
			for i := range perG {
				if pace != nil && i%64 == 0 {
					for pace() {
						time.Sleep(100 * time.Microsecond)
					}
				}
				e := gen.next()
				e.record(recs, objs)
				if e.invalid {
					invalids[g]++
					continue
				}
				o := &objs[e.obj]
				m[soakSpamKey(&events.Event{Source: srcs[o.src], InvolvedObject: o.ref, Type: e.typ})]++
			}
			counts[g] = m
		})
	}
	wg.Wait()
	took = time.Since(start)
	perKey = map[string]int{}
	for g := range counts {
		for k, n := range counts[g] {
			perKey[k] += n
		}
		invalid += invalids[g]
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil && !errors.Is(err, events.ErrLost) {
		t.Fatalf("Shutdown: %v", err)
	}
	return perG * shape.goroutines, invalid, perKey, took
}

// TestSoakExact: spam filter off, de-duplication and aggregation on, a slow
// sink (drops). Every sink call is checked against a shadow
// correlator, every stored count against the writes, and the counters add up:
//
//	calls              = Recorded + Invalid   (nothing recorded during Shutdown)
//	Recorded − Dropped = Written              (one sink; nothing skipped, failed or abandoned)
//	Written            = sink calls = Σ stored Count
//	Aggregated         = sink calls with the aggregate message
func TestSoakExact(t *testing.T) {
	shape, long := soakSize()
	ignore := goleak.IgnoreCurrent()
	heap0 := settledHeap()
	sampler := startHeapSampler()

	clk := &tickClock{base: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts := events.CorrelatorOptions{BurstSize: events.Disable, Now: clk.now}
	shadowOpts := opts
	sink := newSoakSink()
	shadowOpts.Now = func() time.Time { return sink.shadowNow }
	sink.shadow = events.NewCorrelator(shadowOpts)
	sink.latencyEvery, sink.latency = 128, 100*time.Microsecond

	lc := &logCapture{}
	b := events.NewBroadcaster(events.WithCorrelatorOptions(opts), events.WithLogger(lc.logger()))
	if _, err := b.StartRecordingToSink(sink); err != nil {
		t.Fatal(err)
	}

	// The sink's backlog is Recorded − its calls − Dropped (the sink is the
	// only worker): 900 of its queue's 1000, and 100 goroutines checking
	// every 64 events overshoot it, so some events are still dropped.
	pace := func() bool {
		st := b.Stats()
		return int64(st.Recorded)-int64(sink.done.Load())-int64(st.Dropped) > 900
	}
	calls, invalid, _, took := soakRun(t, b, shape, 1, pace)
	st := b.Stats()
	peak := sampler.end()

	sink.mu.Lock()
	for _, e := range sink.errs {
		t.Error(e)
	}
	var sum int64
	for _, s := range sink.stored {
		sum += int64(s.count)
	}
	creates, patches, agg, sinkCalls, stored := sink.creates, sink.patches, sink.agg, sink.calls, len(sink.stored)
	sink.mu.Unlock()

	if got := st.Recorded + st.Invalid; got != uint64(calls) {
		t.Errorf("Recorded %d + Invalid %d = %d, want the %d calls", st.Recorded, st.Invalid, got, calls)
	}
	if st.Invalid != uint64(invalid) {
		t.Errorf("Invalid %d, want %d", st.Invalid, invalid)
	}
	if got, want := st.Written, st.Recorded-st.Dropped; got != want {
		t.Errorf("Written %d, want Recorded %d − Dropped %d = %d", got, st.Recorded, st.Dropped, want)
	}
	if st.Skipped != 0 || st.Failed != 0 || st.Abandoned != 0 || st.Handled != 0 {
		t.Errorf("Stats %+v: want nothing skipped, failed, abandoned or handled", st)
	}
	if st.Written != uint64(sinkCalls) || sum != int64(sinkCalls) {
		t.Errorf("Written %d, sink calls %d, Σ stored counts %d: want all equal", st.Written, sinkCalls, sum)
	}
	if st.Aggregated != uint64(agg) {
		t.Errorf("Aggregated %d, sink saw %d aggregate writes", st.Aggregated, agg)
	}
	if patches == 0 || agg == 0 {
		t.Errorf("the stream exercised too little: %d patches, %d aggregate writes", patches, agg)
	}
	if st.Dropped > 0 && len(lc.find("queue full")) == 0 {
		t.Error("drops not reported")
	}

	// Nothing left: release everything the run made and measure.
	b, sink, lc, pace = nil, nil, nil, nil
	heap1 := settledHeap()
	const slack = 16 << 20
	if heap1 > heap0+slack {
		t.Errorf("heap %d MiB after the run, %d MiB before: more than %d MiB retained", heap1>>20, heap0>>20, slack>>20)
	}
	goleak.VerifyNone(t, ignore)

	t.Logf("soak exact (long=%v): %d goroutines, %d calls over %d objects in %v: %.0f events/s recorded; "+
		"Recorded %d, Invalid %d, Dropped %d (queue full), Written %d (%d creates, %d patches, %d into aggregates; %d events stored); "+
		"heap %d MiB before, peak %d MiB, %d MiB after",
		long, shape.goroutines, calls, shape.objects, took.Round(time.Millisecond), float64(calls)/took.Seconds(),
		st.Recorded, st.Invalid, st.Dropped, st.Written, creates, patches, agg, stored,
		heap0>>20, peak>>20, heap1>>20)
}

// TestSoakSpamFilter: the spam filter alone (aggregation off), with a clock
// that never moves, so no bucket refills and the filter's decision per
// source+object+type is exact: the first BurstSize events pass, the rest are
// skipped. The queue holds every event (nothing dropped) and the cache holds
// every bucket (nothing evicted), so per key:
//
//	sink writes = min(events, BurstSize)
//	Skipped     = Σ max(0, events − BurstSize)
//	Recorded    = Written + Skipped = Handled (a watcher sees every event)
func TestSoakSpamFilter(t *testing.T) {
	shape, long := soakSize()
	ignore := goleak.IgnoreCurrent()
	const burst = 5
	fixed := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	opts := events.CorrelatorOptions{
		BurstSize: burst, MaxEvents: events.Disable, LRUCacheSize: 1 << 16,
		Now: func() time.Time { return fixed },
	}
	sink := newSoakSink()
	b := events.NewBroadcaster(events.WithCorrelatorOptions(opts), events.WithQueueLength(shape.events),
		events.WithLogger(discardLogger()))
	if _, err := b.StartRecordingToSink(sink); err != nil {
		t.Fatal(err)
	}
	var handled atomic.Uint64
	if _, err := b.StartEventWatcher(func(*events.Event) { handled.Add(1) }); err != nil {
		t.Fatal(err)
	}
	calls, invalid, perKey, took := soakRun(t, b, shape, 2, nil)
	st := b.Stats()

	if st.Dropped != 0 {
		t.Fatalf("Dropped %d with a queue as long as the stream", st.Dropped)
	}
	if st.Recorded+st.Invalid != uint64(calls) || st.Invalid != uint64(invalid) {
		t.Errorf("Stats %+v: want Recorded + Invalid = %d calls, Invalid %d", st, calls, invalid)
	}
	if len(perKey) > 1<<16 {
		t.Fatalf("%d spam keys: more than the cache holds", len(perKey))
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for _, e := range sink.errs {
		t.Error(e)
	}
	var wantWritten, wantSkipped uint64
	bad := 0
	for k, n := range perKey {
		want := min(n, burst)
		wantWritten += uint64(want)
		wantSkipped += uint64(n - want)
		if got := sink.perKey[k]; got != want && bad < 5 {
			bad++
			t.Errorf("key %q: %d events, %d written, want %d", k, n, got, want)
		}
	}
	if len(sink.perKey) != len(perKey) {
		t.Errorf("sink saw %d keys, %d recorded", len(sink.perKey), len(perKey))
	}
	if st.Written != wantWritten || st.Skipped != wantSkipped || uint64(sink.calls) != wantWritten {
		t.Errorf("Written %d (sink calls %d), Skipped %d; want %d and %d", st.Written, sink.calls, st.Skipped, wantWritten, wantSkipped)
	}
	if st.Recorded != st.Written+st.Skipped || st.Failed != 0 || st.Abandoned != 0 || st.Aggregated != 0 {
		t.Errorf("Stats %+v: want Recorded = Written + Skipped, nothing else", st)
	}
	if st.Handled != st.Recorded || handled.Load() != st.Recorded {
		t.Errorf("Handled %d, handler ran %d times, want Recorded %d", st.Handled, handled.Load(), st.Recorded)
	}
	b = nil
	goleak.VerifyNone(t, ignore)
	t.Logf("soak spam filter (long=%v): %d calls, %d keys in %v (%.0f events/s); Written %d (%d creates, %d patches), Skipped %d",
		long, calls, len(perKey), took.Round(time.Millisecond), float64(calls)/took.Seconds(), st.Written, sink.creates, sink.patches, st.Skipped)
}
