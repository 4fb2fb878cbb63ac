package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

var source = corev1.EventSource{Component: "faults"}

// fastRetry keeps the fault tests short: 40 tries 250 ms apart.
var fastRetry = k8s.WithEventsOptions(events.WithRetry(40, 250*time.Millisecond))

func stats(b record.EventBroadcaster) events.Stats { return b.(*k8s.Broadcaster).Events().Stats() }

// waitStored waits until ns holds an event with reason and count.
func waitStored(t *testing.T, c kubernetes.Interface, ns, reason string, count int32) {
	t.Helper()
	waitFor(t, time.Minute, fmt.Sprintf("no %s event with count %d in %s", reason, count, ns), func() bool {
		for _, e := range list(t, c, ns) {
			if e.Reason == reason && e.Count == count {
				return true
			}
		}
		return false
	})
}

// TestDeletedEventIsCreatedAgain: an Event deleted mid-stream is created
// again by the next occurrence (Patch NotFound, then Create), with the
// count the occurrence has, as client-go does.
func TestDeletedEventIsCreatedAgain(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	kns, hns := s.Namespace(t), s.Namespace(t)
	kb, hb := record.NewBroadcaster(), k8s.NewBroadcaster(quiet, fastRetry)
	defer kb.Shutdown()
	kb.StartRecordingToSink(sinkFor(c))
	hb.StartRecordingToSink(sinkFor(c))
	krec, hrec := kb.NewRecorder(scheme.Scheme, source), hb.NewRecorder(scheme.Scheme, source)
	for _, ns := range []string{kns, hns} {
		rec := map[string]record.EventRecorder{kns: krec, hns: hrec}[ns]
		rec.Event(pod(ns, "web"), corev1.EventTypeWarning, "BackOff", "restarting")
		rec.Event(pod(ns, "web"), corev1.EventTypeWarning, "BackOff", "restarting")
		waitStored(t, c, ns, "BackOff", 2)
		if err := c.CoreV1().Events(ns).DeleteCollection(context.Background(), metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		rec.Event(pod(ns, "web"), corev1.EventTypeWarning, "BackOff", "restarting")
		waitStored(t, c, ns, "BackOff", 3)
	}
	shutdown(t, hb)
	kgot, hgot := list(t, c, kns), list(t, c, hns)
	if len(hgot) != 1 || len(kgot) != 1 || hgot[0] != kgot[0] {
		t.Fatalf("after the delete: client-go %v, herald %v", kgot, hgot)
	}
	if s := stats(hb); s.Written != 3 || s.Failed != 0 {
		t.Fatalf("herald %+v, want 3 written", s)
	}
}

// TestAlreadyExistsIsRecorded: an event whose name is taken (two
// broadcasters on one stopped clock name their first events alike) is
// treated as recorded, not retried, not failed.
func TestAlreadyExistsIsRecorded(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	at := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	clock := k8s.WithEventsOptions(events.WithCorrelatorOptions(events.CorrelatorOptions{Now: func() time.Time { return at }}))
	var sinks []*countingSink
	for i := range 2 {
		b := k8s.NewBroadcaster(quiet, fastRetry, clock)
		cs := &countingSink{EventSink: sinkFor(c)}
		sinks = append(sinks, cs)
		b.StartRecordingToSink(cs)
		b.NewRecorder(scheme.Scheme, source).Event(pod(ns, "web"), corev1.EventTypeNormal, "Started", fmt.Sprint("from ", i))
		shutdown(t, b)
		if st := stats(b); st.Written != 1 || st.Failed != 0 {
			t.Fatalf("broadcaster %d: %+v, want 1 written", i, st)
		}
	}
	if creates, _ := sinks[1].calls(); creates != 1 {
		t.Fatalf("the second broadcaster called Create %d times, want once", creates)
	}
	got := list(t, c, ns)
	if len(got) != 1 || got[0].Message != "from 0" {
		t.Fatalf("stored %v, want the first broadcaster's event alone", got)
	}
	// And the sink on its own says so.
	e := &events.Event{Name: "web.1", Namespace: ns, InvolvedObject: events.ObjectReference{Kind: "Pod", Name: "web", Namespace: ns},
		Reason: "R", Message: "m", Type: events.Normal, Count: 1, FirstTimestamp: at, LastTimestamp: at}
	sink := k8s.NewSink(c.CoreV1())
	if _, err := sink.Create(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Create(context.Background(), e); !errors.Is(err, events.ErrAlreadyExists) {
		t.Fatalf("second Create: %v, want ErrAlreadyExists", err)
	}
	if _, err := sink.Patch(context.Background(), &events.Event{Name: "gone.1", Namespace: ns}, events.Patch{Count: 2, LastTimestamp: at}); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("Patch of a missing event: %v, want ErrNotFound", err)
	}
}

// TestRejectedIsNotRetried: an event the server refuses (its namespace does
// not exist) is tried once, counted as failed, and the stream goes on.
func TestRejectedIsNotRetried(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	b := k8s.NewBroadcaster(quiet, fastRetry)
	cs := &countingSink{EventSink: sinkFor(c)}
	b.StartRecordingToSink(cs)
	rec := b.NewRecorder(scheme.Scheme, source)
	rec.Event(pod("no-such-namespace", "web"), corev1.EventTypeNormal, "Started", "m")
	rec.Event(pod(ns, "web"), corev1.EventTypeNormal, "Started", "m")
	shutdownFailed(t, b, 1)
	if creates, _ := cs.calls(); creates != 2 {
		t.Errorf("Create called %d times, want 2 (the rejected event once)", creates)
	}
	if st := stats(b); st.Failed != 1 || st.Written != 1 {
		t.Errorf("%+v, want 1 failed, 1 written", st)
	}
	if got := list(t, c, ns); len(got) != 1 {
		t.Errorf("stored %v", got)
	}
}

// TestTerminatingNamespace: a namespace being deleted (forever here: no
// controller manager finalizes it) refuses new events; the event is tried
// once, by herald as by client-go, and not retried.
func TestTerminatingNamespace(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	if err := c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := c.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
	if err != nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace %s: %v, phase %q; want Terminating", ns, err, got.Status.Phase)
	}
	b := k8s.NewBroadcaster(quiet, fastRetry)
	cs := &countingSink{EventSink: sinkFor(c)}
	b.StartRecordingToSink(cs)
	start := time.Now()
	b.NewRecorder(scheme.Scheme, source).Event(pod(ns, "web"), corev1.EventTypeNormal, "Started", "m")
	shutdownFailed(t, b, 1)
	if creates, _ := cs.calls(); creates != 1 {
		t.Errorf("Create called %d times, want once", creates)
	}
	if st := stats(b); st.Failed != 1 || st.Written != 0 {
		t.Errorf("%+v, want 1 failed", st)
	}
	t.Logf("terminating namespace: given up after %v", time.Since(start))
	// The error the sink saw says why.
	_, err = k8s.NewSink(c.CoreV1()).Create(context.Background(), &events.Event{
		Name: "web.1", Namespace: ns, InvolvedObject: events.ObjectReference{Kind: "Pod", Name: "web", Namespace: ns},
		Reason: "R", Message: "m", Type: events.Normal, Count: 1})
	if !errors.Is(err, events.ErrRejected) || !strings.Contains(err.Error(), "terminat") {
		t.Errorf("Create in a terminating namespace: %v, want ErrRejected saying why", err)
	}
}

