package example_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/example"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// TestControllerRecordsThroughHerald: a controller-runtime manager whose
// EventBroadcaster is herald's, on a real API server, records its events
// about the ConfigMaps it watches; they are in the API server, with the
// controller as their source, once the manager has stopped and the
// broadcaster has shut down.
func TestControllerRecordsThroughHerald(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, b, err := example.NewManager(s.Config(), ns, k8s.WithEventsOptions(events.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{"a": "1", "b": "2"}}
	if _, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	byReason := func() map[string]corev1.Event {
		l, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]corev1.Event{}
		for _, e := range l.Items {
			m[e.Reason] = e
		}
		return m
	}
	waitFor(t, func() bool { _, ok := byReason()["Observed"]; return ok })
	cm.Data["invalid"] = "x"
	if _, err := c.CoreV1().ConfigMaps(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := byReason()["Invalid"]; return ok })

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("manager: %v", err)
	}
	sctx, scancel := context.WithTimeout(context.Background(), time.Minute)
	defer scancel()
	if err := b.ShutdownContext(sctx); err != nil {
		t.Fatal(err)
	}

	got := byReason()
	obs, inv := got["Observed"], got["Invalid"]
	want := corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: "app"}
	for _, e := range []corev1.Event{obs, inv} {
		ref := e.InvolvedObject
		ref.UID, ref.ResourceVersion = "", ""
		if ref != want || e.Source.Component != example.Component || e.ReportingController != example.Component {
			t.Errorf("%s: object %+v, source %+v", e.Reason, e.InvolvedObject, e.Source)
		}
	}
	if inv.Type != corev1.EventTypeWarning || inv.Count < 1 || obs.Type != corev1.EventTypeNormal {
		t.Errorf("Invalid %+v, Observed %+v", inv, obs)
	}
	if st := b.Events().Stats(); st.Failed != 0 || st.Dropped != 0 || st.Abandoned != 0 || st.Written == 0 {
		t.Errorf("herald %+v", st)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
