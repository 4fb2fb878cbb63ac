package k8s_test

import (
	"context"
	"testing"
	"testing/synctest"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/heraldgo/herald/k8s"
)

// servesEventsV1 makes c's discovery list events.k8s.io/v1, as every API
// server since Kubernetes 1.19 does (the fake's lists nothing by default).
func servesEventsV1(c *fake.Clientset) {
	c.Resources = []*metav1.APIResourceList{{
		GroupVersion: eventsv1.SchemeGroupVersion.String(),
		APIResources: []metav1.APIResource{{Name: "events", Namespaced: true, Kind: "Event"}},
	}}
}

func adapterPod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"}}
}

// The callers below hold the adapter with := and call every method of
// client-go's (deprecated) EventBroadcasterAdapter interface, and
// staticcheck, which this module's lint runs on test files too, finds
// nothing to report in this file: the deprecation of the interface type
// reaches only code that names it, and none needs to.

// TestEventBroadcasterAdapterEventsV1: on a server that serves
// events.k8s.io/v1, NewRecorder records events.k8s.io/v1 Events through
// NewEventBroadcaster (reportingController the name, the action and note
// kept), and DeprecatedNewLegacyRecorder core/v1 Events through
// NewBroadcaster (source component the name); Shutdown writes both.
func TestEventBroadcasterAdapterEventsV1(t *testing.T) {
	c := fake.NewClientset()
	servesEventsV1(c)
	a := k8s.NewEventBroadcasterAdapter(context.Background(), c, quietEvents)
	stop := make(chan struct{})
	defer close(stop)
	a.StartRecordingToSink(stop)
	a.NewRecorder("sched").Eventf(adapterPod(), nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%d nodes", 0)
	a.DeprecatedNewLegacyRecorder("legacy").Eventf(adapterPod(), corev1.EventTypeNormal, "Pulled", "image %s", "nginx")
	a.Shutdown()

	v1, err := c.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(v1.Items) != 1 {
		t.Fatalf("%d events.k8s.io/v1 events, want 1", len(v1.Items))
	}
	e := v1.Items[0]
	if e.ReportingController != "sched" || e.Reason != "FailedScheduling" || e.Action != "Scheduling" || e.Note != "0 nodes" ||
		e.Type != corev1.EventTypeWarning || e.Regarding.Name != "web" || e.Regarding.Kind != "Pod" {
		t.Errorf("events.k8s.io/v1 event %+v", e)
	}
	core, err := c.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The fake stores events.k8s.io/v1 and core/v1 Events apart (a real
	// server shows each through both APIs).
	if len(core.Items) != 1 {
		t.Fatalf("%d core/v1 events, want 1 (the legacy recorder's)", len(core.Items))
	}
	if ce := core.Items[0]; ce.Source.Component != "legacy" || ce.Reason != "Pulled" || ce.Message != "image nginx" || ce.InvolvedObject.Name != "web" {
		t.Errorf("core/v1 event %+v", ce)
	}
}

// TestEventBroadcasterAdapterLegacy: on a server without events.k8s.io/v1,
// NewRecorder falls back to core/v1 Events through NewBroadcaster, as
// client-go's adapter does (the note is the message, the name the source
// component).
func TestEventBroadcasterAdapterLegacy(t *testing.T) {
	c := fake.NewClientset() // its discovery serves no events.k8s.io/v1
	a := k8s.NewEventBroadcasterAdapter(context.Background(), c, quietEvents)
	stop := make(chan struct{})
	defer close(stop)
	a.StartRecordingToSink(stop)
	a.NewRecorder("sched").Eventf(adapterPod(), nil, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%d nodes", 0)
	a.Shutdown()

	if v1, err := c.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{}); err != nil || len(v1.Items) != 0 {
		t.Fatalf("events.k8s.io/v1 events %v, %v: want none", v1, err)
	}
	core, err := c.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(core.Items) != 1 {
		t.Fatalf("%d core/v1 events, want 1", len(core.Items))
	}
	if e := core.Items[0]; e.Source.Component != "sched" || e.Reason != "FailedScheduling" || e.Message != "0 nodes" || e.Type != corev1.EventTypeWarning {
		t.Errorf("core/v1 event %+v", e)
	}
}

// TestEventBroadcasterAdapterContext: ctx, given to both broadcasters as
// WithContext, shuts them down when it ends, with no Shutdown call: what
// was recorded before is written, an event recorded after is not, through
// either API, and no goroutine is left.
func TestEventBroadcasterAdapterContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := fake.NewClientset()
		servesEventsV1(c)
		ctx, cancel := context.WithCancel(context.Background())
		a := k8s.NewEventBroadcasterAdapter(ctx, c, quietEvents)
		stop := make(chan struct{})
		defer close(stop)
		a.StartRecordingToSink(stop)
		a.NewRecorder("sched").Eventf(adapterPod(), nil, corev1.EventTypeNormal, "Before", "A", "n")
		a.DeprecatedNewLegacyRecorder("legacy").Eventf(adapterPod(), corev1.EventTypeNormal, "Before", "n")
		cancel()
		synctest.Wait() // every goroutine of both broadcasters has exited: the bubble would not end otherwise
		a.NewRecorder("sched").Eventf(adapterPod(), nil, corev1.EventTypeNormal, "After", "A", "n")
		a.DeprecatedNewLegacyRecorder("legacy").Eventf(adapterPod(), corev1.EventTypeNormal, "After", "n")
		synctest.Wait()
		v1, _ := c.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		core, _ := c.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if len(v1.Items) != 1 || v1.Items[0].Reason != "Before" || len(core.Items) != 1 || core.Items[0].Reason != "Before" {
			t.Fatalf("events.k8s.io/v1 %+v, core/v1 %+v: want only the ones recorded before ctx ended", v1.Items, core.Items)
		}
	})
}

// TestEventBroadcasterAdapterStopCh: closing StartRecordingToSink's stopCh
// stops the events.k8s.io/v1 recording, as client-go's (whose adapter,
// like this one, leaves the core/v1 recording to Shutdown).
func TestEventBroadcasterAdapterStopCh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := fake.NewClientset()
		servesEventsV1(c)
		a := k8s.NewEventBroadcasterAdapter(context.Background(), c, quietEvents)
		defer a.Shutdown()
		stop := make(chan struct{})
		a.StartRecordingToSink(stop)
		rec := a.NewRecorder("sched")
		rec.Eventf(adapterPod(), nil, corev1.EventTypeNormal, "Before", "A", "n")
		synctest.Wait()
		close(stop)
		synctest.Wait()
		rec.Eventf(adapterPod(), nil, corev1.EventTypeNormal, "After", "A", "n")
		a.Shutdown()
		v1, _ := c.EventsV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if len(v1.Items) != 1 || v1.Items[0].Reason != "Before" {
			t.Fatalf("events.k8s.io/v1 %+v: want only the one recorded before stopCh closed", v1.Items)
		}
	})
}
