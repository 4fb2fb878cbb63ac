// Package example is a tiny controller built with controller-runtime whose
// events go through herald: [NewManager] sets the manager's
// Options.EventBroadcaster to k8s.NewBroadcaster(), and [Reconciler]
// records an event about each ConfigMap it reconciles. It is a module of
// its own, so that the k8s module does not depend on controller-runtime.
//
// With controller-runtime v0.25, Options.EventBroadcaster serves the
// recorders of manager.GetEventRecorderFor (core/v1 Events);
// GetEventRecorder (events.k8s.io) keeps client-go's. A broadcaster given
// in the options is not shut down by the manager: call Shutdown after
// Start has returned, as [Run] does, so that the last events are written.
package example
