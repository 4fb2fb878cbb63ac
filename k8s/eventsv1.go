package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/events"
)

// SeriesWindow is how long after an event's last occurrence an isomorphic
// event (same regarding, related, action, reason, type, reporting
// controller and instance) still joins it as a series, as in client-go's
// tools/events (finishTime).
const SeriesWindow = 6 * time.Minute

// SeriesFlushInterval bounds how long a series' count may go unwritten
// after an occurrence: the count of the 3rd and later occurrences is
// written at most SeriesFlushInterval after the first of them not yet
// written (one Patch per series per interval however fast it occurs), and
// at Shutdown. client-go writes it only every 30 minutes, or once the
// series has been quiet for 6 to 12 minutes, and loses it at Shutdown.
const SeriesFlushInterval = 10 * time.Second

// Reserved annotation keys that carry the events.k8s.io fields herald's
// events.Event does not have through the pipeline. They never reach a sink
// or a watcher.
const (
	annAction  = "herald.k8s.io/action"
	annRelated = "herald.k8s.io/related"
	annSeries  = "herald.k8s.io/series" // the isomorphic key and its generation
	annFlush   = "herald.k8s.io/flush"  // a series write: the key of the series
	annNote    = "herald.k8s.io/note"   // the note; the message is the series key, which the correlator de-duplicates by
)

// EventBroadcaster is client-go's tools/events EventBroadcaster
// (events.k8s.io/v1) with herald's events.Broadcaster underneath.
// [NewEventBroadcaster] returns one; see the package documentation for what
// differs from client-go's.
type EventBroadcaster struct {
	b               *events.Broadcaster
	sink            clientevents.EventSink
	shutdownTimeout time.Duration
	logger          klog.Logger
	stopCtx         func() bool // stops WithContext's AfterFunc; nil without it

	terminating atomic.Uint64 // writes refused because the namespace is being deleted
	flushes     atomic.Uint64 // series writes recorded (see SeriesFlushInterval)

	mu     sync.Mutex
	closed bool              // ShutdownContext has begun
	series map[string]*entry // by isomorphic key, the live series and singletons
	gen    uint64            // generations handed out, so a key past its window is new
	seq    uint64            // flush events handed out
	prunes int               // inserts since the last prune
}

// entry is what the broadcaster knows of one isomorphic key (mu).
type entry struct {
	key         string // the key with its generation, what the pipeline sees
	last        time.Time
	occurrences int
	timer       *time.Timer // a series write pending; nil if none
	regarding   events.ObjectReference
	eventtype   string
	reason      string
}

var _ clientevents.EventBroadcaster = (*EventBroadcaster)(nil)

// NewEventBroadcaster is a drop-in for client-go's tools/events
// NewBroadcaster: the same interface, herald underneath, writing to sink
// (&clientevents.EventSinkImpl{Interface: client.EventsV1()}, say). The
// result is an [*EventBroadcaster].
//
// Nothing is written until StartRecordingToSink or
// StartRecordingToSinkWithContext is called, as with client-go. Writes go
// through an events.Broadcaster: a queue of [DefaultEventsV1QueueLength]
// events per sink and watcher (events.WithQueueLength), events that do not
// fit counted and reported; one goroutine per started sink or watcher, and for a sink up to
// events.WithSinkConcurrency goroutines writing (none while idle). For
// client-go's own *clientevents.EventSinkImpl that is
// [DefaultSinkConcurrency]; any other sink is called one event at a time,
// unless WithEventsOptions(events.WithSinkConcurrency(n)) says otherwise.
// Either way, the events about one regarding object are written one at a
// time, in recording order.
//
// The options: [WithContext] (its end shuts the broadcaster down, and
// klog.FromContext is the logger of its reports), [WithSleepDuration] (the
// sleep between two tries of a write; 12 tries, as client-go),
// [WithShutdownTimeout], and [WithEventsOptions] (applied last).
// [WithCorrelatorOptions] is record's and panics here: the events.k8s.io
// API has series instead of client-go's correlator. A nil sink panics.
func NewEventBroadcaster(sink clientevents.EventSink, opts ...Option) clientevents.EventBroadcaster {
	return newEventBroadcaster(sink, opts)
}

