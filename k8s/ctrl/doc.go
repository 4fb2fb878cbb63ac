// Package ctrl records the events of a controller-runtime (v0.25) manager
// through herald: [NewManager] is a drop-in for ctrl.NewManager
// (manager.New) whose GetEventRecorder records events.k8s.io/v1 Events
// through [github.com/heraldgo/herald/k8s.NewEventBroadcaster], and whose
// deprecated GetEventRecorderFor records core/v1 Events through
// [github.com/heraldgo/herald/k8s.NewBroadcaster]. It is a module of its
// own, so that the k8s module does not depend on controller-runtime.
//
// # Usage
//
// The one change, in main.go:
//
//	import heraldctrl "github.com/heraldgo/herald/k8s/ctrl"
//
//	mgr, err := heraldctrl.NewManager(cfg, ctrl.Options{...}) // was: ctrl.NewManager(cfg, ctrl.Options{...})
//
// Everything else stays: reconcilers take mgr.GetEventRecorder(name), and
// mgr.Start(ctx) runs the manager. [Wrap] does the same for a manager made
// elsewhere.
//
// # Shutdown
//
// When Start returns, after controller-runtime has stopped its runnables,
// herald's broadcasters shut down: what was recorded is written, series
// counts included, within their bound (k8s.WithShutdownTimeout, 30 s by
// default), and none of their goroutines is left. There is nothing to call
// after Start. A manager that records nothing and is never started starts
// no goroutine of herald's.
//
// # Why a wrapper
//
// controller-runtime v0.25 builds the broadcaster behind GetEventRecorder
// itself, through unexported options: the exported seam,
// Options.EventBroadcaster, is deprecated ("may cause goroutine leaks"),
// serves only GetEventRecorderFor (core/v1), and is never shut down by the
// manager. [Manager] embeds the manager.Manager and overrides only
// GetEventRecorder, GetEventRecorderFor and Start, all part of controller-runtime's
// exported interfaces (manager.Manager, recorder.Provider), so it keeps
// working as long as they do. The events controller-runtime records
// itself (leader election) go through its own recorders, as before.
//
// # Concurrency
//
// A Manager is safe for concurrent use, as the manager it wraps; its
// recorders never block their callers.
package ctrl
