package k8s

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/reference"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/events"
)

// DefaultShutdownTimeout bounds how long [Broadcaster.Shutdown] writes what
// was recorded before it. Writing a full queue (1000 distinct events, the
// default events.WithQueueLength) to a real kube-apiserver on loopback took
// about 3 s under -race on a loaded 2-core machine
// (TestShutdownWritesFullQueue in internal/integration logs it); 30 s
// leaves room for a remote or slower server and a few retries. Set it with
// [WithShutdownTimeout].
const DefaultShutdownTimeout = 30 * time.Second

// Broadcaster is client-go's record.EventBroadcaster with herald's
// events.Broadcaster underneath. [NewBroadcaster] returns one; see the
// package documentation for what differs from client-go's.
type Broadcaster struct {
	b               *events.Broadcaster
	shutdownTimeout time.Duration
	logger          klog.Logger // klog.FromContext of WithContext's ctx, or klog.Background()
	stopCtx         func() bool // stops WithContext's AfterFunc; nil without one

	mu      sync.Mutex
	watches map[*stopWatch]struct{} // started and not stopped; nil once shut down
}

var _ record.EventBroadcaster = (*Broadcaster)(nil)

// NewBroadcaster is a drop-in for client-go's record.NewBroadcaster: the
// same interface, herald underneath. The result is a [*Broadcaster].
//
// The options are client-go's ([WithContext], [WithSleepDuration],
// [WithCorrelatorOptions], with the same meaning), [WithShutdownTimeout]
// and herald's own through [WithEventsOptions]. A sink started with
// StartRecordingToSink is called one event at a time, as client-go calls
// it, unless it is client-go's own *typedcorev1.EventSinkImpl, which is safe
// for concurrent use and gets up to [DefaultSinkConcurrency] requests in
// flight, or events.WithSinkConcurrency says otherwise (then every sink
// gets that); events about one object are always written one at a time, in
// recording order. herald's own reports (dropped, rejected or abandoned
// events) go to klog (klog.FromContext of WithContext's ctx), as
// client-go's do, unless events.WithLogger says otherwise: Warn and Error
// at klog's default verbosity, Info at V(2), Debug at V(6).
func NewBroadcaster(opts ...Option) record.EventBroadcaster {
	cfg := newConfig(opts)
	b := &Broadcaster{shutdownTimeout: DefaultShutdownTimeout, watches: map[*stopWatch]struct{}{}, logger: cfg.logger()}
	if cfg.shutdownTimeout > 0 {
		b.shutdownTimeout = cfg.shutdownTimeout
	}
	b.b = events.NewBroadcaster(cfg.eventsOptions()...)
	if cfg.ctx != nil && cfg.ctx.Done() != nil {
		// As client-go's: the end of ctx shuts the broadcaster down. No
		// goroutine waits meanwhile; Shutdown first stops this.
		b.stopCtx = context.AfterFunc(cfg.ctx, b.Shutdown)
	}
	return b
}

// DefaultSinkConcurrency is the number of requests a sink started by
// [NewBroadcaster] has in flight at most (events.WithSinkConcurrency).
// Against a real API server on this project's 2-core machines, one request
// at a time stores about 520 events/s whatever the queue; 16 in flight
// multiply that several times over until the API server itself is
// CPU-bound (k8s/README.md, the storm), at the cost of one goroutine per
// object being written and none at rest.
const DefaultSinkConcurrency = 16

// Events returns the herald broadcaster underneath, for its Stats and its
// context-taking Shutdown.
func (b *Broadcaster) Events() *events.Broadcaster { return b.b }

// StartEventWatcher calls handler, from one goroutine, with every event
// recorded from now on, in order, as a core/v1 Event of its own (its name
// made valid by [ValidEventName]). The result's Stop ends it; its
// ResultChan delivers nothing and is closed by Stop and by Shutdown. After
// Shutdown it logs an error and returns a watch that does nothing, as
// client-go's does.
func (b *Broadcaster) StartEventWatcher(handler func(*corev1.Event)) watch.Interface {
	if handler == nil {
		panic("k8s: StartEventWatcher: nil handler")
	}
	return b.watch(b.b.StartEventWatcher(func(e *events.Event) {
		ev := ToCoreV1(e)
		ev.Name = ValidEventName(ev.Name)
		handler(ev)
	}))
}