func newEventBroadcaster(sink clientevents.EventSink, opts []Option) *EventBroadcaster {
	if sink == nil {
		panic("k8s: NewEventBroadcaster: nil sink")
	}
	cfg := newConfig(opts)
	if cfg.correlator != nil {
		panic("k8s: NewEventBroadcaster: WithCorrelatorOptions is an option of NewBroadcaster (core/v1) only")
	}
	eb := &EventBroadcaster{
		sink:            sink,
		shutdownTimeout: DefaultShutdownTimeout,
		logger:          klog.Background(),
		series:          map[string]*entry{},
	}
	if cfg.shutdownTimeout > 0 {
		eb.shutdownTimeout = cfg.shutdownTimeout
	}
	var handler slog.Handler = klogHandler{}
	if cfg.ctx != nil {
		eb.logger = klog.FromContext(cfg.ctx)
		handler = logr.ToSlogHandler(eb.logger.V(2))
	}
	conc := 1
	if impl, ok := sink.(*clientevents.EventSinkImpl); ok && impl != nil {
		conc = DefaultSinkConcurrency
	}
	eopts := []events.Option{
		events.WithQueueLength(DefaultEventsV1QueueLength),
		events.WithLogger(slog.New(handler)),
		events.WithSinkConcurrency(conc),
		events.WithCorrelatorOptions(events.CorrelatorOptions{
			// No spam filter and no aggregation, as tools/events; the
			// correlator's de-duplication by the isomorphic key is the
			// series.
			BurstSize: events.Disable,
			MaxEvents: events.Disable,
			KeyFunc:   func(e *events.Event) (string, string) { return e.Annotations[annSeries], "" },
		}),
	}
	if cfg.sleepSet {
		eopts = append(eopts, events.WithRetry(maxTries, cfg.sleep))
	}
	eopts = append(eopts, cfg.events...)
	eb.b = events.NewBroadcaster(eopts...)
	if cfg.ctx != nil {
		eb.stopCtx = context.AfterFunc(cfg.ctx, func() { eb.Shutdown() })
	}
	return eb
}

// DefaultEventsV1QueueLength is the queue length per sink and watcher of
// [NewEventBroadcaster] and [NewEventBroadcasterAdapter] (NewBroadcaster's
// is events.DefaultQueueLength, 1000, as tools/record's). tools/events
// never drops at the recorder: its Eventf waits when its 1000 are full and
// each event then waits in a goroutine of its own, so a burst is held, at
// the price of a goroutine per event (73,619 at the peak of the storm in
// k8s/README.md). herald holds a burst in its queue instead: 32,768 events
// hold the storm's 20,000 with room, at about 440 bytes each while queued
// (14 MB if full, nothing when empty), with a bounded number of goroutines;
// what still does not fit is counted and reported.
const DefaultEventsV1QueueLength = 1 << 15

// maxTries is client-go's maxTriesPerEvent.
const maxTries = 12

// Events returns the herald broadcaster underneath, for its Flush and
// Stats (see [EventBroadcaster.Stats]).
func (eb *EventBroadcaster) Events() *events.Broadcaster { return eb.b }

// EventStats is [EventBroadcaster.Stats]: the events.Broadcaster's counts,
// and what is particular to events.k8s.io.
type EventStats struct {
	// events.Stats of the broadcaster underneath, except that the writes
	// refused because the namespace is being deleted are in Failed, not in
	// Written. Series writes (SeriesWrites) are counted as events there
	// (Recorded, Written, ...).
	events.Stats
	// Terminating is the number of writes refused because the event's
	// namespace is being deleted (part of Failed; logged at Debug only).
	Terminating uint64
	// SeriesWrites is the number of series count writes scheduled (see
	// SeriesFlushInterval), a write that had nothing new to say included.
	SeriesWrites uint64
}

