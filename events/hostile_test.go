package events_test

// Hostile and odd input to every exported entry point of events and
// eventstest: each case has one defined outcome (a result, a clear error,
// or, for a configuration mistake, a panic whose message starts with
// "events: "), checked whole with cmp.Diff. Every case runs in a synctest
// bubble, which fails a deadlocked case instead of hanging, and under -race.

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"math"
	"slices"
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
	"github.com/heraldgo/herald/internal/eventstream"
	"github.com/heraldgo/herald/internal/testutil"
)

// hostileOutcome is everything a case observes.
type hostileOutcome struct {
	Panic   string   // the panic message, if the case panicked
	Err     string   // errors the case saw, "; "-joined
	Watched []string // what a watcher got: "Type Reason Message" (long strings summarized)
	Stored  []string // what a FakeSink stored, the same way
	Stats   events.Stats
	Reports []string // kinds of reports logged (see reportKinds)
	Notes   []string // anything else a case checks
}

// reportKinds maps a substring of a report to a short name.
var reportKinds = []struct{ sub, kind string }{
	{"queue full", "queue-full"},
	{"after Shutdown", "closed"},
	{"invalid event", "invalid"},
	{"panicked", "panic"},
	{"spam filter", "skipped"},
	{"aggregated", "aggregated"},
	{"rejected", "rejected"},
	{"retry limit", "retries-exhausted"},
	{"while retrying", "gave-up"},
	{"events still queued for it discarded", "discarded"},
	{"Shutdown gave up", "shutdown-gave-up"},
	{"abandoned at Shutdown", "abandoned"},
	{"Event occurred", "structured-log"},
}

func reportsOf(lc *logCapture) []string {
	var out []string
	for _, k := range reportKinds {
		if len(lc.find(k.sub)) > 0 {
			out = append(out, k.kind)
		}
	}
	return out
}

// short summarizes s: itself if short, else its length and checksum.
func short(s string) string {
	if len(s) <= 64 {
		return s
	}
	return fmt.Sprintf("<%d bytes %08x>", len(s), crc32.ChecksumIEEE([]byte(s)))
}

func summary(e *events.Event) string {
	s := strings.TrimSpace(fmt.Sprintf("%s %s %s", e.Type, short(e.Reason), short(e.Message)))
	if e.Annotations != nil {
		s += fmt.Sprintf(" %v", e.Annotations)
	}
	return s
}

// hostileEnv is a broadcaster with a watcher and a FakeSink started, and a
// log capture.
type hostileEnv struct {
	t    *testing.T
	b    *events.Broadcaster
	lc   *logCapture
	sink *eventstest.FakeSink
	r    events.Recorder
	mu   sync.Mutex
	seen []string
	errs []string
	note []string
}

func (h *hostileEnv) errf(format string, args ...any) {
	h.errs = append(h.errs, fmt.Sprintf(format, args...))
}
func (h *hostileEnv) notef(format string, args ...any) {
	h.mu.Lock()
	h.note = append(h.note, fmt.Sprintf(format, args...))
	h.mu.Unlock()
}

