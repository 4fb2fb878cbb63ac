package k8s

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
)

// NewEventBroadcasterAdapter is a drop-in for client-go's
// tools/events NewEventBroadcasterAdapterWithContext: when the server
// serves events.k8s.io/v1, NewRecorder records through
// [NewEventBroadcaster]; otherwise, and for DeprecatedNewLegacyRecorder,
// through [NewBroadcaster] (core/v1). ctx is given to both as
// [WithContext], before opts.
//
//lint:ignore SA1019 the result is client-go's own adapter interface (API.md), deprecated upstream with the adapter itself
func NewEventBroadcasterAdapter(ctx context.Context, client kubernetes.Interface, opts ...Option) clientevents.EventBroadcasterAdapter {
	opts = append([]Option{WithContext(ctx)}, opts...)
	a := &eventAdapter{core: client.CoreV1()}
	if _, err := client.Discovery().ServerResourcesForGroupVersionWithContext(ctx, eventsv1.SchemeGroupVersion.String()); err == nil {
		a.v1 = NewEventBroadcaster(&clientevents.EventSinkImpl{Interface: client.EventsV1()}, opts...)
	}
	a.legacy = NewBroadcaster(opts...)
	return a
}

type eventAdapter struct {
	core   typedcorev1.CoreV1Interface
	v1     clientevents.EventBroadcaster // nil without events.k8s.io/v1
	legacy record.EventBroadcaster
}

func (a *eventAdapter) StartRecordingToSink(stopCh <-chan struct{}) {
	if a.v1 != nil {
		a.v1.StartRecordingToSink(stopCh)
	}
	a.legacy.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: a.core.Events("")})
}

func (a *eventAdapter) NewRecorder(name string) clientevents.EventRecorderLogger {
	if a.v1 != nil {
		return a.v1.NewRecorder(scheme.Scheme, name)
	}
	return record.NewEventRecorderAdapter(a.DeprecatedNewLegacyRecorder(name))
}

func (a *eventAdapter) DeprecatedNewLegacyRecorder(name string) record.EventRecorderLogger {
	return a.legacy.NewRecorder(scheme.Scheme, corev1.EventSource{Component: name})
}

func (a *eventAdapter) Shutdown() {
	a.legacy.Shutdown()
	if a.v1 != nil {
		a.v1.Shutdown()
	}
}
