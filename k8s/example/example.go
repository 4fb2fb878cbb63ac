package example

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/heraldgo/herald/k8s"
	heraldctrl "github.com/heraldgo/herald/k8s/ctrl"
)

// Component is the reporting controller of the events the Reconciler
// records.
const Component = "configmap-watcher"

// Reconciler records, for each ConfigMap it reconciles, a Normal event
// "Observed" (action "Reconcile", note "<n> keys"), and a Warning event
// "Invalid" if the ConfigMap has a key named "invalid".
type Reconciler struct {
	client.Client
	Recorder recorder.EventRecorder
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
	r.Recorder.Eventf(&cm, nil, corev1.EventTypeNormal, "Observed", "Reconcile", "%d keys", len(cm.Data))
	if _, ok := cm.Data["invalid"]; ok {
		r.Recorder.Eventf(&cm, nil, corev1.EventTypeWarning, "Invalid", "Reconcile", `key "invalid" is not allowed`)
	}
	return ctrl.Result{}, nil
}

// NewManager returns a manager that watches the ConfigMaps of namespace
// with a Reconciler. opts are herald's broadcasters' (k8s.WithEventsOptions,
// k8s.WithShutdownTimeout, ...).
func NewManager(cfg *rest.Config, namespace string, opts ...k8s.Option) (*heraldctrl.Manager, error) {
	// The one change: heraldctrl.NewManager instead of ctrl.NewManager.
	mgr, err := heraldctrl.NewManager(cfg, ctrl.Options{
		Cache:   cache.Options{DefaultNamespaces: map[string]cache.Config{namespace: {}}},
		Metrics: metricsserver.Options{BindAddress: "0"},
		// Tests make several managers in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}, opts...)
	if err != nil {
		return nil, fmt.Errorf("example: %w", err)
	}
	r := &Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Component)}
	if err := ctrl.NewControllerManagedBy(mgr).Named(Component).For(&corev1.ConfigMap{}).Complete(r); err != nil {
		return nil, fmt.Errorf("example: %w", err)
	}
	return mgr, nil
}

// Run runs the controller until ctx ends; when it returns, the events
// recorded have been written (within herald's shutdown bound).
func Run(ctx context.Context, cfg *rest.Config, namespace string, opts ...k8s.Option) error {
	mgr, err := NewManager(cfg, namespace, opts...)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