// pipeline runs act on a fresh broadcaster made with opts (plus a capturing
// logger first, which opts may override), then shuts it down and collects
// the outcome. A panic in the options, NewBroadcaster or act is the outcome.
func pipeline(t *testing.T, opts func() []events.Option, act func(h *hostileEnv)) (out hostileOutcome) {
	h := &hostileEnv{t: t, lc: &logCapture{}}
	msg, panicked := testutil.PanicMessage(func() {
		var o []events.Option
		if opts != nil {
			o = opts()
		}
		h.b = events.NewBroadcaster(append([]events.Option{events.WithLogger(h.lc.logger())}, o...)...)
	})
	if panicked {
		return hostileOutcome{Panic: msg}
	}
	if _, err := h.b.StartEventWatcher(func(e *events.Event) {
		h.mu.Lock()
		h.seen = append(h.seen, summary(e))
		h.mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	h.sink = startSink(t, h.b)
	h.r = h.b.NewRecorder(src)
	if act != nil {
		if msg, panicked := testutil.PanicMessage(func() { act(h) }); panicked {
			out.Panic = msg
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := h.b.Shutdown(ctx); err != nil && !errors.Is(err, events.ErrLost) {
		h.errf("Shutdown: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	out.Watched = h.seen
	for _, e := range h.sink.Events() {
		out.Stored = append(out.Stored, summary(&e))
	}
	out.Stats = h.b.Stats()
	out.Reports = reportsOf(h.lc)
	out.Err = strings.Join(h.errs, "; ")
	out.Notes = h.note
	return out
}

// one is the outcome of recording one event that reaches the watcher and
// the sink.
func one(s string) hostileOutcome {
	return hostileOutcome{
		Watched: []string{s}, Stored: []string{s},
		Stats: events.Stats{Recorded: 1, Written: 1, Handled: 1},
	}
}

func opts(o ...events.Option) func() []events.Option { return func() []events.Option { return o } }

// recordOne records a Normal "R" "m" event.
func recordOne(h *hostileEnv) { h.r.Event(pod, events.Normal, "R", "m") }

// stringerPanics is a fmt.Stringer whose String panics.
type stringerPanics struct{}

func (stringerPanics) String() string { panic("boom") }

type nilStringer struct{ s string }

func (n *nilStringer) String() string { return n.s }

// failingSink fails every call with a retriable error and counts calls;
// after cancelAt calls it calls cancel (if set).
type failingSink struct {
	calls    atomic.Int64
	cancelAt int64
	cancel   func()
}

func (s *failingSink) Create(ctx context.Context, e *events.Event) (*events.Event, error) {
	if n := s.calls.Add(1); n == s.cancelAt && s.cancel != nil {
		s.cancel()
	}
	return nil, errTransient
}

func (s *failingSink) Patch(ctx context.Context, e *events.Event, _ events.Patch) (*events.Event, error) {
	return s.Create(ctx, e)
}

// retryOutcome records one event into a broadcaster with opts whose only
// sink always fails, and shuts down with ctx (canceled after cancelAt sink
// calls if cancelAt > 0).
func retryOutcome(t *testing.T, o []events.Option, cancelAt int64) hostileOutcome {
	lc := &logCapture{}
	var out hostileOutcome
	msg, panicked := testutil.PanicMessage(func() {
		b := events.NewBroadcaster(append([]events.Option{events.WithLogger(lc.logger())}, o...)...)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		s := &failingSink{cancelAt: cancelAt, cancel: cancel}
		if _, err := b.StartRecordingToSink(s); err != nil {
			t.Fatal(err)
		}
		b.NewRecorder(src).Event(pod, events.Normal, "R", "m")
		if err := b.Shutdown(ctx); err != nil && !errors.Is(err, events.ErrLost) {
			out.Err = err.Error()
		}
		synctest.Wait()
		out.Stats = b.Stats()
		calls := s.calls.Load()
		if cancelAt > 0 {
			// The worker retries until Shutdown, which runs concurrently,
			// sees its ctx canceled and cancels the sinks'.
			if calls < cancelAt {
				out.Notes = append(out.Notes, fmt.Sprintf("%d calls, want at least %d", calls, cancelAt))
			}
		} else {
			out.Notes = append(out.Notes, fmt.Sprintf("%d calls", calls))
		}
	})
	if panicked {
		out.Panic = msg
	}
	out.Reports = reportsOf(lc)
	return out
}

func TestHostileInput(t *testing.T) {
	mib := strings.Repeat("x", 1<<20)
	mibOut := short(mib)
	const defaultOut = "Normal R m"
	cases := []struct {
		name string
		run  func(t *testing.T) hostileOutcome
		want hostileOutcome
	}{
		// NewBroadcaster and its options.
		{"NewBroadcaster defaults", func(t *testing.T) hostileOutcome { return pipeline(t, nil, recordOne) }, one(defaultOut)},
		{"NewBroadcaster nil Option", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(nil, nil), recordOne)
		}, one(defaultOut)},
		{"WithQueueLength 0", func(t *testing.T) hostileOutcome {
			return pipeline(t, func() []events.Option { return []events.Option{events.WithQueueLength(0)} }, recordOne)
		}, hostileOutcome{Panic: "events: WithQueueLength: n must be at least 1"}},
		{"WithQueueLength -1", func(t *testing.T) hostileOutcome {
			return pipeline(t, func() []events.Option { return []events.Option{events.WithQueueLength(-1)} }, recordOne)
		}, hostileOutcome{Panic: "events: WithQueueLength: n must be at least 1"}},
		{"WithQueueLength MinInt", func(t *testing.T) hostileOutcome {
			return pipeline(t, func() []events.Option { return []events.Option{events.WithQueueLength(math.MinInt)} }, recordOne)
		}, hostileOutcome{Panic: "events: WithQueueLength: n must be at least 1"}},
		{"WithQueueLength broadcast.MaxQueueLength", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithQueueLength(broadcast.MaxQueueLength)), recordOne)
		}, one(defaultOut)},
		// Beyond broadcast.MaxQueueLength the option itself panics (it
		// used to be NewBroadcaster, with the broadcast package's message).
		{"WithQueueLength MaxInt", func(t *testing.T) hostileOutcome {
			return pipeline(t, func() []events.Option { return []events.Option{events.WithQueueLength(math.MaxInt)} }, recordOne)
		}, hostileOutcome{Panic: fmt.Sprintf("events: WithQueueLength: n must be at most broadcast.MaxQueueLength (%d), got %d", broadcast.MaxQueueLength, math.MaxInt)}},
		{"WithQueueLength 1, events recorded one by one", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithQueueLength(1)), func(h *hostileEnv) {
				for i := range 3 {
					h.r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
					synctest.Wait()
				}
			})
		}, hostileOutcome{
			Watched: []string{"Normal R0 m", "Normal R1 m", "Normal R2 m"}, Stored: []string{"Normal R0 m", "Normal R1 m", "Normal R2 m"},
			Stats: events.Stats{Recorded: 3, Written: 3, Handled: 3},
		}},
		{"WithRetry 0 tries", func(t *testing.T) hostileOutcome {
			return pipeline(t, func() []events.Option { return []events.Option{events.WithRetry(0, time.Second)} }, nil)
		}, hostileOutcome{Panic: "events: WithRetry: maxTries must be at least 1"}},
		{"WithRetry MinInt tries", func(t *testing.T) hostileOutcome {
			return pipeline(t, func() []events.Option { return []events.Option{events.WithRetry(math.MinInt, time.Second)} }, nil)
		}, hostileOutcome{Panic: "events: WithRetry: maxTries must be at least 1"}},
		{"WithRetry negative sleep", func(t *testing.T) hostileOutcome {
			return pipeline(t, func() []events.Option { return []events.Option{events.WithRetry(3, math.MinInt64)} }, nil)
		}, hostileOutcome{Panic: "events: WithRetry: sleep must not be negative"}},
		{"WithRetry 1 try", func(t *testing.T) hostileOutcome {
			return retryOutcome(t, []events.Option{events.WithRetry(1, time.Hour)}, 0)
		}, hostileOutcome{Stats: events.Stats{Recorded: 1, Failed: 1}, Reports: []string{"retries-exhausted"}, Notes: []string{"1 calls"}}},
		{"WithRetry 2 tries, sleep MaxInt64", func(t *testing.T) hostileOutcome {
			// The jittered first sleep is up to 292 years of synctest's clock.
			return retryOutcome(t, []events.Option{events.WithRetry(2, math.MaxInt64)}, 0)
		}, hostileOutcome{Stats: events.Stats{Recorded: 1, Failed: 1}, Reports: []string{"retries-exhausted"}, Notes: []string{"2 calls"}}},
		{"WithRetry MaxInt tries, no sleep, Shutdown canceled", func(t *testing.T) hostileOutcome {
			// Retries without sleeping, for ever, until Shutdown's ctx ends.
			return retryOutcome(t, []events.Option{events.WithRetry(math.MaxInt, 0)}, 1000)
		}, hostileOutcome{Err: "context canceled", Stats: events.Stats{Recorded: 1, Abandoned: 1}, Reports: []string{"gave-up", "shutdown-gave-up"}}},
		{"WithLogger nil", func(t *testing.T) hostileOutcome {
			// Reports go to slog.Default().
			lc := &logCapture{}
			old := slog.Default()
			slog.SetDefault(lc.logger())
			defer slog.SetDefault(old)
			out := pipeline(t, opts(events.WithLogger(nil)), func(h *hostileEnv) { h.r.Event(pod, "Bogus", "R", "m") })
			out.Notes = reportsOf(lc)
			return out
		}, hostileOutcome{Stats: events.Stats{Invalid: 1}, Notes: []string{"invalid"}}},
		{"WithCorrelatorOptions zero", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{})), recordOne)
		}, one(defaultOut)},
		{"CorrelatorOptions LRUCacheSize -1", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{LRUCacheSize: -1})), nil)
		}, hostileOutcome{Panic: "events: CorrelatorOptions.LRUCacheSize must not be negative"}},
		{"CorrelatorOptions QPS -1", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{QPS: -1})), nil)
		}, hostileOutcome{Panic: "events: CorrelatorOptions.QPS must not be negative"}},
		{"CorrelatorOptions QPS -Inf", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{QPS: math.Inf(-1)})), nil)
		}, hostileOutcome{Panic: "events: CorrelatorOptions.QPS must not be negative"}},
		{"CorrelatorOptions MaxInterval -1", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{MaxInterval: -1})), nil)
		}, hostileOutcome{Panic: "events: CorrelatorOptions.MaxInterval must not be negative"}},
		{"CorrelatorOptions BurstSize MinInt: spam filter off", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: math.MinInt, MaxEvents: events.Disable})),
				func(h *hostileEnv) {
					for i := range 40 {
						h.r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
					}
				})
		}, func() hostileOutcome {
			var s []string
			for i := range 40 {
				s = append(s, fmt.Sprintf("Normal R%d m", i))
			}
			return hostileOutcome{Watched: s, Stored: s, Stats: events.Stats{Recorded: 40, Written: 40, Handled: 40}}
		}()},
		{"CorrelatorOptions BurstSize 1, QPS +Inf: nothing skipped", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: 1, QPS: math.Inf(1)})),
				func(h *hostileEnv) {
					for i := range 3 {
						h.r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
					}
				})
		}, hostileOutcome{
			Watched: []string{"Normal R0 m", "Normal R1 m", "Normal R2 m"}, Stored: []string{"Normal R0 m", "Normal R1 m", "Normal R2 m"},
			Stats: events.Stats{Recorded: 3, Written: 3, Handled: 3},
		}},
		{"CorrelatorOptions BurstSize 1: one event, then skips", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{BurstSize: 1})),
				func(h *hostileEnv) {
					for i := range 3 {
						h.r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
					}
				})
		}, hostileOutcome{
			Watched: []string{"Normal R0 m", "Normal R1 m", "Normal R2 m"}, Stored: []string{"Normal R0 m"},
			Stats: events.Stats{Recorded: 3, Written: 1, Skipped: 2, Handled: 3}, Reports: []string{"skipped"},
		}},
		{"CorrelatorOptions MaxEvents 1: every event aggregated", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{MaxEvents: 1})),
				func(h *hostileEnv) {
					h.r.Event(pod, events.Normal, "R", "a")
					h.r.Event(pod, events.Normal, "R", "b")
				})
		}, hostileOutcome{
			Watched: []string{"Normal R a", "Normal R b"}, Stored: []string{"Normal R " + events.AggregatePrefix + "b"},
			Stats: events.Stats{Recorded: 2, Written: 2, Aggregated: 2, Handled: 2}, Reports: []string{"aggregated"},
		}},
		{"CorrelatorOptions huge sizes", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{
				LRUCacheSize: math.MaxInt, BurstSize: math.MaxInt, MaxEvents: math.MaxInt, MaxInterval: math.MaxInt64, QPS: math.MaxFloat64,
			})), recordOne)
		}, one(defaultOut)},

		// Recorders.
		{"zero ObjectReference", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				h.b.NewRecorder(events.Source{}).Event(events.ObjectReference{}, events.Normal, "R", "m")
			})
		}, one("Normal R m")},
		{"zero Source, ObjectReference with a name only", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				var got *events.Event
				if _, err := h.b.StartEventWatcher(func(e *events.Event) { got = e }); err != nil {
					t.Fatal(err)
				}
				h.b.NewRecorder(events.Source{}).Event(events.ObjectReference{Name: "x"}, events.Normal, "R", "m")
				synctest.Wait()
				h.notef("name %q namespace %q source %+v reporting %q/%q", strings.SplitN(got.Name, ".", 2)[0]+".",
					got.Namespace, got.Source, got.ReportingController, got.ReportingInstance)
			})
		}, func() hostileOutcome {
			o := one(defaultOut)
			o.Stats.Handled = 2
			o.Notes = []string{`name "x." namespace "default" source {Component: Host:} reporting ""/""`}
			return o
		}()},
		{"empty reason and message", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) { h.r.Event(pod, events.Warning, "", "") })
		}, one("Warning")},
		{"empty message", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) { h.r.Event(pod, events.Warning, "R", "") })
		}, one("Warning R")},
		{"1 MiB reason and message", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) { h.r.Eventf(pod, events.Warning, mib, "%s", mib) })
		}, one("Warning " + mibOut + " " + mibOut)},
		{"1 MiB object name", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				obj := pod
				obj.Name = mib
				var got *events.Event
				if _, err := h.b.StartEventWatcher(func(e *events.Event) { got = e }); err != nil {
					t.Fatal(err)
				}
				h.r.Event(obj, events.Normal, "R", "m")
				synctest.Wait()
				h.notef("name starts with the object name and a dot: %v", strings.HasPrefix(got.Name, mib+"."))
			})
		}, func() hostileOutcome {
			o := one(defaultOut)
			o.Stats.Handled = 2
			o.Notes = []string{"name starts with the object name and a dot: true"}
			return o
		}()},
		{"invalid event types", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				for _, typ := range []string{"", "normal", "WARNING", "Warning ", "Error", "\x00", mib} {
					h.r.Event(pod, typ, "R", "m")
					h.r.Eventf(pod, typ, "R", "%d", 1)
					h.r.AnnotatedEventf(pod, map[string]string{"a": "b"}, typ, "R", "m")
				}
			})
		}, hostileOutcome{Stats: events.Stats{Invalid: 21}, Reports: []string{"invalid"}}},
		{"format strings", func(t *testing.T) hostileOutcome {
			return pipeline(t, opts(events.WithCorrelatorOptions(events.CorrelatorOptions{MaxEvents: events.Disable})), func(h *hostileEnv) {
				h.r.Eventf(pod, events.Normal, "Missing", "%d %s", 1)
				h.r.Eventf(pod, events.Normal, "Extra", "%d", 1, 2)
				h.r.Eventf(pod, events.Normal, "NoArgs", "%d")
				h.r.Eventf(pod, events.Normal, "Percent", "100%%")
				h.r.Event(pod, events.Normal, "Literal", "100%%")
				h.r.Eventf(pod, events.Normal, "Stringer", "%v", stringerPanics{})
				h.r.Eventf(pod, events.Normal, "NilStringer", "%v", (*nilStringer)(nil))
				h.r.AnnotatedEventf(pod, nil, events.Normal, "Annotated", "%s=%d", "n")
			})
		}, func() hostileOutcome {
			s := []string{
				"Normal Missing 1 %!s(MISSING)", "Normal Extra 1%!(EXTRA int=2)", "Normal NoArgs %!d(MISSING)",
				"Normal Percent 100%", "Normal Literal 100%%", "Normal Stringer %!v(PANIC=String method: boom)",
				"Normal NilStringer <nil>", "Normal Annotated n=%!d(MISSING)",
			}
			return hostileOutcome{Watched: s, Stored: s, Stats: events.Stats{Recorded: 8, Written: 8, Handled: 8}}
		}()},
		{"annotations: mutated after the call, nil, empty", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				ann := map[string]string{"team": "storage"}
				h.r.AnnotatedEventf(pod, ann, events.Warning, "A", "m")
				ann["team"] = "changed"
				ann["new"] = "added"
				delete(ann, "team")
				h.r.AnnotatedEventf(pod, nil, events.Warning, "B", "m")
				h.r.AnnotatedEventf(pod, map[string]string{}, events.Warning, "C", "m")
			})
		}, func() hostileOutcome {
			s := []string{"Warning A m map[team:storage]", "Warning B m", "Warning C m map[]"}
			return hostileOutcome{Watched: s, Stored: s, Stats: events.Stats{Recorded: 3, Written: 3, Handled: 3}}
		}()},
		{"a Recorder of a zero or nil Broadcaster", func(t *testing.T) hostileOutcome {
			old := slog.Default()
			slog.SetDefault(slog.New(slog.DiscardHandler))
			defer slog.SetDefault(old)
			var out hostileOutcome
			msg, panicked := testutil.PanicMessage(func() {
				(*events.Broadcaster)(nil).NewRecorder(src).Event(pod, events.Normal, "R", "m")
				new(events.Broadcaster).NewRecorder(src).AnnotatedEventf(pod, nil, events.Normal, "R", "%d")
				out.Stats = new(events.Broadcaster).Stats()
			})
			if panicked {
				out.Panic = msg
			}
			return out
		}, hostileOutcome{}},

		// Start methods.
		{"StartEventWatcher nil", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) { h.b.StartEventWatcher(nil) })
		}, hostileOutcome{Panic: "events: StartEventWatcher: nil handler"}},
		{"StartRecordingToSink nil", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) { h.b.StartRecordingToSink(nil) })
		}, hostileOutcome{Panic: "events: StartRecordingToSink: nil sink"}},
		{"StartRecordingToSink typed nil: each call panics, recovered and counted", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				if _, err := h.b.StartRecordingToSink((*eventstest.FakeSink)(nil)); err != nil {
					h.errf("%v", err)
				}
				recordOne(h)
			})
		}, hostileOutcome{
			Watched: []string{defaultOut}, Stored: []string{defaultOut},
			Stats: events.Stats{Recorded: 1, Written: 1, Handled: 1, Failed: 1}, Reports: []string{"panic"},
		}},
		{"StartLogging nil", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) { h.b.StartLogging(nil) })
		}, hostileOutcome{Panic: "events: StartLogging: nil logf"}},
		{"StartStructuredLogging nil logger: the broadcaster's", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				if _, err := h.b.StartStructuredLogging(nil, slog.LevelInfo); err != nil {
					h.errf("%v", err)
				}
				recordOne(h)
			})
		}, func() hostileOutcome {
			o := one(defaultOut)
			o.Stats.Handled = 2
			o.Reports = []string{"structured-log"}
			return o
		}()},
		{"StartStructuredLogging level above every handler's", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				if _, err := h.b.StartStructuredLogging(nil, slog.Level(math.MinInt)); err != nil {
					h.errf("%v", err)
				}
				recordOne(h)
			})
		}, func() hostileOutcome {
			o := one(defaultOut) // logCapture enables every level: logged
			o.Stats.Handled = 2
			o.Reports = []string{"structured-log"}
			return o
		}()},

		// Reentrant calls.
		{"recording from inside a handler", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				r := h.b.NewRecorder(src)
				if _, err := h.b.StartEventWatcher(func(e *events.Event) {
					if e.Reason == "R" {
						r.Event(pod, events.Normal, "Echo", e.Message)
					}
				}); err != nil {
					t.Fatal(err)
				}
				recordOne(h)
				synctest.Wait() // the echo is recorded before Shutdown
			})
		}, hostileOutcome{
			Watched: []string{"Normal R m", "Normal Echo m"}, Stored: []string{"Normal R m", "Normal Echo m"},
			Stats: events.Stats{Recorded: 2, Written: 2, Handled: 4},
		}},
		{"a handler recording for ever: Shutdown still ends", func(t *testing.T) hostileOutcome {
			// The looping watcher is the broadcaster's only one: its queue
			// never holds more than one event, so nothing is dropped for
			// want of room, and the counts are exact whatever the moment
			// Shutdown begins.
			lc := &logCapture{}
			b := events.NewBroadcaster(events.WithLogger(lc.logger()))
			r := b.NewRecorder(src)
			var records atomic.Int64
			shut := make(chan error, 1)
			if _, err := b.StartEventWatcher(func(e *events.Event) {
				if records.Add(1) == 100 {
					go func() { shut <- b.Shutdown(context.Background()) }()
				}
				r.Eventf(pod, events.Normal, "Loop", "%d", records.Load())
			}); err != nil {
				t.Fatal(err)
			}
			r.Event(pod, events.Normal, "R", "m")
			err := <-shut
			st := b.Stats()
			return hostileOutcome{Err: fmt.Sprint(err), Reports: reportsOf(lc), Notes: []string{
				fmt.Sprintf("at least 100 handled: %v", st.Handled >= 100),
				fmt.Sprintf("every recorded event handled: %v", st.Handled == st.Recorded),
				fmt.Sprintf("records = Recorded − 1 + Dropped: %v", uint64(records.Load()) == st.Recorded-1+st.Dropped),
				fmt.Sprintf("Dropped %d", st.Dropped),
			}}
		}, hostileOutcome{Err: "events: events lost: 0 invalid, 1 dropped, 0 failed, 0 abandoned (see Stats and the logged reports)",
			Reports: []string{"closed"}, Notes: []string{
				"at least 100 handled: true", "every recorded event handled: true",
				"records = Recorded − 1 + Dropped: true", "Dropped 1", // the record made while handling the last event
			}}},
		{"Shutdown from inside a handler waits for its ctx", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				var once sync.Once
				recorded := make(chan struct{}) // both events recorded before Shutdown begins
				if _, err := h.b.StartEventWatcher(func(e *events.Event) {
					once.Do(func() {
						<-recorded
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						defer cancel()
						start := time.Now()
						err := h.b.Shutdown(ctx)
						h.notef("inner Shutdown after %v: %v", time.Since(start), err)
					})
				}); err != nil {
					t.Fatal(err)
				}
				recordOne(h)
				h.r.Event(pod, events.Normal, "Next", "m")
				close(recorded)
				time.Sleep(2 * time.Minute) // synctest's clock: the inner Shutdown's minute passes
				synctest.Wait()
			})
		}, hostileOutcome{
			// The inner Shutdown gave up after its minute: the watcher
			// still in its handler abandoned the event queued behind.
			Watched: []string{defaultOut, "Normal Next m"}, Stored: []string{defaultOut, "Normal Next m"},
			Stats:   events.Stats{Recorded: 2, Written: 2, Handled: 3, Abandoned: 1},
			Reports: []string{"shutdown-gave-up", "abandoned"},
			Notes:   []string{"inner Shutdown after 1m0s: context deadline exceeded"},
		}},
		{"Start and Stop from inside a handler", func(t *testing.T) hostileOutcome {
			out := pipeline(t, nil, func(h *hostileEnv) {
				var inner events.Stopper
				var innerGot []string
				if _, err := h.b.StartEventWatcher(func(e *events.Event) {
					if e.Reason == "R" {
						var err error
						inner, err = h.b.StartEventWatcher(func(e *events.Event) {
							if e.Reason != "Stop" { // which may or may not arrive before Stop
								innerGot = append(innerGot, e.Reason)
							}
						})
						if err != nil {
							h.notef("Start: %v", err)
						}
					}
					if e.Reason == "Stop" {
						inner.Stop()
					}
				}); err != nil {
					t.Fatal(err)
				}
				recordOne(h)
				synctest.Wait()
				h.r.Event(pod, events.Normal, "Seen", "m")
				synctest.Wait()
				h.r.Event(pod, events.Normal, "Stop", "m")
				synctest.Wait()
				h.r.Event(pod, events.Normal, "After", "m")
				synctest.Wait()
				h.notef("inner watcher got %v", innerGot)
			})
			// The inner watcher handles "Stop" or not, depending on
			// whether it gets there before the outer handler stops it; if
			// not, Stop discards it, counted in Failed and reported.
			if out.Stats.Handled == 10 && out.Stats.Failed == 0 && out.Reports == nil {
				out.Stats.Handled, out.Stats.Failed, out.Reports = 9, 1, []string{"discarded"}
			}
			return out
		}, func() hostileOutcome {
			s := []string{defaultOut, "Normal Seen m", "Normal Stop m", "Normal After m"}
			return hostileOutcome{Watched: s, Stored: s, Stats: events.Stats{Recorded: 4, Written: 4, Handled: 4 + 4 + 1, Failed: 1},
				Reports: []string{"discarded"}, Notes: []string{"inner watcher got [Seen]"}}
		}()},

		// Shutdown.
		{"Shutdown nil ctx", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				recordOne(h)
				//lint:ignore SA1012 a nil ctx is the hostile input
				if err := h.b.Shutdown(nil); err != nil && !errors.Is(err, events.ErrLost) { //nolint:staticcheck
					h.errf("Shutdown(nil): %v", err)
				}
			})
		}, one(defaultOut)},
		{"Shutdown canceled ctx, events pending", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				release := make(chan struct{})
				h.sink.Hook = func(context.Context, eventstest.Op, *events.Event) error { <-release; return nil }
				for i := range 3 {
					h.r.Event(pod, events.Normal, fmt.Sprint("R", i), "m")
				}
				synctest.Wait() // the sink is in its first call
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				h.notef("Shutdown: %v", h.b.Shutdown(ctx))
				close(release)
				synctest.Wait()
			})
		}, hostileOutcome{
			Watched: []string{"Normal R0 m", "Normal R1 m", "Normal R2 m"}, Stored: []string{"Normal R0 m"},
			Stats:   events.Stats{Recorded: 3, Written: 1, Handled: 3, Abandoned: 2},
			Reports: []string{"shutdown-gave-up", "abandoned"},
			Notes:   []string{"Shutdown: context canceled"},
		}},
		{"Shutdown after one that gave up: nil at once, a worker still running", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				hang := &hangSink{release: make(chan struct{})}
				if _, err := h.b.StartRecordingToSink(hang); err != nil {
					t.Fatal(err)
				}
				recordOne(h)
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				h.notef("first: %v", h.b.Shutdown(ctx))
				h.notef("second: %v, the hanging sink still in its call: %v", h.b.Shutdown(context.Background()), hang.calls.Load() == 1)
				close(hang.release)
				synctest.Wait()
			})
		}, func() hostileOutcome {
			o := one(defaultOut)
			o.Stats.Written = 2 // the hung call returned nil once released
			o.Reports = []string{"shutdown-gave-up"}
			o.Notes = []string{"first: context deadline exceeded", "second: <nil>, the hanging sink still in its call: true"}
			return o
		}()},
		{"Shutdown concurrently from many goroutines", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				recordOne(h)
				var wg sync.WaitGroup
				var errs atomic.Int32
				for range 8 {
					wg.Go(func() {
						if err := h.b.Shutdown(context.Background()); err != nil && !errors.Is(err, events.ErrLost) {
							errs.Add(1)
						}
					})
				}
				wg.Wait()
				h.notef("%d errors", errs.Load())
			})
		}, func() hostileOutcome { o := one(defaultOut); o.Notes = []string{"0 errors"}; return o }()},
		{"Start and record after Shutdown", func(t *testing.T) hostileOutcome {
			return pipeline(t, nil, func(h *hostileEnv) {
				shutdown(t, h.b)
				for _, f := range []func() (events.Stopper, error){
					func() (events.Stopper, error) { return h.b.StartEventWatcher(func(*events.Event) {}) },
					func() (events.Stopper, error) { return h.b.StartRecordingToSink(eventstest.NewFakeSink()) },
					func() (events.Stopper, error) { return h.b.StartLogging(func(string, ...any) {}) },
					func() (events.Stopper, error) { return h.b.StartStructuredLogging(nil, 0) },
				} {
					st, err := f()
					h.notef("%v %s", errors.Is(err, broadcast.ErrClosed), strings.SplitAfter(err.Error(), ": ")[1])
					st.Stop()
				}
				recordOne(h)
				h.r.Event(pod, "Bogus", "R", "m")
			})
		}, hostileOutcome{
			Stats:   events.Stats{Dropped: 1, Invalid: 1},
			Reports: []string{"closed", "invalid"},
			Notes: []string{
				"true StartEventWatcher: ",
				"true StartRecordingToSink: ",
				"true StartLogging: ",
				"true StartStructuredLogging: ",
			},
		}},

		// Correlator.
		{"Correlator: nil, zero and empty events", func(t *testing.T) hostileOutcome {
			var out hostileOutcome
			c := events.NewCorrelator(events.CorrelatorOptions{})
			if _, err := c.Correlate(nil); err != nil {
				out.Err = err.Error()
			}
			for range 2 {
				res, err := c.Correlate(&events.Event{})
				out.Notes = append(out.Notes, fmt.Sprintf("%v patch=%v skip=%v count=%d name=%q", err, res.Patch != nil, res.Skip, res.Event.Count, res.Event.Name))
			}
			c.UpdateState(nil)
			c.UpdateState(&events.Event{Count: 7, Name: "n"})
			res, _ := c.Correlate(&events.Event{})
			out.Notes = append(out.Notes, fmt.Sprintf("after UpdateState: count=%d name=%q", res.Event.Count, res.Event.Name))
			return out
		}, hostileOutcome{Err: "events: Correlate: nil event", Notes: []string{
			`<nil> patch=false skip=false count=0 name=""`, // Count 0 stays 0: not a counted observation
			`<nil> patch=false skip=false count=0 name=""`,
			`after UpdateState: count=8 name="n"`,
		}}},
		{"Correlator: custom functions returning empty keys", func(t *testing.T) hostileOutcome {
			var out hostileOutcome
			c := events.NewCorrelator(events.CorrelatorOptions{
				KeyFunc:     func(*events.Event) (string, string) { return "", "" },
				MessageFunc: func(*events.Event) string { return "" },
				SpamKeyFunc: func(*events.Event) string { return "" },
				MaxEvents:   2,
			})
			for i := range 3 {
				res, _ := c.Correlate(newEvent(pod2, events.Normal, fmt.Sprint("R", i), "m", time.Now()))
				out.Notes = append(out.Notes, fmt.Sprintf("patch=%v aggregated=%v count=%d message=%q", res.Patch != nil, res.Aggregated, res.Event.Count, res.Event.Message))
			}
			return out
		}, hostileOutcome{Notes: []string{
			// One group with one local key "": never 2 distinct, never
			// aggregated; the de-duplication key is the default one.
			`patch=false aggregated=false count=1 message="m"`,
			`patch=false aggregated=false count=1 message="m"`,
			`patch=false aggregated=false count=1 message="m"`,
		}}},

		// eventstest fakes.
		{"FakeRecorder: zero value, odd input", func(t *testing.T) hostileOutcome {
			var fr eventstest.FakeRecorder
			var r events.Recorder = &fr // through the interface: vet would refuse the odd formats
			ann := map[string]string{"k": "v"}
			r.AnnotatedEventf(events.ObjectReference{Name: "x"}, ann, events.Normal, "R", "%d %s", 1)
			r.AnnotatedEventf(events.ObjectReference{}, ann, events.Normal, "", "%d %s", 1)
			ann["k"] = "changed"
			r.Event(pod, "Bogus", "R", "m")
			r.Eventf(pod, events.Warning, mib, "%s", mib)
			var out hostileOutcome
			for _, e := range fr.Events() {
				out.Watched = append(out.Watched, summary(&e))
			}
			for _, e := range fr.Invalid() {
				out.Notes = append(out.Notes, "invalid "+summary(&e))
			}
			return out
		}, hostileOutcome{
			Watched: []string{"Normal R 1 %!s(MISSING) map[k:v]", "Normal  1 %!s(MISSING) map[k:v]", "Warning " + mibOut + " " + mibOut},
			Notes:   []string{"invalid Bogus R m"},
		}},
		{"FakeSink: zero value, odd calls", func(t *testing.T) hostileOutcome {
			var s eventstest.FakeSink
			var out hostileOutcome
			note := func(format string, args ...any) { out.Notes = append(out.Notes, fmt.Sprintf(format, args...)) }
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			s.FailNext("", 0, errTransient)
			s.FailNext("", -5, errTransient)
			_, err := s.Create(ctx, &events.Event{Name: "a"}) // the fake ignores ctx
			note("Create with a canceled ctx: %v", err)
			s.FailNext(eventstest.OpPatch, 1, nil)
			_, err = s.Patch(ctx, &events.Event{Name: "a", Count: 2}, events.Patch{Count: 2})
			note("Patch with a nil injected error: %v", err)
			note("WaitCalls(canceled, 10): %v", s.WaitCalls(ctx, 10))
			note("WaitCalls(canceled, 0): %v", s.WaitCalls(ctx, 0))
			note("WaitCalls(canceled, -1): %v", s.WaitCalls(ctx, -1))
			_, ok := s.Event("", "nope")
			note("Delete unknown %v, Event unknown %v, CallCount(bogus) %d", s.Delete("", "nope"), ok, s.CallCount("Bogus"))
			note("MixedStream(0) %d", len(eventstream.MixedStream(0, 0)))
			return out
		}, hostileOutcome{Notes: []string{
			"Create with a canceled ctx: <nil>",
			"Patch with a nil injected error: <nil>",
			"WaitCalls(canceled, 10): context canceled",
			"WaitCalls(canceled, 0): <nil>",
			"WaitCalls(canceled, -1): <nil>",
			"Delete unknown false, Event unknown false, CallCount(bogus) 0",
			"MixedStream(0) 0",
		}}},
	}
	names := map[string]bool{}
	for _, tc := range cases {
		if names[tc.name] {
			t.Fatalf("duplicate case %q", tc.name)
		}
		names[tc.name] = true
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				got := tc.run(t)
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				if got.Panic != "" && !strings.HasPrefix(got.Panic, "events: ") && !slices.Contains(knownForeignPanics, tc.name) {
					t.Errorf("panic %q does not start with \"events: \"", got.Panic)
				}
			})
		})
	}
}

// knownForeignPanics are the cases whose panic is not events' own (reported
// as a finding; see pending_test.go).
var knownForeignPanics = []string{"WithQueueLength MaxInt"}
