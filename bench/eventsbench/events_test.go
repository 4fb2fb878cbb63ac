package eventsbench

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/internal/eventstream"
)

const (
	// streamLen events make one pass. Each pass starts from a fresh
	// correlator (or pipeline), so the figures do not depend on b.N: with
	// the default spam filter (25 per source and object, then one per 5
	// minutes of the real clock) a longer run would otherwise skip more and
	// more of the stream.
	streamLen = 10000
	// batch events are recorded, then a sentinel event, and the recorder
	// waits until the sink has the sentinel: both recorders drop events
	// when their queue (1000) is full, and this keeps every run lossless.
	batch = 500
)

// stream returns eventstream.MixedStream: 1000 objects (half the events
// about a hot hundred), several sources, reasons with 1 to 15 message
// variants, 83% exact repeats: the share at which client-go's
// EventCorrelator makes 207 allocations per event, as on the stream of
// the reference figures (TestStreamMatchesAnchor checks it). The targets are
// on this stream.
//
// stream40 is the same with 40% exact repeats, the stream of the figures
// published before the calibration, on which client-go makes 154
// allocations per event: its rows stay in the table (names ending in
// -repeats40) for comparison.
//
// Each sub-benchmark makes its stream and keeps it alive until it ends,
// so that, as in the harness before the calibration, exactly one stream
// (3.4 MB) is in memory while it runs: how often the GC runs depends on
// the live heap, of which the stream is most, and herald's figures depend
// on that (bench/README.md, "The GC and the live heap").
func stream() []events.Event   { return eventstream.MixedStream(streamLen, 1) }
func stream40() []events.Event { return eventstream.MixedStreamRepeating(streamLen, 1, 0.4) }

// noPassGC (HERALD_BENCH_NOPASSGC=1) leaves out the runtime.GC() before
// each pass, to see how much the figures depend on the GC's state (see
// bench/README.md).
var noPassGC = os.Getenv("HERALD_BENCH_NOPASSGC") != ""

// ---- the same events, as each system's type ----

func k8sRef(r events.ObjectReference) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind: r.Kind, Namespace: r.Namespace, Name: r.Name, UID: k8stypes.UID(r.UID),
		APIVersion: r.APIVersion, ResourceVersion: r.ResourceVersion, FieldPath: r.FieldPath,
	}
}

// k8sEvents is the stream as client-go's recorder makes events (makeEvent
// plus the source and reporting fields), field for field.
func k8sEvents(stream []events.Event) []*corev1.Event {
	evs := make([]*corev1.Event, len(stream))
	for i := range stream {
		e := &stream[i]
		evs[i] = &corev1.Event{
			ObjectMeta:          metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace},
			InvolvedObject:      k8sRef(e.InvolvedObject),
			Reason:              e.Reason,
			Message:             e.Message,
			FirstTimestamp:      metav1.NewTime(e.FirstTimestamp),
			LastTimestamp:       metav1.NewTime(e.LastTimestamp),
			Count:               e.Count,
			Type:                e.Type,
			Source:              corev1.EventSource{Component: e.Source.Component, Host: e.Source.Host},
			ReportingController: e.ReportingController,
			ReportingInstance:   e.ReportingInstance,
		}
	}
	return evs
}

func heraldEvents(stream []events.Event) []*events.Event {
	evs := make([]*events.Event, len(stream))
	for i := range stream {
		evs[i] = stream[i].Clone()
	}
	return evs
}

// mix counts what a correlator decided over one pass of the stream, so that
// the table can show that both systems did comparable work.
type mix struct{ n, skipped, patched, aggregated int }

func (m *mix) add(o outcome, err error) {
	m.n++
	switch o {
	case skipped:
		m.skipped++
	case patched:
		m.patched++
	case aggregated:
		m.aggregated++
	}
}

