package ctrl_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// TestEventBroadcasterAdapterRealServer: k8s.NewEventBroadcasterAdapter on
// a real API server finds events.k8s.io/v1 by discovery, so NewRecorder
// records events.k8s.io/v1 Events (action and series, which core/v1 Events
// do not have). It lives here, next to this module's server, because the
// k8s module's own package tests run without one; the k8s module's unit
// tests (eventsv1_adapter_test.go) cover the rest with a fake clientset.
func TestEventBroadcasterAdapterRealServer(t *testing.T) {
	s := apiservertest.Shared(t)
	ns := s.Namespace(t)
	c := s.Clientset()
	ctx := context.Background()
	cm, err := c.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := k8s.NewEventBroadcasterAdapter(ctx, c, quiet)
	stop := make(chan struct{})
	defer close(stop)
	a.StartRecordingToSink(stop)
	rec := a.NewRecorder("adapter")
	for i := range 3 {
		rec.Eventf(cm, nil, corev1.EventTypeNormal, "Synced", "Sync", "try %d", i+1)
	}
	a.Shutdown()
	l, err := c.EventsV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(l.Items), l.Items)
	}
	e := l.Items[0]
	if e.Action != "Sync" || e.ReportingController != "adapter" || e.Note != "try 1" || e.Series == nil || e.Series.Count != 3 {
		t.Errorf("event %+v", e)
	}
}
