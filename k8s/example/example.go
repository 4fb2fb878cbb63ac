package example

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/heraldgo/herald/k8s"
)

// Component is the source of the events the Reconciler records.
const Component = "configmap-watcher"

// Reconciler records, for each ConfigMap it reconciles, a Normal event
// "Observed" ("<n> keys"), and a Warning event "Invalid" if the ConfigMap
// has a key named "invalid".
type Reconciler struct {
	client.Client
	Recorder record.EventRecorder
}

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var cm corev1.ConfigMap
	if err := r.Get(ctx, req.NamespacedName, &cm); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil // deleted: nothing to say
		}
		return ctrl.Result{}, err
	}
	r.Recorder.Eventf(&cm, corev1.EventTypeNormal, "Observed", "%d keys", len(cm.Data))
	if _, ok := cm.Data["invalid"]; ok {
		r.Recorder.Event(&cm, corev1.EventTypeWarning, "Invalid", `key "invalid" is not allowed`)
	}
	return ctrl.Result{}, nil
}

// NewManager returns a manager that watches the ConfigMaps of namespace
// with a Reconciler, and the herald broadcaster its events go through.
// opts are the broadcaster's (k8s.NewBroadcaster's).
func NewManager(cfg *rest.Config, namespace string, opts ...k8s.Option) (ctrl.Manager, *k8s.Broadcaster, error) {
	b := k8s.NewBroadcaster(opts...).(*k8s.Broadcaster)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		// The one-line swap: herald instead of record.NewBroadcaster().
		//lint:ignore SA1019 the option controller-runtime keeps for core/v1 events
		EventBroadcaster: b,
		Cache:            cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics:          metricsserver.Options{BindAddress: "0"},
		// Tests make several managers in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		b.Shutdown()
		return nil, nil, fmt.Errorf("example: %w", err)
	}
	//lint:ignore SA1019 core/v1 events, which Options.EventBroadcaster serves
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorderFor(Component)}
	if err := ctrl.NewControllerManagedBy(mgr).Named(Component).For(&corev1.ConfigMap{}).Complete(r); err != nil {
		b.Shutdown()
		return nil, nil, fmt.Errorf("example: %w", err)
	}
	return mgr, b, nil
}

// Run runs the controller until ctx ends, then writes the events still
// queued (within the broadcaster's shutdown bound) and returns.
func Run(ctx context.Context, cfg *rest.Config, namespace string, opts ...k8s.Option) error {
	mgr, b, err := NewManager(cfg, namespace, opts...)
	if err != nil {
		return err
	}
	err = mgr.Start(ctx)
	b.Shutdown() // after the manager: nothing records any more
	return err
}