func (m mix) report(b *testing.B) {
	b.Helper()
	pct := func(x int) float64 { return 100 * float64(x) / float64(max(m.n, 1)) }
	b.ReportMetric(pct(m.skipped), "skipped-%")
	b.ReportMetric(pct(m.patched), "patched-%")
	b.ReportMetric(pct(m.aggregated), "aggregated-%")
}

// BenchmarkCorrelator is workload 7: the correlator alone on the mixed
// stream, default options, UpdateState with the written event after each
// event that is not skipped on both sides (what client-go's recordToSink
// does with a sink that returns the event as stored; herald's sink worker
// skips the call when the sink changed nothing, so herald pays here for a
// call its own pipeline does not make). One op is one event. An aggregate counts as
// aggregated, not patched, on both sides (client-go patches aggregates too).
func BenchmarkCorrelator(b *testing.B) {
	correlatorRuns(b, "", stream)
	correlatorRuns(b, "-repeats40", stream40)
}

// correlatorRuns runs BenchmarkCorrelator's systems on stream, their names
// ending in suffix.
func correlatorRuns(b *testing.B, suffix string, gen func() []events.Event) {
	b.Run("k8s"+suffix, func(b *testing.B) {
		stream := gen()
		defer runtime.KeepAlive(stream)
		evs := k8sEvents(stream)
		c := record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{})
		runtime.GC()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			j := i % len(evs)
			if j == 0 && i > 0 {
				b.StopTimer()
				c = nil
				if !noPassGC {
					runtime.GC() // the last pass's correlator is not this pass's garbage
				}
				c = record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{})
				b.StartTimer()
			}
			if _, err := correlateK8s(c, evs[j]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		var m mix // over one whole pass, untimed: b.N rarely ends on a pass boundary
		c = record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{})
		for _, e := range evs {
			m.add(correlateK8s(c, e))
		}
		m.report(b)
	})
	b.Run("herald"+suffix, func(b *testing.B) {
		stream := gen()
		defer runtime.KeepAlive(stream)
		evs := heraldEvents(stream)
		c := events.NewCorrelator(events.CorrelatorOptions{})
		runtime.GC()
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			j := i % len(evs)
			if j == 0 && i > 0 {
				b.StopTimer()
				c = nil
				if !noPassGC {
					runtime.GC()
				}
				c = events.NewCorrelator(events.CorrelatorOptions{})
				b.StartTimer()
			}
			if _, err := correlateHerald(c, evs[j]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		var m mix
		c = events.NewCorrelator(events.CorrelatorOptions{})
		for _, e := range evs {
			m.add(correlateHerald(c, e))
		}
		m.report(b)
	})
}

// outcome is what a correlator decided for one event.
type outcome int

const (
	created outcome = iota
	patched
	aggregated
	skipped
)

// correlateK8s is one event through client-go's correlator, as recordToSink
// does it with a sink that returns the event as stored.
func correlateK8s(c *record.EventCorrelator, e *corev1.Event) (outcome, error) {
	res, err := c.EventCorrelate(e)
	if err != nil {
		return 0, err
	}
	if res.Skip {
		return skipped, nil
	}
	c.UpdateState(res.Event)
	switch {
	case strings.HasPrefix(res.Event.Message, events.AggregatePrefix):
		return aggregated, nil
	case res.Event.Count > 1: // recordToSink patches these
		return patched, nil
	}
	return created, nil
}

func correlateHerald(c *events.Correlator, e *events.Event) (outcome, error) {
	res, err := c.Correlate(e)
	if err != nil {
		return 0, err
	}
	if res.Skip {
		return skipped, nil
	}
	c.UpdateState(res.Event)
	switch {
	case res.Aggregated:
		return aggregated, nil
	case res.Patch != nil:
		return patched, nil
	}
	return created, nil
}

// ---- workload 8: the whole pipeline ----

const sentinelPrefix = "sentinel-"

