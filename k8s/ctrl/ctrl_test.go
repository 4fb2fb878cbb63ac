package ctrl_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/ctrl"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
	"github.com/heraldgo/herald/k8s/k8stest"
)

const name = "herald-ctrl-test"

// k8stest's recorder is a controller-runtime recorder, for reconcilers' own
// tests.
var _ recorder.EventRecorder = (&k8stest.Recorder{}).EventsV1()

var quiet = k8s.WithEventsOptions(events.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))

func options(namespace string) manager.Options {
	return manager.Options{
		Logger:  logr.Discard(),
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests make several managers in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
}

// reconciler records, per reconcile of a ConfigMap, n isomorphic
// events.k8s.io events about it (a series of n).
type reconciler struct {
	client.Client
	v1 recorder.EventRecorder
	n  int
}

func (r *reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, err
	}
	for i := range r.n {
		r.v1.Eventf(&cm, nil, corev1.EventTypeWarning, "Invalid", "Validate", "try %d", i+1)
	}
	return reconcile.Result{}, nil
}

// TestGetEventRecorder: a reconciler that takes mgr.GetEventRecorder(name)
// of a manager made by ctrl.NewManager records through herald, on a real
// API server: the series of 7 isomorphic events ends with series.count 7
// once Start has returned (client-go's tools/events would still show 2: it
// writes later counts only every 30 minutes and loses them at Shutdown),
// and herald's broadcaster counts the writes. A second Start fails and
// shuts nothing down; an event recorded after Start has returned is
// dropped and counted, never a panic.
func TestGetEventRecorder(t *testing.T) {
	s := apiservertest.Shared(t)
	ns := s.Namespace(t)
	c := s.Clientset()
	mgr, err := ctrl.NewManager(s.Config(), options(ns), quiet)
	if err != nil {
		t.Fatal(err)
	}
	r := &reconciler{Client: mgr.GetClient(), v1: mgr.GetEventRecorder(name), n: 7}
	if err := builder.ControllerManagedBy(mgr).Named(name).For(&corev1.ConfigMap{}).Complete(r); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list := func() []eventsv1.Event {
		l, err := c.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	waitFor(t, func() bool { return len(list()) > 0 })
	if err := mgr.Start(ctx); err == nil {
		t.Error("a second Start: nil error")
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	got := list()
	if len(got) != 1 {
		t.Fatalf("%d events, want 1 (a series): %+v", len(got), got)
	}
	e := got[0]
	if e.ReportingController != name || e.Regarding.Kind != "ConfigMap" || e.Regarding.Name != "app" ||
		e.Reason != "Invalid" || e.Action != "Validate" || e.Note != "try 1" || e.Type != corev1.EventTypeWarning {
		t.Errorf("event %+v", e)
	}
	if e.Series == nil || e.Series.Count != 7 {
		t.Errorf("series %+v, want count 7", e.Series)
	}
	st := mgr.EventBroadcaster().Stats()
	if st.Recorded < 7 || st.Written < 3 || st.Failed != 0 || st.Dropped != 0 || st.Abandoned != 0 {
		t.Errorf("herald %+v", st)
	}

	r.v1.Eventf(cm, nil, corev1.EventTypeNormal, "Late", "Validate", "after Start")
	if after := mgr.EventBroadcaster().Stats(); after.Dropped != st.Dropped+1 {
		t.Errorf("an event after Start returned: Dropped %d, want %d", after.Dropped, st.Dropped+1)
	}
}

// TestGetEventRecorderFor: the deprecated core/v1 recorder records through
// herald's k8s.NewBroadcaster, written by the time Start returns.
func TestGetEventRecorderFor(t *testing.T) {
	s := apiservertest.Shared(t)
	ns := s.Namespace(t)
	c := s.Clientset()
	mgr, err := ctrl.NewManager(s.Config(), options(ns), quiet)
	if err != nil {
		t.Fatal(err)
	}
	rec := mgr.GetEventRecorderFor(name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		rec.Eventf(cm, corev1.EventTypeNormal, "Observed", "%d keys", len(cm.Data))
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
	l, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(l.Items), l.Items)
	}
	e := l.Items[0]
	if e.Source.Component != name || e.InvolvedObject.Name != "app" || e.Reason != "Observed" || e.Message != "0 keys" || e.Count != 3 {
		t.Errorf("event %+v", e)
	}
	if st := mgr.Broadcaster().Events().Stats(); st.Recorded != 3 || st.Written != 3 || st.Failed+st.Dropped+st.Abandoned != 0 {
		t.Errorf("herald %+v", st)
	}
}

// TestNothingBeforeFirstEvent: a manager whose recorders are handed out
// but never used, and that is never started, has started no goroutine of
// herald's.
func TestNothingBeforeFirstEvent(t *testing.T) {
	s := apiservertest.Shared(t)
	before := goleak.IgnoreCurrent()
	mgr, err := ctrl.Wrap(newManager(t, s.Config(), s.Namespace(t)), quiet)
	if err != nil {
		t.Fatal(err)
	}
	_ = mgr.GetEventRecorder(name)
	_ = mgr.GetEventRecorderFor(name)
	goleak.VerifyNone(t, before, apiservertest.IgnoreKlog)
}

func newManager(t *testing.T, cfg *rest.Config, namespace string) manager.Manager {
	t.Helper()
	mgr, err := manager.New(cfg, options(namespace))
	if err != nil {
		t.Fatal(err)
	}
	return mgr
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
