// Package k8s puts herald's event pipeline
// ([github.com/heraldgo/herald/events]) inside a Kubernetes controller:
// [NewBroadcaster] is a drop-in for client-go's record.NewBroadcaster, and
// [NewSink] writes herald events as core/v1 Events through a clientset.
//
// # Usage
//
// Swap the constructor; everything else a controller does with client-go's
// record.EventBroadcaster stays as it is:
//
//	b := k8s.NewBroadcaster() // was: record.NewBroadcaster()
//	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
//	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "my-controller"})
//	rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "restarting %s", name)
//	defer b.Shutdown() // writes what was recorded, within WithShutdownTimeout
//
// With controller-runtime, set manager.Options.EventBroadcaster to
// k8s.NewBroadcaster() (the manager then leaves its shutdown to you: call
// Shutdown after the manager has stopped).
//
// # Guarantees
//
//  1. A controller that records a stream of events through NewBroadcaster
//     ends with the same Event objects in the API server (count, message,
//     reason, type, involved object, source, aggregates) as with client-go's
//     record.NewBroadcaster on the same stream, except where herald is
//     deterministic by design: after a group of similar events reaches its
//     10th distinct message, herald aggregates every similar event, repeats
//     included, where client-go forgets a random message and lets some
//     repeats through as plain events. Event names are valid for the API
//     server (see [ValidEventName]).
//  2. NewRecorder(scheme, source) returns a record.EventRecorderLogger that
//     resolves object references through the scheme
//     (reference.GetReference), as client-go's does; annotations are kept.
//  3. Shutdown writes what was recorded before it, with retries, within a
//     bound ([DefaultShutdownTimeout], set with [WithShutdownTimeout]), then
//     leaves no goroutine.
//
// # Differences from client-go
//
// Where herald deliberately differs from client-go's record package:
//
//   - Aggregation is deterministic (above).
//   - Shutdown flushes: client-go's drops what is still queued, or tries it
//     once. Recording after Shutdown is dropped and reported, never a
//     panic.
//   - Throughput: a Recorder call costs herald a fraction of client-go's
//     (README.md of this module has the figures against a real API
//     server).
//   - The API statuses that mean "come back later" (429, 503, 504) are
//     retried; client-go drops the event (see [NewSink]).
//   - Stop on a started watcher or sink discards what is still queued for it
//     (counted and reported); client-go's goroutine handles the queued
//     events first.
//   - The watch.Interface the Start methods return delivers nothing on
//     ResultChan (the events go to the handler or sink); it is closed by Stop
//     and Shutdown.
//   - herald's reports (dropped, rejected, abandoned events) are rate
//     limited and go to klog unless events.WithLogger is given; an event
//     rejected because its namespace is being deleted is reported at Error,
//     where client-go logs it at V(5).
package k8s