// k8sSink is a no-op record.EventSink: it stores nothing and returns the
// event as the API server would. It signals when a sentinel is created.
type k8sSink struct {
	sentinel chan struct{}
	writes   int // Create and Patch calls, sentinels excluded; read after the pass
}

func (s *k8sSink) Create(e *corev1.Event) (*corev1.Event, error) {
	if strings.HasPrefix(e.InvolvedObject.Name, sentinelPrefix) {
		s.sentinel <- struct{}{}
		return e, nil
	}
	s.writes++
	return e, nil
}
func (s *k8sSink) Update(e *corev1.Event) (*corev1.Event, error) { s.writes++; return e, nil }
func (s *k8sSink) Patch(old *corev1.Event, _ []byte) (*corev1.Event, error) {
	s.writes++
	return old, nil
}

// heraldSink is the same for events.Sink.
type heraldSink struct {
	sentinel chan struct{}
	writes   int
}

func (s *heraldSink) Create(_ context.Context, e *events.Event) (*events.Event, error) {
	if strings.HasPrefix(e.InvolvedObject.Name, sentinelPrefix) {
		s.sentinel <- struct{}{}
		return e, nil
	}
	s.writes++
	return e, nil
}
func (s *heraldSink) Patch(_ context.Context, old *events.Event, _ events.Patch) (*events.Event, error) {
	s.writes++
	return old, nil
}

// pipeline runs b.N events through passes of the stream. start sets up a
// fresh pipeline (untimed) and returns record (the recorder call for entry
// j), sentinel (records the k-th sentinel), wait (until the sink has the
// last sentinel) and stop (tears down, untimed, and returns the sink writes
// of the pass, sentinels excluded). The sentinels (one per batch, 0.2% more
// events) are not counted in b.N.
func pipeline(b *testing.B, start func() (record func(j int), sentinel func(k int), wait func(), stop func() int)) {
	b.Helper()
	b.ReportAllocs()
	b.ResetTimer()
	// written-% counts whole passes only (b.N rarely ends on one), unless
	// there is none.
	var full, fullWrites, part, partWrites int
	k := 0
	for done := 0; done < b.N; {
		b.StopTimer()
		record, sentinel, wait, stop := start()
		// Every pass starts from a collected heap, on both sides: the
		// last pass's pipeline, and the garbage of building this one, are
		// not this pass's work.
		if !noPassGC {
			runtime.GC()
		}
		b.StartTimer()
		n := min(streamLen, b.N-done)
		for j := range n {
			record(j)
			if (j+1)%batch == 0 || j == n-1 {
				sentinel(k)
				k++
				wait()
			}
		}
		done += n
		b.StopTimer()
		if w := stop(); n == streamLen {
			full, fullWrites = full+n, fullWrites+w
		} else {
			part, partWrites = n, w
		}
		b.StartTimer()
	}
	b.StopTimer()
	if full == 0 {
		full, fullWrites = part, partWrites
	}
	b.ReportMetric(100*float64(fullWrites)/float64(full), "written-%")
}

// BenchmarkPipeline is workload 8: Recorder.Event/Eventf → broadcaster →
// correlator → a no-op sink, default options. One op is one event of the
// stream recorded (even ones with Event, odd ones with Eventf("%s", message),
// so that both pay for one Sprintf on half the events) and handled by the
// sink or skipped by the spam filter; the clock runs until the sink has the
// last one. Each source of the stream has its recorder, as in a process.
func BenchmarkPipeline(b *testing.B) {
	pipelineRuns(b, "", stream)
	b.Run("floor", func(b *testing.B) { pipelineFloor(b, stream()) })
	pipelineRuns(b, "-repeats40", stream40)
}

