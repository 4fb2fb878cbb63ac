// Package example is a tiny controller built with controller-runtime whose
// events go through herald: [NewManager] makes its manager with
// github.com/heraldgo/herald/k8s/ctrl's NewManager instead of
// ctrl.NewManager (the one change), and [Reconciler] records, through
// mgr.GetEventRecorder, an events.k8s.io/v1 event about each ConfigMap it
// reconciles. It is a module of its own, so that the k8s module does not
// depend on controller-runtime.
//
// There is nothing to shut down after mgr.Start: herald's broadcasters
// write what was recorded and stop when Start returns.
package example
