package ctrl

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	eventsv1client "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/heraldgo/herald/k8s"
)

// Manager is a controller-runtime manager.Manager whose event recorders are
// herald's: GetEventRecorder records through a [k8s.NewEventBroadcaster]
// (events.k8s.io/v1), GetEventRecorderFor through a [k8s.NewBroadcaster]
// (core/v1). Every other method is the wrapped manager's. [NewManager] and
// [Wrap] return one.
type Manager struct {
	manager.Manager

	scheme *runtime.Scheme
	logger klog.Logger                // the manager's, named "events", as controller-runtime's recorders log
	v1     *k8s.EventBroadcaster      // GetEventRecorder
	core   *k8s.Broadcaster           // GetEventRecorderFor
	coreEv typedcorev1.EventInterface // core's sink
	begin  sync.Once                  // starts the sinks: at the first event or at Start
	start  atomic.Bool                // Start was called
}

var (
	_ manager.Manager   = (*Manager)(nil)
	_ recorder.Provider = (*Manager)(nil)
)

// NewManager is a drop-in for controller-runtime's manager.New (ctrl.NewManager):
// it returns manager.New(config, options) with herald's recorders (see
// [Wrap]). opts are given to both of herald's broadcasters.
func NewManager(config *rest.Config, options manager.Options, opts ...k8s.Option) (*Manager, error) {
	mgr, err := manager.New(config, options)
	if err != nil {
		return nil, err
	}
	return Wrap(mgr, opts...)
}

// Wrap returns mgr with herald's recorders. They write through clients of
// mgr's config and HTTP client, resolve objects through mgr's scheme, and,
// as controller-runtime's, log each event at V(1) of mgr's logger named
// "events".
//
// opts are given to both broadcasters: k8s.NewEventBroadcaster's and
// k8s.NewBroadcaster's. k8s.WithCorrelatorOptions is an option of the
// core/v1 API only and panics here, as in k8s.NewEventBroadcaster.
//
// Nothing starts until the first event is recorded or Start is called;
// when Start returns, both broadcasters shut down (see [Manager.Start]).
// Options.EventBroadcaster, deprecated in controller-runtime, serves
// neither of herald's recorders: leave it unset.
func Wrap(mgr manager.Manager, opts ...k8s.Option) (*Manager, error) {
	if mgr == nil {
		panic("ctrl: Wrap: nil manager")
	}
	cfg, hc := mgr.GetConfig(), mgr.GetHTTPClient()
	v1c, err := eventsv1client.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("ctrl: events.k8s.io/v1 client: %w", err)
	}
	corec, err := typedcorev1.NewForConfigAndClient(cfg, hc)
	if err != nil {
		return nil, fmt.Errorf("ctrl: core/v1 client: %w", err)
	}
	// Both constructors document their concrete result types.
	v1 := k8s.NewEventBroadcaster(&clientevents.EventSinkImpl{Interface: v1c}, opts...).(*k8s.EventBroadcaster)
	core := k8s.NewBroadcaster(opts...).(*k8s.Broadcaster)
	m := &Manager{
		Manager: mgr,
		scheme:  mgr.GetScheme(),
		logger:  mgr.GetLogger().WithName("events"),
		v1:      v1,
		core:    core,
		coreEv:  corec.Events(""),
	}
	return m, nil
}

// EventBroadcaster is the broadcaster of GetEventRecorder's recorders, for
// its Stats.
func (m *Manager) EventBroadcaster() *k8s.EventBroadcaster { return m.v1 }

// Broadcaster is the broadcaster of GetEventRecorderFor's recorders, for
// its Events().Stats().
func (m *Manager) Broadcaster() *k8s.Broadcaster { return m.core }

// Start runs the manager (the wrapped manager's Start) and, when that
// returns, shuts herald's broadcasters down: what was recorded before is
// written, series counts included, within their shutdown bound
// (k8s.WithShutdownTimeout, 30 s by default), and then none of their
// goroutines is left. Losses are counted in the broadcasters' Stats and
// reported, and do not change Start's error. An event recorded after Start
// has returned is dropped, counted and reported, never a panic.
//
// A second call returns the wrapped manager's error ("manager already
// started") and shuts nothing down.
func (m *Manager) Start(ctx context.Context) error {
	if !m.start.CompareAndSwap(false, true) {
		return m.Manager.Start(ctx)
	}
	m.startSinks()
	defer m.shutdown()
	return m.Manager.Start(ctx)
}

