package example_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/example"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// TestControllerRecordsThroughHerald: a controller-runtime manager made by
// herald's ctrl.NewManager, on a real API server, records through
// mgr.GetEventRecorder its events.k8s.io/v1 events about the ConfigMaps it
// watches. Once Start has returned (nothing else is called) every
// occurrence herald recorded is in the API server: as in client-go, the
// events about one version of the ConfigMap (the regarding reference
// includes its resourceVersion) with the same reason are one Event, a
// series if the version was reconciled more than once, and the series
// counts add up to what herald recorded.
func TestControllerRecordsThroughHerald(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	mgr, err := example.NewManager(s.Config(), ns, k8s.WithEventsOptions(events.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns}, Data: map[string]string{"a": "1", "b": "2"}}
	created, err := c.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// By reason and the ConfigMap's resourceVersion.
	stored := func() map[[2]string]eventsv1.Event {
		l, err := c.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		m := map[[2]string]eventsv1.Event{}
		for _, e := range l.Items {
			k := [2]string{e.Reason, e.Regarding.ResourceVersion}
			if _, dup := m[k]; dup {
				t.Errorf("two %s events about version %s: want one, a series", k[0], k[1])
			}
			m[k] = e
		}
		return m
	}
	waitFor(t, func() bool { _, ok := stored()[[2]string{"Observed", created.ResourceVersion}]; return ok })
	created.Data["invalid"] = "x"
	updated, err := c.CoreV1().ConfigMaps(ns).Update(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { _, ok := stored()[[2]string{"Invalid", updated.ResourceVersion}]; return ok })

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("manager: %v", err)
	}

	got := stored()
	want := corev1.ObjectReference{Kind: "ConfigMap", APIVersion: "v1", Namespace: ns, Name: "app", UID: created.UID}
	var occurrences uint64
	for k, e := range got {
		ref := e.Regarding
		ref.ResourceVersion = ""
		if ref != want || e.ReportingController != example.Component || e.Action != "Reconcile" {
			t.Errorf("%v: regarding %+v, reporting controller %q, action %q", k, e.Regarding, e.ReportingController, e.Action)
		}
		if e.Series != nil {
			occurrences += uint64(e.Series.Count)
		} else {
			occurrences++
		}
	}
	for k, note := range map[[2]string]string{
		{"Observed", created.ResourceVersion}: "2 keys",
		{"Observed", updated.ResourceVersion}: "3 keys",
		{"Invalid", updated.ResourceVersion}:  `key "invalid" is not allowed`,
	} {
		if e, ok := got[k]; !ok || e.Note != note {
			t.Errorf("%v: %+v, want note %q", k, e, note)
		}
	}
	st := mgr.EventBroadcaster().Stats()
	if recorded := st.Recorded - st.SeriesWrites; occurrences != recorded {
		t.Errorf("the API server holds %d occurrences, herald recorded %d", occurrences, recorded)
	}
	if st.Failed != 0 || st.Dropped != 0 || st.Abandoned != 0 || st.Written == 0 {
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