// Stats returns the broadcaster's counts.
func (eb *EventBroadcaster) Stats() EventStats {
	st := eb.b.Stats()
	t := eb.terminating.Load()
	st.Written -= min(t, st.Written)
	st.Failed += t
	return EventStats{Stats: st, Terminating: t, SeriesWrites: eb.flushes.Load()}
}

// StartRecordingToSink is StartRecordingToSinkWithContext with a context
// that ends when stopCh is closed; an error is logged, as client-go does.
func (eb *EventBroadcaster) StartRecordingToSink(stopCh <-chan struct{}) {
	if err := eb.StartRecordingToSinkWithContext(wait.ContextForChannel(stopCh)); err != nil {
		eb.logger.Error(err, "Failed to start recording to sink")
	}
}

// StartRecordingToSinkWithContext writes every event recorded from now on
// to the broadcaster's sink, until ctx ends (then what is still queued for
// it is discarded, counted and reported) or Shutdown. An isomorphic event
// within [SeriesWindow] of the previous one makes the first a series,
// whose count 2 is written at once and later counts within
// [SeriesFlushInterval] and at Shutdown. After Shutdown it returns an
// error. A nil ctx panics.
func (eb *EventBroadcaster) StartRecordingToSinkWithContext(ctx context.Context) error {
	if ctx == nil {
		panic("k8s: StartRecordingToSinkWithContext: nil ctx")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	st, err := eb.b.StartRecordingToSink(newV1Sink(eb))
	if err != nil {
		return err
	}
	context.AfterFunc(ctx, st.Stop)
	return nil
}

// NewRecorder returns a recorder of events reported by reportingController
// on this host: reportingInstance is reportingController + "-" +
// os.Hostname(), as in client-go. It resolves objects through scheme
// (reference.GetReference); an object it cannot resolve is logged and not
// recorded. The recorder is also a clientevents.AnnotatedEventRecorder,
// never blocks, and never panics, also after Shutdown (the event is then
// dropped, counted and reported).
func (eb *EventBroadcaster) NewRecorder(scheme *runtime.Scheme, reportingController string) clientevents.EventRecorderLogger {
	hostname, _ := os.Hostname()
	instance := reportingController + "-" + hostname
	return &v1Recorder{
		eb:         eb,
		r:          eb.b.NewRecorder(events.Source{Component: reportingController, Host: instance}),
		controller: reportingController,
		instance:   instance,
		scheme:     scheme,
		logger:     klog.Background(),
	}
}

// StartEventWatcher calls handler, from one goroutine, with every event
// recorded from now on, in order, each an *eventsv1.Event of its own (a
// series' occurrences each as recorded, as with client-go). The function
// returned stops it. After Shutdown it returns an error.
func (eb *EventBroadcaster) StartEventWatcher(handler func(event runtime.Object)) (func(), error) {
	if handler == nil {
		panic("k8s: StartEventWatcher: nil handler")
	}
	st, err := eb.b.StartEventWatcher(func(e *events.Event) {
		if _, ok := e.Annotations[annFlush]; ok {
			return
		}
		handler(toEventsV1(e))
	})
	if err != nil {
		return nil, err
	}
	return st.Stop, nil
}

// StartLogging logs every event recorded from now on to logger, as
// client-go does ("Event occurred", at Info: pass logger.V(n) for another
// verbosity).
func (eb *EventBroadcaster) StartLogging(logger klog.Logger) (func(), error) {
	return eb.StartEventWatcher(func(obj runtime.Object) {
		e := obj.(*eventsv1.Event)
		logger.Info("Event occurred", "object", klog.KRef(e.Regarding.Namespace, e.Regarding.Name),
			"kind", e.Regarding.Kind, "apiVersion", e.Regarding.APIVersion, "type", e.Type,
			"reason", e.Reason, "action", e.Action, "note", e.Note)
	})
}

// StartStructuredLogging is StartLogging to klog.Background().V(verbosity).
//
// Deprecated: use StartLogging, as with client-go.
func (eb *EventBroadcaster) StartStructuredLogging(verbosity klog.Level) func() {
	logger := klog.Background().V(int(verbosity))
	stop, err := eb.StartLogging(logger)
	if err != nil {
		logger.Error(err, "Failed to start event watcher")
		return func() {}
	}
	return stop
}

// Shutdown stops recording and writes what was recorded before it, series
// counts included, within the bound set by [WithShutdownTimeout] (30 s by
// default); then no goroutine of the broadcaster is left. client-go's
// Shutdown does not wait, and loses the series counts not yet written.
func (eb *EventBroadcaster) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), eb.shutdownTimeout)
	defer cancel()
	eb.ShutdownContext(ctx)
}