// shutdown shuts both broadcasters down, side by side, each within its
// own bound.
func (m *Manager) shutdown() {
	var wg sync.WaitGroup
	wg.Go(m.v1.Shutdown)
	wg.Go(m.core.Shutdown)
	wg.Wait()
}

// startSinks starts, once, the broadcasters' sinks (and their logging at
// V(1), when that is enabled): at the first event, or at Start, whichever
// comes first, so that a manager that is never started and records
// nothing starts no goroutine. After Start has returned the broadcasters
// are shut down and this starts nothing.
func (m *Manager) startSinks() {
	m.begin.Do(func() {
		if err := m.v1.StartRecordingToSinkWithContext(context.Background()); err != nil {
			m.logger.Error(err, "error starting recording for broadcaster")
		}
		m.core.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: m.coreEv})
		if l := m.logger.V(1); l.Enabled() {
			if _, err := m.v1.StartLogging(l); err != nil {
				m.logger.Error(err, "error starting event logging for broadcaster")
			}
			m.core.StartEventWatcher(func(e *corev1.Event) {
				l.Info(e.Message, "type", e.Type, "object", e.InvolvedObject, "reason", e.Reason)
			})
		}
	})
}

// GetEventRecorder returns a recorder of events.k8s.io/v1 Events whose
// reportingController is name (reportingInstance: name + "-" + hostname,
// as client-go's), recording through herald's [k8s.NewEventBroadcaster].
// It never blocks its caller and never panics.
func (m *Manager) GetEventRecorder(name string) recorder.EventRecorder {
	// k8s.EventBroadcaster's recorders are also AnnotatedEventRecorders
	// (its guarantee 19).
	r := m.v1.NewRecorder(m.scheme, name)
	return &v1Recorder{m: m, r: r, a: r.(clientevents.AnnotatedEventRecorder)}
}

// GetEventRecorderFor returns a recorder of core/v1 Events whose source is
// name, recording through herald's [k8s.NewBroadcaster].
//
// Deprecated: as controller-runtime's, which uses the old events API: use
// GetEventRecorder.
func (m *Manager) GetEventRecorderFor(name string) record.EventRecorder {
	return &coreRecorder{m: m, r: m.core.NewRecorder(m.scheme, corev1.EventSource{Component: name})}
}

// v1Recorder starts the sinks at its first event.
type v1Recorder struct {
	m *Manager
	r clientevents.EventRecorderLogger
	a clientevents.AnnotatedEventRecorder
}

var (
	_ recorder.EventRecorder           = (*v1Recorder)(nil)
	_ clientevents.EventRecorderLogger = (*v1Recorder)(nil)
)

func (r *v1Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	r.m.startSinks()
	r.r.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (r *v1Recorder) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	r.m.startSinks()
	r.a.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, note, args...)
}

// WithLogger returns a recorder that logs to logger the objects it cannot
// resolve, as client-go's.
func (r *v1Recorder) WithLogger(logger klog.Logger) clientevents.EventRecorderLogger {
	l := r.r.WithLogger(logger)
	a, ok := l.(clientevents.AnnotatedEventRecorder)
	if !ok {
		a = r.a
	}
	return &v1Recorder{m: r.m, r: l, a: a}
}

// coreRecorder starts the sinks at its first event.
type coreRecorder struct {
	m *Manager
	r record.EventRecorderLogger
}

var _ record.EventRecorderLogger = (*coreRecorder)(nil)

func (r *coreRecorder) Event(object runtime.Object, eventtype, reason, message string) {
	r.m.startSinks()
	r.r.Event(object, eventtype, reason, message)
}

func (r *coreRecorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.m.startSinks()
	r.r.Eventf(object, eventtype, reason, messageFmt, args...)
}

func (r *coreRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.m.startSinks()
	r.r.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
}

// WithLogger returns a recorder that logs to logger the objects it cannot
// resolve, as client-go's.
func (r *coreRecorder) WithLogger(logger klog.Logger) record.EventRecorderLogger {
	return &coreRecorder{m: r.m, r: r.r.WithLogger(logger)}
}