// StartRecordingToSink writes every event recorded from now on to sink
// (&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}, say),
// correlated, with retries, as described at [NewSink]. For an
// *typedcorev1.EventSinkImpl it calls the context-taking methods of its
// clientset, so that Shutdown's bound also ends a request in progress. A
// nil sink panics.
func (b *Broadcaster) StartRecordingToSink(sink record.EventSink) watch.Interface {
	if sink == nil {
		panic("k8s: StartRecordingToSink: nil sink")
	}
	rs := newRecordSink(sink)
	if _, set := b.b.SinkConcurrency(); set || rs.impl == nil {
		return b.watch(b.b.StartRecordingToSink(rs))
	}
	return b.watch(b.b.StartRecordingToSinkWithConcurrency(rs, DefaultSinkConcurrency))
}

// StartLogging calls logf with every event recorded from now on, in
// client-go's format.
func (b *Broadcaster) StartLogging(logf func(format string, args ...any)) watch.Interface {
	if logf == nil {
		panic("k8s: StartLogging: nil logf")
	}
	return b.watch(b.b.StartEventWatcher(func(e *events.Event) {
		logf("Event(%#v): type: '%v' reason: '%v' %v", ToObjectReference(e.InvolvedObject), e.Type, e.Reason, e.Message)
	}))
}

// StartStructuredLogging logs every event recorded from now on to klog at
// the given verbosity, as client-go does ("Event occurred").
func (b *Broadcaster) StartStructuredLogging(verbosity klog.Level) watch.Interface {
	loggerV := b.logger.V(int(verbosity))
	return b.watch(b.b.StartEventWatcher(func(e *events.Event) {
		o := &e.InvolvedObject
		loggerV.Info("Event occurred", "object", klog.KRef(o.Namespace, o.Name), "fieldPath", o.FieldPath,
			"kind", o.Kind, "apiVersion", o.APIVersion, "type", e.Type, "reason", e.Reason, "message", e.Message)
	}))
}

// NewRecorder returns a recorder of events from source. It resolves each
// object's reference through scheme with reference.GetReference, as
// client-go does: an object it cannot resolve is logged and not recorded.
// Like client-go's, the recorder never blocks; unlike client-go's, it also
// never panics after Shutdown (the event is dropped and reported).
func (b *Broadcaster) NewRecorder(scheme *runtime.Scheme, source corev1.EventSource) record.EventRecorderLogger {
	return &recorder{
		r:      b.b.NewRecorder(events.Source{Component: source.Component, Host: source.Host}),
		scheme: scheme,
		logger: b.logger,
	}
}

// Shutdown stops recording and writes what was recorded before it, with
// retries, within the bound set by [WithShutdownTimeout] (30 s by default);
// then no goroutine of the broadcaster is left. Events it could not write
// within the bound are counted (events.Stats.Abandoned) and reported.
// client-go's Shutdown does not wait: an event still queued is tried once,
// or not at all.
func (b *Broadcaster) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), b.shutdownTimeout)
	defer cancel()
	b.ShutdownContext(ctx)
}

// ShutdownContext is Shutdown bounded by ctx instead: it returns nil once
// everything recorded before it was written, an error wrapping
// events.ErrLost when events were lost, or ctx.Err() (see
// events.Broadcaster.Shutdown).
func (b *Broadcaster) ShutdownContext(ctx context.Context) error {
	if b.stopCtx != nil {
		b.stopCtx()
	}
	err := b.b.Shutdown(ctx)
	b.mu.Lock()
	ws := b.watches
	b.watches = nil
	b.mu.Unlock()
	for w := range ws {
		w.close()
	}
	return err
}

