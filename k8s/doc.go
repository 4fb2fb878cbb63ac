// Package k8s puts herald's event pipeline
// ([github.com/heraldgo/herald/events]) under the event APIs Kubernetes
// controllers use: [NewBroadcaster] is a drop-in for client-go's
// tools/record NewBroadcaster (core/v1 Events), [NewEventBroadcaster] and
// [NewEventBroadcasterAdapter] for tools/events' NewBroadcaster and
// NewEventBroadcasterAdapterWithContext (events.k8s.io/v1 Events), and
// [NewSink] writes herald's own events as core/v1 Events through a
// clientset. Package [github.com/heraldgo/herald/k8s/k8stest] has a
// recorder for controllers' tests; module github.com/heraldgo/herald/k8s/ctrl
// gives a controller-runtime manager herald's recorders.
//
// # Which API
//
// core/v1 and events.k8s.io/v1 Events are the same objects in the API
// server; pick by the API the code records through. controller-runtime
// v0.23 and later (mgr.GetEventRecorder): the ctrl module's NewManager.
// client-go tools/events (kube-scheduler, kube-proxy): NewEventBroadcaster,
// or NewEventBroadcasterAdapter. client-go tools/record (most of
// Kubernetes' own controllers): NewBroadcaster. New code should use
// events.k8s.io/v1.
//
// # Usage
//
// Swap the package qualifier; everything else a controller does with
// client-go's broadcaster stays as it is, options included
// ([WithContext], [WithSleepDuration], [WithCorrelatorOptions] mean what
// record's do):
//
//	b := k8s.NewBroadcaster(k8s.WithContext(ctx)) // was: record.NewBroadcaster(record.WithContext(ctx))
//	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
//	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "my-controller"})
//	rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "restarting %s", name)
//	defer b.Shutdown() // writes what was recorded, within WithShutdownTimeout
//
// and for events.k8s.io/v1:
//
//	b := k8s.NewEventBroadcaster(&clientevents.EventSinkImpl{Interface: client.EventsV1()}) // was: clientevents.NewBroadcaster(...)
//	b.StartRecordingToSinkWithContext(ctx)
//	rec := b.NewRecorder(scheme.Scheme, "my-scheduler")
//	rec.Eventf(pod, node, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%d nodes", n)
//	defer b.Shutdown() // writes what was recorded, series counts included
//
// Hold NewEventBroadcasterAdapter's result with := : client-go deprecates
// the EventBroadcasterAdapter interface, and only code that names it needs
// a lint suppression. herald's own options go through [WithEventsOptions]
// (events.WithQueueLength, events.WithSinkConcurrency, events.WithLogger,
// ...).
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
//  4. Through NewEventBroadcaster, NewRecorder(scheme, reportingController)
//     returns an EventRecorderLogger that is also an AnnotatedEventRecorder,
//     and leaves the same events.k8s.io/v1 Events as client-go's
//     tools/events: an isomorphic event within [SeriesWindow] turns the
//     first into a series (series.count 2 written at once); later counts
//     are written within [SeriesFlushInterval] and at Shutdown, so
//     series.count is the number of occurrences.
//  5. A sink the user passes is called one event at a time unless it is
//     client-go's own EventSinkImpl ([DefaultSinkConcurrency] requests) or
//     WithEventsOptions(events.WithSinkConcurrency(n)) asks otherwise; per
//     involved (regarding) object, writes are one at a time, in recording
//     order. Goroutines and queued events are bounded; events that do not
//     fit are counted and reported.
//
// # Differences from client-go
//
// Where herald deliberately differs from client-go (README.md of this
// module gives each reason):
//
//   - Shutdown flushes: client-go's drops what is still queued, or tries it
//     once, and tools/events loses the series counts not yet written.
//     Recording after Shutdown is dropped and reported, never a panic.
//   - tools/events writes a series' count only every 30 minutes; herald
//     within SeriesFlushInterval (10 s) and at Shutdown.
//   - tools/events starts a goroutine per event and calls the sink
//     concurrently, out of order; herald has one goroutine per started
//     sink or watcher, plus up to the sink concurrency while writing, and
//     calls a user's sink serially (guarantee 5).
//   - Aggregation is deterministic (guarantee 1).
//   - A fake record.CorrelatorOptions.Clock stamps the events too (client-go's
//     recorder stamps with the real clock and only its correlator reads
//     Clock), so timestamps and decisions agree; see [CorrelatorOptions].
//   - The API statuses that mean "come back later" (429, 503, 504) are
//     retried; client-go drops the event (see [NewSink]).
//   - An object whose name makes no valid event name gets a name derived
//     from it ([ValidEventName]), stable across patches; client-go's is
//     random.
//   - A namespace being deleted refuses events: counted, logged at Debug
//     only, as client-go logs it at V(5).
//   - Stop on a started watcher or sink discards what is still queued for it
//     (counted and reported); client-go's goroutine handles the queued
//     events first. The watch.Interface the tools/record Start methods
//     return delivers nothing on ResultChan (the events go to the handler or
//     sink); it is closed by Stop and Shutdown.
//   - herald's reports (dropped, rejected, abandoned events) are rate
//     limited and go to klog (klog.FromContext of WithContext's ctx) unless
//     events.WithLogger is given.
package k8s