// ShutdownContext is Shutdown bounded by ctx: nil once everything recorded
// before it was written, an error wrapping events.ErrLost when events were
// lost, or ctx.Err() (see events.Broadcaster.Shutdown).
func (eb *EventBroadcaster) ShutdownContext(ctx context.Context) error {
	if eb.stopCtx != nil {
		eb.stopCtx()
	}
	eb.mu.Lock()
	if !eb.closed {
		eb.closed = true
		// Every series with an occurrence not yet written gets its write
		// now, behind its occurrences; later ones get theirs at once
		// (v1Recorder.record).
		for _, en := range eb.series {
			if en.timer != nil && en.timer.Stop() {
				en.timer = nil
				eb.flushLocked(en)
			}
		}
	}
	eb.mu.Unlock()
	return eb.b.Shutdown(ctx)
}

// record records one occurrence: it finds its series (or starts one) and
// schedules the write of its count. mu is held across the recorder call,
// so that a series write is always recorded after the occurrences it
// counts.
func (eb *EventBroadcaster) record(r events.Recorder, ref events.ObjectReference, ann map[string]string, iso, eventtype, reason, note string) {
	if (&events.Event{Namespace: namespaceOf(ref), InvolvedObject: ref, Type: eventtype, Reason: reason, Annotations: ann}).Validate() != nil {
		// Not recorded: the recorder counts and reports it. It starts no
		// series.
		r.AnnotatedEventf(ref, ann, eventtype, reason, "%s", note)
		return
	}
	now := time.Now()
	eb.mu.Lock()
	defer eb.mu.Unlock()
	en := eb.series[iso]
	if en == nil || now.Sub(en.last) > SeriesWindow {
		if en != nil && en.timer != nil && en.timer.Stop() {
			eb.flushLocked(en) // the old series' last count
		}
		eb.gen++
		en = &entry{key: iso + "#" + strconv.FormatUint(eb.gen, 36), regarding: ref, eventtype: eventtype, reason: reason}
		eb.series[iso] = en
		eb.prune(now)
	}
	en.last = now
	en.occurrences++
	ann[annSeries] = en.key
	ann[annNote] = note
	r.AnnotatedEventf(ref, ann, eventtype, reason, "%s", en.key)
	// The 2nd occurrence is written at once by the sink (count 2); later
	// ones are counted there and written by a flush.
	if en.occurrences < 3 || en.timer != nil {
		return
	}
	if eb.closed {
		eb.flushLocked(en)
		return
	}
	en.timer = time.AfterFunc(SeriesFlushInterval, func() {
		eb.mu.Lock()
		defer eb.mu.Unlock()
		if en.timer == nil || eb.closed { // flushed by Shutdown or a new generation
			return
		}
		en.timer = nil
		eb.flushLocked(en)
	})
}

// namespaceOf is the namespace of an event about the object o.
func namespaceOf(o events.ObjectReference) string {
	if o.Namespace == "" {
		return "default"
	}
	return o.Namespace
}