// TestAPIServerRestart: the API server stops mid-stream; the events
// recorded while it is down are retried and written once it is back,
// within the retry budget, repeats as patches of the events stored before.
func TestAPIServerRestart(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	b := k8s.NewBroadcaster(quiet, fastRetry) // 40 tries, 250 ms apart: 10 s
	b.StartRecordingToSink(sinkFor(c))
	rec := b.NewRecorder(scheme.Scheme, source)
	rec.Event(pod(ns, "web"), corev1.EventTypeNormal, "Before", "m")
	waitStored(t, c, ns, "Before", 1)

	s.StopAPIServer()
	down := time.Now()
	rec.Event(pod(ns, "web"), corev1.EventTypeNormal, "Before", "m") // a Patch
	for i := range 20 {
		rec.Eventf(pod(ns, fmt.Sprint("web-", i)), corev1.EventTypeWarning, "WhileDown", "event %d", i)
	}
	time.Sleep(time.Second) // the first write fails and sleeps
	if err := s.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	t.Logf("API server down for %v", time.Since(down))
	shutdown(t, b)
	st := stats(b)
	if st.Written != 22 || st.Failed != 0 || st.Abandoned != 0 {
		t.Fatalf("%+v, want all 22 written", st)
	}
	got := list(t, c, ns)
	n := 0
	for _, e := range got {
		switch {
		case e.Reason == "Before" && e.Count == 2:
			n++
		case e.Reason == "WhileDown" && e.Count == 1:
			n++
		}
	}
	if n != 21 || len(got) != 21 {
		t.Fatalf("stored %d events (%d as expected): %v", len(got), n, got)
	}
}