// watch wraps a herald Stopper as the watch.Interface client-go's Start
// methods return, or logs err as client-go does.
func (b *Broadcaster) watch(st events.Stopper, err error) watch.Interface {
	if err != nil {
		b.logger.Error(err, "Unable start event watcher (will not retry!)")
		return watch.NewEmptyWatch()
	}
	w := &stopWatch{b: b, st: st, ch: make(chan watch.Event)}
	b.mu.Lock()
	if b.watches == nil { // Shutdown came between
		b.mu.Unlock()
		w.close()
		return w
	}
	b.watches[w] = struct{}{}
	b.mu.Unlock()
	return w
}

// stopWatch is the watch.Interface of a started watcher or sink: Stop
// stops it; ResultChan, which delivers nothing (the events go to the
// handler or sink), is closed by Stop and by the broadcaster's Shutdown.
type stopWatch struct {
	b    *Broadcaster
	st   events.Stopper
	ch   chan watch.Event
	once sync.Once
}

func (w *stopWatch) Stop() {
	w.st.Stop()
	w.b.mu.Lock()
	delete(w.b.watches, w)
	w.b.mu.Unlock()
	w.close()
}

func (w *stopWatch) close()                         { w.once.Do(func() { close(w.ch) }) }
func (w *stopWatch) ResultChan() <-chan watch.Event { return w.ch }

// recorder is the record.EventRecorderLogger of NewRecorder.
type recorder struct {
	r      events.Recorder
	scheme *runtime.Scheme
	logger klog.Logger
}

// ref resolves object's reference, or logs why it cannot, as client-go does.
func (r *recorder) ref(object runtime.Object, eventtype, reason, messageFmt string, args []any) (events.ObjectReference, bool) {
	ref, err := reference.GetReference(r.scheme, object)
	if err != nil {
		r.logger.Error(err, "Could not construct reference, will not report event",
			"object", object, "eventType", eventtype, "reason", reason, "message", fmt.Sprintf(messageFmt, args...))
		return events.ObjectReference{}, false
	}
	return FromObjectReference(*ref), true
}

func (r *recorder) Event(object runtime.Object, eventtype, reason, message string) {
	if ref, ok := r.ref(object, eventtype, reason, "%s", []any{message}); ok {
		r.r.Event(ref, eventtype, reason, message)
	}
}

// Eventf and AnnotatedEventf hand the format on: herald formats it as
// client-go does (fmt.Sprintf), and not at all when there is nothing to
// format, which gives the same message.
func (r *recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if ref, ok := r.ref(object, eventtype, reason, messageFmt, args); ok {
		r.r.Eventf(ref, eventtype, reason, messageFmt, args...)
	}
}

func (r *recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if ref, ok := r.ref(object, eventtype, reason, messageFmt, args); ok {
		r.r.AnnotatedEventf(ref, annotations, eventtype, reason, messageFmt, args...)
	}
}

// WithLogger returns a recorder that logs to logger the objects it cannot
// resolve; it records to the same broadcaster.
func (r *recorder) WithLogger(logger klog.Logger) record.EventRecorderLogger {
	c := *r
	c.logger = logger
	return &c
}

// klogHandler is a slog.Handler writing to klog.Background() as it is at
// each record, at V(2) for Info (see NewBroadcaster), so that a logger set
// with klog.SetLogger after NewBroadcaster is the one used.
type klogHandler struct {
	ops []func(slog.Handler) slog.Handler // WithAttrs and WithGroup, in order
}

func (h klogHandler) handler() slog.Handler {
	var s slog.Handler = logr.ToSlogHandler(klog.Background().V(2))
	for _, op := range h.ops {
		s = op(s)
	}
	return s
}

func (h klogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.handler().Enabled(ctx, l)
}

func (h klogHandler) Handle(ctx context.Context, r slog.Record) error {
	return h.handler().Handle(ctx, r)
}

func (h klogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return klogHandler{ops: append(h.ops[:len(h.ops):len(h.ops)], func(s slog.Handler) slog.Handler { return s.WithAttrs(as) })}
}

func (h klogHandler) WithGroup(name string) slog.Handler {
	return klogHandler{ops: append(h.ops[:len(h.ops):len(h.ops)], func(s slog.Handler) slog.Handler { return s.WithGroup(name) })}
}
