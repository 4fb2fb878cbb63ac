package events_test

import (
	"context"
	"log/slog"
	"runtime"
	"testing"
	"time"

	. "github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/internal/eventstream"
)

// benchStream is the mixed stream of the benchmarks: 1000 objects, repeats
// and message variants (see eventstream.MixedStream). bench/ compares the
// same stream with client-go.
var benchStream = eventstream.MixedStream(1<<16, 1)

// BenchmarkCorrelator measures Correlate per event of the mixed stream.
//
// "passes" is what bench/eventsbench compares with client-go: a fresh
// correlator for every 10 000 events (made untimed, after a GC), real clock,
// UpdateState after each event that is not skipped. It is the figure to
// quote. The others run one correlator for the whole benchmark, so what they
// measure depends on b.N: "realclock" uses time.Now, so after the first
// 25 events per source and object the spam filter skips nearly everything
// (99% of 5 million events), and a skipped event costs little;
// "streamclock" replays the stream's own timestamps (1 ms apart), so more
// events are created, patched and aggregated; "nospam" writes every event.
func BenchmarkCorrelator(b *testing.B) {
	b.Run("passes", func(b *testing.B) {
		const pass = 10000
		stream := benchStream[:pass]
		c := NewCorrelator(CorrelatorOptions{})
		runtime.GC()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if i == pass {
				b.StopTimer()
				c, i = nil, 0
				runtime.GC()
				c = NewCorrelator(CorrelatorOptions{})
				b.StartTimer()
			}
			res, err := c.Correlate(&stream[i])
			if err != nil {
				b.Fatal(err)
			}
			if !res.Skip {
				c.UpdateState(res.Event)
			}
			i++
		}
	})
	b.Run("realclock", func(b *testing.B) {
		c := NewCorrelator(CorrelatorOptions{})
		benchCorrelate(b, c)
	})
	b.Run("streamclock", func(b *testing.B) {
		var now time.Time
		c := NewCorrelator(CorrelatorOptions{Now: func() time.Time { return now }})
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			e := &benchStream[i%len(benchStream)]
			now = e.LastTimestamp.Add(time.Duration(i/len(benchStream)) * time.Hour)
			if _, err := c.Correlate(e); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("nospam", func(b *testing.B) {
		c := NewCorrelator(CorrelatorOptions{BurstSize: Disable})
		benchCorrelate(b, c)
	})
}

func benchCorrelate(b *testing.B, c *Correlator) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := c.Correlate(&benchStream[i%len(benchStream)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// nopSink stores nothing and returns what it is given.
type nopSink struct{}

func (nopSink) Create(_ context.Context, e *Event) (*Event, error)         { return e, nil }
func (nopSink) Patch(_ context.Context, e *Event, _ Patch) (*Event, error) { return e, nil }

// BenchmarkPipeline measures Recorder.Event → Broadcaster → Correlator → a
// no-op sink, per event of the mixed stream, including the sink worker's
// time: the recorder waits whenever more than 512 events are in flight, so
// none is dropped, and the loop ends with the worker caught up.
func BenchmarkPipeline(b *testing.B) {
	for _, tc := range []struct {
		name string
		o    CorrelatorOptions
	}{
		{"defaults", CorrelatorOptions{}},
		{"nospam", CorrelatorOptions{BurstSize: Disable}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			bc := NewBroadcaster(WithCorrelatorOptions(tc.o), WithLogger(slog.New(slog.DiscardHandler)))
			if _, err := bc.StartRecordingToSink(nopSink{}); err != nil {
				b.Fatal(err)
			}
			recs := map[Source]Recorder{}
			for i := range benchStream {
				if s := benchStream[i].Source; recs[s] == nil {
					recs[s] = bc.NewRecorder(s)
				}
			}
			processed := func() uint64 {
				s := bc.Stats()
				return s.Written + s.Skipped + s.Failed + s.Dropped
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				e := &benchStream[i%len(benchStream)]
				recs[e.Source].Event(e.InvolvedObject, e.Type, e.Reason, e.Message)
				i++
				if i%256 == 0 {
					for uint64(i)-processed() > 512 {
						runtime.Gosched()
					}
				}
			}
			for uint64(i) != processed() {
				runtime.Gosched()
			}
			b.StopTimer()
			if d := bc.Stats().Dropped; d > 0 {
				b.Errorf("%d events dropped", d)
			}
			if err := bc.Shutdown(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRecorder measures Recorder.Event alone, with no watcher.
func BenchmarkRecorder(b *testing.B) {
	bc := NewBroadcaster()
	r := bc.NewRecorder(benchStream[0].Source)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		e := &benchStream[i%len(benchStream)]
		r.Event(e.InvolvedObject, e.Type, e.Reason, e.Message)
		i++
	}
	b.StopTimer()
	_ = bc.Shutdown(context.Background())
}

// BenchmarkCache replays the correlator's access pattern (find or insert
// the record of a key, then update it in place) on the de-duplication keys
// of the mixed stream, with 4096 entries, the default: herald's lru against
// hashicorp/golang-lru/v2's simplelru, the single-goroutine LRU of the
// most used Go LRU module. DESIGN.md has the numbers.
func BenchmarkCache(b *testing.B) {
	b.Run("herald", func(b *testing.B) { BenchCacheHerald(b, benchStream) })
	b.Run("hashicorp", func(b *testing.B) { BenchCacheHashicorp(b, benchStream) })
}

// BenchmarkBucket compares the spam filter's token bucket with
// golang.org/x/time/rate's Limiter (see bucket.go).
func BenchmarkBucket(b *testing.B) {
	b.Run("herald", BenchBucketHerald)
	b.Run("xrate", BenchBucketXRate)
}