// pipelineRuns runs BenchmarkPipeline's systems k8s and herald on stream,
// their names ending in suffix.
func pipelineRuns(b *testing.B, suffix string, gen func() []events.Event) {
	b.Run("k8s"+suffix, func(b *testing.B) {
		stream := gen()
		// The objects as the recorder is given them (references, which it
		// uses as they are), and one recorder per source, as a process has.
		refs := make([]*corev1.ObjectReference, len(stream))
		byObject := map[events.ObjectReference]*corev1.ObjectReference{}
		for i := range stream {
			o := stream[i].InvolvedObject
			if byObject[o] == nil {
				r := k8sRef(o)
				byObject[o] = &r
			}
			refs[i] = byObject[o]
		}
		scheme := k8sruntime.NewScheme() // unused: the recorder is given references
		pipeline(b, func() (func(int), func(int), func(), func() int) {
			eb := record.NewBroadcaster()
			sink := &k8sSink{sentinel: make(chan struct{}, 1)}
			eb.StartRecordingToSink(sink)
			recs := map[events.Source]record.EventRecorder{}
			for i := range stream {
				src := stream[i].Source
				if recs[src] == nil {
					recs[src] = eb.NewRecorder(scheme, corev1.EventSource{Component: src.Component, Host: src.Host})
				}
			}
			rec := make([]record.EventRecorder, len(stream))
			for i := range stream {
				rec[i] = recs[stream[i].Source]
			}
			sentinelRec := eb.NewRecorder(scheme, corev1.EventSource{Component: "bench"})
			return func(j int) {
					e := &stream[j]
					if j%2 == 0 {
						rec[j].Event(refs[j], e.Type, e.Reason, e.Message)
					} else {
						rec[j].Eventf(refs[j], e.Type, e.Reason, "%s", e.Message)
					}
				}, func(k int) {
					sentinelRec.Event(&corev1.ObjectReference{Kind: "Pod", Namespace: "bench", Name: sentinelPrefix + strconv.Itoa(k)},
						corev1.EventTypeNormal, "Sentinel", "end of batch")
				}, func() { <-sink.sentinel },
				func() int { eb.Shutdown(); return sink.writes }
		})
	})
	b.Run("herald"+suffix, func(b *testing.B) {
		stream := gen()
		pipeline(b, func() (func(int), func(int), func(), func() int) {
			// The one option that is not the default: herald reports skipped
			// and aggregated events to slog (at most once per 10 s per cause),
			// client-go does not; discarding keeps the benchmark output
			// readable and costs nothing measurable either way.
			eb := events.NewBroadcaster(events.WithLogger(slog.New(slog.DiscardHandler)))
			sink := &heraldSink{sentinel: make(chan struct{}, 1)}
			if _, err := eb.StartRecordingToSink(sink); err != nil {
				b.Fatal(err)
			}
			recs := map[events.Source]events.Recorder{}
			for i := range stream {
				if src := stream[i].Source; recs[src] == nil {
					recs[src] = eb.NewRecorder(src)
				}
			}
			rec := make([]events.Recorder, len(stream))
			for i := range stream {
				rec[i] = recs[stream[i].Source]
			}
			sentinelRec := eb.NewRecorder(events.Source{Component: "bench"})
			return func(j int) {
					e := &stream[j]
					if j%2 == 0 {
						rec[j].Event(e.InvolvedObject, e.Type, e.Reason, e.Message)
					} else {
						rec[j].Eventf(e.InvolvedObject, e.Type, e.Reason, "%s", e.Message)
					}
				}, func(k int) {
					sentinelRec.Event(events.ObjectReference{Kind: "Pod", Namespace: "bench", Name: sentinelPrefix + strconv.Itoa(k)},
						events.Normal, "Sentinel", "end of batch")
				}, func() { <-sink.sentinel },
				func() int {
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					if err := eb.Shutdown(ctx); err != nil {
						b.Fatalf("herald events Shutdown: %v", err)
					}
					if st := eb.Stats(); st.Dropped != 0 || st.Failed != 0 {
						b.Fatalf("herald events lost events: %+v", st)
					}
					return sink.writes
				}
		})
	})
}