// TestInvalidObjectNames: events about objects whose names make invalid
// event names (a ClusterRole "system:...", a pod name of 253 characters)
// are stored under valid names, and their repeats are counted on them.
func TestInvalidObjectNames(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	b := k8s.NewBroadcaster(quiet, fastRetry)
	b.StartRecordingToSink(sinkFor(c))
	rec := b.NewRecorder(scheme.Scheme, source)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:herald:" + ns, UID: "uid-role"}}
	long := pod(ns, strings.Repeat("a", 253))
	for range 3 {
		rec.Event(role, corev1.EventTypeNormal, "Updated", "rules changed")
		rec.Event(long, corev1.EventTypeNormal, "Started", "started")
	}
	shutdown(t, b)
	if st := stats(b); st.Written != 6 || st.Failed != 0 {
		t.Fatalf("%+v, want 6 written", st)
	}
	check := func(ns, objName string) {
		l, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + objName})
		if err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 1 || l.Items[0].Count != 3 {
			t.Fatalf("events about %s: %d, want one with count 3", objName, len(l.Items))
		}
		if errs := validation.NameIsDNSSubdomain(l.Items[0].Name, false); len(errs) > 0 {
			t.Fatalf("stored under an invalid name %q", l.Items[0].Name)
		}
	}
	check(metav1.NamespaceDefault, role.Name)
	check(ns, long.Name)
}

// TestShutdownWritesFullQueue is guarantee 14 at the default bound: a full
// queue (1000 distinct events, recorded before the sink wrote any) is
// written by Shutdown() with its default bound, and nothing is abandoned.
// It logs how long that took: DefaultShutdownTimeout is chosen from it.
func TestShutdownWritesFullQueue(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	b := k8s.NewBroadcaster(quiet)
	b.StartRecordingToSink(sinkFor(c))
	rec := b.NewRecorder(scheme.Scheme, source)
	for i := range events.DefaultQueueLength {
		rec.Eventf(pod(ns, fmt.Sprint("web-", i%100)), corev1.EventTypeNormal, "Scaled", "scaled to %d", i)
	}
	start := time.Now()
	b.Shutdown()
	took := time.Since(start)
	st := stats(b)
	if st.Dropped+st.Written != uint64(events.DefaultQueueLength) || st.Abandoned != 0 || st.Failed != 0 {
		t.Fatalf("%+v: want every event written or dropped by the Recorder, none abandoned", st)
	}
	got := list(t, c, ns)
	if uint64(len(got)) != st.Written {
		t.Fatalf("stored %d events, Written %d", len(got), st.Written)
	}
	t.Logf("Shutdown wrote %d queued events in %v (%.0f/s); bound %v", st.Written, took, float64(st.Written)/took.Seconds(), k8s.DefaultShutdownTimeout)
}

// TestShutdownBoundWhileServerDown is guarantee 14 when the server is
// gone: Shutdown() gives up at its bound (WithShutdownTimeout) instead of
// retrying on, counts the events it could not write as abandoned, and
// leaves no goroutine (goleak, after the run).
func TestShutdownBoundWhileServerDown(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	b := k8s.NewBroadcaster(quiet, k8s.WithEventsOptions(events.WithRetry(1000, 100*time.Millisecond)), k8s.WithShutdownTimeout(2*time.Second))
	b.StartRecordingToSink(sinkFor(c))
	rec := b.NewRecorder(scheme.Scheme, source)
	s.StopAPIServer()
	defer func() {
		if err := s.StartAPIServer(); err != nil {
			t.Fatal(err)
		}
	}()
	for i := range 5 {
		rec.Eventf(pod(ns, fmt.Sprint("web-", i)), corev1.EventTypeNormal, "Started", "event %d", i)
	}
	start := time.Now()
	b.Shutdown()
	took := time.Since(start)
	if took > 30*time.Second {
		t.Fatalf("Shutdown took %v with a bound of 2s", took)
	}
	// The write in progress when the bound passed ends with its canceled
	// request (the EventSinkImpl's clientset is given the context), and
	// is counted then.
	waitFor(t, 10*time.Second, "the events were not all counted as abandoned", func() bool {
		st := stats(b)
		return st.Abandoned == 5 && st.Written == 0
	})
	t.Logf("Shutdown gave up after %v (bound 2s)", took)
}