// flushLocked records the write of en's count: an event about en's object,
// so that it is handled after en's occurrences (mu).
func (eb *EventBroadcaster) flushLocked(en *entry) {
	eb.seq++
	eb.flushes.Add(1)
	k := "flush#" + strconv.FormatUint(eb.seq, 36)
	ann := map[string]string{annFlush: en.key, annSeries: k}
	eb.b.NewRecorder(events.Source{}).AnnotatedEventf(en.regarding, ann, en.eventtype, en.reason, "%s", k)
}

// prune forgets the keys whose window has passed, every so many inserts,
// so that it costs O(1) per event (mu).
func (eb *EventBroadcaster) prune(now time.Time) {
	eb.prunes++
	if eb.prunes < 1024 || eb.prunes < len(eb.series)/2 {
		return
	}
	eb.prunes = 0
	for k, en := range eb.series {
		if en.timer == nil && now.Sub(en.last) > SeriesWindow {
			delete(eb.series, k)
		}
	}
}

// v1Recorder is the clientevents.EventRecorderLogger of NewRecorder.
type v1Recorder struct {
	eb                   *EventBroadcaster
	r                    events.Recorder
	controller, instance string
	scheme               *runtime.Scheme
	logger               klog.Logger
}

var (
	_ clientevents.EventRecorderLogger    = (*v1Recorder)(nil)
	_ clientevents.AnnotatedEventRecorder = (*v1Recorder)(nil)
)

func (r *v1Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.eventf(regarding, related, nil, eventtype, reason, action, note, args)
}

func (r *v1Recorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.eventf(regarding, related, annotations, eventtype, reason, action, note, args)
}

// WithLogger returns a recorder that logs to logger the objects it cannot
// resolve; it records to the same broadcaster.
func (r *v1Recorder) WithLogger(logger klog.Logger) clientevents.EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

func (r *v1Recorder) eventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args []any) {
	message := fmt.Sprintf(note, args...)
	ref, err := reference.GetReference(r.scheme, regarding)
	if err != nil {
		r.logger.Error(err, "Could not construct reference, will not report event",
			"object", regarding, "eventType", eventtype, "reason", reason, "message", message)
		return
	}
	var rel *corev1.ObjectReference
	if related != nil {
		rel, err = reference.GetReference(r.scheme, related)
		if err != nil {
			r.logger.V(9).Info("Could not construct reference", "object", related, "err", err)
		}
	}
	ann := make(map[string]string, len(annotations)+3)
	for k, v := range annotations {
		ann[k] = v
	}
	ann[annAction] = action
	if rel != nil {
		data, _ := json.Marshal(rel)
		ann[annRelated] = string(data)
	}
	o := FromObjectReference(*ref)
	var relKey events.ObjectReference
	if rel != nil {
		relKey = FromObjectReference(*rel)
	}
	iso := isoKey(o, relKey, rel != nil, eventtype, reason, action, r.controller, r.instance)
	r.eb.record(r.r, o, ann, iso, eventtype, reason, message)
}

// isoKey is client-go's isomorphic key (getKey: type, action, reason,
// reporting controller and instance, regarding, related), each field
// encoded with its length so that distinct keys never collide.
func isoKey(o, rel events.ObjectReference, hasRel bool, eventtype, reason, action, controller, instance string) string {
	b := make([]byte, 0, 256)
	add := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	for _, s := range []string{eventtype, action, reason, controller, instance,
		o.Kind, o.Namespace, o.Name, o.UID, o.APIVersion, o.ResourceVersion, o.FieldPath} {
		add(s)
	}
	if hasRel {
		for _, s := range []string{rel.Kind, rel.Namespace, rel.Name, rel.UID, rel.APIVersion, rel.ResourceVersion, rel.FieldPath} {
			add(s)
		}
	}
	return string(b)
}
