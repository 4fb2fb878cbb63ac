package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// edgeObjects are the objects of guarantee 21 in ns: a pod with no name,
// pods whose names make invalid event names ('/', '%', upper case), and a
// cluster-scoped Node (its events go to "default", where the tests tell
// the two pipelines apart by their source or reporting controller).
func edgeObjects(ns string) map[string]runtime.Object {
	p := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	}
	return map[string]runtime.Object{
		"NoName":  p(""),
		"Slash":   p("a/b"),
		"Percent": p("50%"),
		"Upper":   p("Web"),
		"Node":    &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-edge", UID: "uid-node-edge"}},
	}
}

// coreEdges lists what ns and "default" hold from component, with the
// component and the namespace ns blanked.
func coreEdges(t *testing.T, c kubernetes.Interface, ns, component string) []stored {
	var out []stored
	for _, n := range []string{ns, metav1.NamespaceDefault} {
		for _, e := range list(t, c, n) {
			if e.Component == component {
				e.Component = ""
				out = append(out, e)
			}
		}
	}
	sortStored(out)
	return out
}

// TestEdgeCasesCoreV1 is guarantee 21 on core/v1, on the real server:
// through record.NewBroadcaster and k8s.NewBroadcaster, an empty reason,
// an involved object with no name, names with '/', '%' and upper case
// (client-go's GenerateEventName gives those events a UUID; herald a UUID
// derived from the name, so that the repeat patches it), and a Node
// (cluster-scoped: its event goes to "default") leave the same Events.
// Aggregates too: the API server takes client-go's aggregate about "Web"
// (core/v1 does not check an Event's name beyond what a URL path segment
// can hold), as herald's. The one difference is deliberate: client-go's
// aggregate about "a/b" is named "a/b.<hex>" (events_cache.go does not
// call GenerateEventName) and refused by the server; herald's gets a valid
// name and is stored.
func TestEdgeCasesCoreV1(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	kns, hns := s.Namespace(t), s.Namespace(t)
	kb := record.NewBroadcaster()
	kb.StartRecordingToSink(sinkFor(c))
	hb := k8s.NewBroadcaster(quiet)
	hb.StartRecordingToSink(sinkFor(c))
	play := func(b record.EventBroadcaster, ns, component string) {
		rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component})
		objs := edgeObjects(ns)
		rec.Event(pod(ns, "web"), corev1.EventTypeNormal, "", "an empty reason")
		for _, reason := range []string{"NoName", "Slash", "Percent", "Upper", "Node"} {
			rec.Eventf(objs[reason], corev1.EventTypeWarning, reason, "about %s", reason)
		}
		rec.Eventf(objs["Slash"], corev1.EventTypeWarning, "Slash", "about %s", "Slash") // a Patch of the generated name
		for _, o := range []string{"Upper", "Slash"} {
			for i := range events.DefaultMaxEvents {
				rec.Eventf(objs[o], corev1.EventTypeNormal, "Agg", "message %d", i)
			}
		}
		rec.Event(pod(ns, "done"), corev1.EventTypeNormal, "Done", "done")
	}
	play(kb, kns, "edge-k")
	play(hb, hns, "edge-h")
	waitStored(t, c, kns, "Done", 1) // client-go writes in order, one at a time
	kb.Shutdown()
	shutdown(t, hb)

	k, h := coreEdges(t, c, kns, "edge-k"), coreEdges(t, c, hns, "edge-h")
	aggregate := stored{Kind: "Pod", Name: "a/b", UID: "uid-a/b", APIVersion: "v1", Reason: "Agg", Type: corev1.EventTypeNormal,
		Message: events.AggregatePrefix + fmt.Sprint("message ", events.DefaultMaxEvents-1), Count: 1}
	want := append(append([]stored(nil), k...), aggregate)
	sortStored(want)
	if diff := cmp.Diff(want, h); diff != "" {
		t.Fatalf("herald's events are not client-go's plus its aggregate (-want +herald)\n%s", diff)
	}
	seen := map[string]int32{}
	for _, e := range h {
		seen[e.Reason+"/"+e.Name] = e.Count
	}
	for key, n := range map[string]int32{"/web": 1, "NoName/": 1, "Slash/a/b": 2, "Percent/50%": 1, "Upper/Web": 1, "Node/node-edge": 1} {
		if seen[key] != n {
			t.Errorf("herald: event %q has count %d, want %d (stored %v)", key, seen[key], n, h)
		}
	}
	if st := stats(hb); st.Failed != 0 || st.Dropped != 0 || st.Invalid != 0 {
		t.Errorf("herald: %+v", st)
	}
}

// v1Edges lists the events.k8s.io Events of controller in ns and
// "default", normalized (see v1Normalize) with the reporting controller
// and instance blanked.
func v1Edges(t *testing.T, c kubernetes.Interface, ns, controller string, from, to time.Time) []eventsv1.Event {
	var out []eventsv1.Event
	for _, n := range []string{ns, metav1.NamespaceDefault} {
		for _, e := range v1List(t, c, n, controller) {
			e = v1Normalize(t, e, ns, from, to)
			e.ReportingController, e.ReportingInstance = "", ""
			out = append(out, e)
		}
	}
	return out
}

// TestEdgeCasesEventsV1 is guarantee 21 on events.k8s.io/v1, on the real
// server: through client-go's tools/events and k8s.NewEventBroadcaster, the
// same edge cases as TestEdgeCasesCoreV1 leave the same Events (an empty
// reason is refused by events.k8s.io/v1's validation in both; names that
// make invalid event names get generated ones, the series of "a/b"
// included).
func TestEdgeCasesEventsV1(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	kns, hns := s.Namespace(t), s.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kb := clientevents.NewBroadcaster(v1SinkFor(c))
	hb := k8s.NewEventBroadcaster(v1SinkFor(c), quiet)
	from := time.Now()
	play := func(b clientevents.EventBroadcaster, ns, controller string) {
		if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
			t.Fatal(err)
		}
		rec := b.NewRecorder(scheme.Scheme, controller)
		objs := edgeObjects(ns)
		rec.Eventf(pod(ns, "web"), nil, corev1.EventTypeNormal, "", "Act", "an empty reason")
		for _, reason := range []string{"NoName", "Slash", "Percent", "Upper", "Node"} {
			rec.Eventf(objs[reason], nil, corev1.EventTypeWarning, reason, "Act", "about %s", reason)
		}
		time.Sleep(100 * time.Millisecond) // client-go: a goroutine per event; the series after its first
		rec.Eventf(objs["Slash"], nil, corev1.EventTypeWarning, "Slash", "Act", "about %s", "Slash")
	}
	play(kb, kns, "edge-v1-k")
	play(hb, hns, "edge-v1-h")
	hb.Shutdown()
	to := time.Now()
	h := v1Edges(t, c, hns, "edge-v1-h", from, to)
	// client-go cannot flush: wait until it has stored what herald has.
	var k []eventsv1.Event
	deadline := time.Now().Add(time.Minute)
	for {
		k = v1Edges(t, c, kns, "edge-v1-k", from, to)
		if cmp.Equal(k, h) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	kb.Shutdown()
	if diff := cmp.Diff(k, h); diff != "" {
		t.Fatalf("stored events differ (-client-go +herald)\n%s", diff)
	}
	reasons := map[string]int32{}
	for _, e := range h {
		reasons[e.Reason] = seriesCount(&e)
		t.Logf("stored: %s", describeV1(&e))
	}
	if diff := cmp.Diff(map[string]int32{"NoName": 0, "Slash": 2, "Percent": 0, "Upper": 0, "Node": 0}, reasons); diff != "" {
		t.Errorf("herald stored (-want +got)\n%s", diff)
	}
	st := hb.(*k8s.EventBroadcaster).Stats()
	if st.Failed != 1 {
		t.Errorf("herald: %+v, want the empty reason failed (refused by the server)", st)
	}
}

// captureSink is a logr.LogSink that keeps what is logged above a
// verbosity: errors, and Info below V(maxV).
type captureSink struct {
	mu   *sync.Mutex
	maxV int
	got  *[]string
	kv   []any
}

func newCapture(maxV int) (logr.Logger, func() []string) {
	cs := &captureSink{mu: new(sync.Mutex), maxV: maxV, got: new([]string)}
	return logr.New(cs), func() []string {
		cs.mu.Lock()
		defer cs.mu.Unlock()
		return append([]string(nil), *cs.got...)
	}
}

func (s *captureSink) Init(logr.RuntimeInfo)  {}
func (s *captureSink) Enabled(level int) bool { return true }
func (s *captureSink) Info(level int, msg string, kv ...any) {
	if level < s.maxV {
		s.add(fmt.Sprintf("V(%d) %s %v", level, msg, append(s.kv, kv...)))
	}
}
func (s *captureSink) Error(err error, msg string, kv ...any) {
	s.add(fmt.Sprintf("ERROR %s: %v %v", msg, err, append(s.kv, kv...)))
}
func (s *captureSink) add(line string) {
	s.mu.Lock()
	*s.got = append(*s.got, line)
	s.mu.Unlock()
}
func (s *captureSink) WithValues(kv ...any) logr.LogSink {
	c := *s
	c.kv = append(append([]any(nil), s.kv...), kv...)
	return &c
}
func (s *captureSink) WithName(string) logr.LogSink { return s }

// TestTerminatingNamespaceQuiet is the rest of guarantee 21: a namespace
// being deleted refuses events; through k8s.NewBroadcaster (core/v1) and
// k8s.NewEventBroadcaster (events.k8s.io/v1), with WithContext's logger
// capturing, those rejections are counted (Stats().Failed; Terminating on
// events.k8s.io) and logged at nothing above Debug (klog V(5) and more,
// client-go's level for them), while a rejection of another kind through
// the same broadcaster is reported (so the capture works). client-go's
// pipelines, side by side, store nothing either.
func TestTerminatingNamespaceQuiet(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ns := s.Namespace(t)
	if err := c.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := c.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil || got.Status.Phase != corev1.NamespaceTerminating {
		t.Fatalf("namespace %s: %v; want Terminating", ns, err)
	}
	const n = 3
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	t.Run("core/v1", func(t *testing.T) {
		logger, logged := newCapture(5)
		hb := k8s.NewBroadcaster(k8s.WithContext(klog.NewContext(ctx, logger)))
		hb.StartRecordingToSink(sinkFor(c))
		kb := record.NewBroadcaster(record.WithContext(ctx))
		kb.StartRecordingToSink(sinkFor(c))
		for i := range n {
			for _, b := range []record.EventBroadcaster{kb, hb} {
				b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "terminating"}).
					Eventf(pod(ns, fmt.Sprint("web-", i)), corev1.EventTypeNormal, "Started", "event %d", i)
			}
		}
		if err := hb.(*k8s.Broadcaster).Events().Flush(context.Background()); err != nil && !errors.Is(err, events.ErrLost) {
			t.Fatal(err)
		}
		if got := logged(); len(got) != 0 {
			t.Errorf("herald logged above Debug for a terminating namespace:\n%s", strings.Join(got, "\n"))
		}
		if st := stats(hb); st.Failed != n || st.Written != 0 {
			t.Errorf("herald: %+v, want %d failed", st, n)
		}
		// The control: a namespace that does not exist is a rejection
		// to report.
		hb.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "terminating"}).
			Event(pod("no-such-namespace", "web"), corev1.EventTypeNormal, "Started", "m")
		err := hb.(*k8s.Broadcaster).ShutdownContext(context.Background())
		t.Logf("herald's Shutdown: %v", err)
		if got := logged(); len(got) == 0 {
			t.Error("herald logged nothing for a rejection in a namespace that does not exist: the capture does not work")
		}
		kb.Shutdown()
		if got := list(t, c, ns); len(got) != 0 {
			t.Errorf("stored in a terminating namespace: %v", got)
		}
	})

	t.Run("events.k8s.io/v1", func(t *testing.T) {
		logger, logged := newCapture(5)
		hb := k8s.NewEventBroadcaster(v1SinkFor(c), k8s.WithContext(klog.NewContext(ctx, logger)))
		kb := clientevents.NewBroadcaster(v1SinkFor(c))
		for _, b := range []clientevents.EventBroadcaster{kb, hb} {
			if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
				t.Fatal(err)
			}
			for i := range n {
				b.NewRecorder(scheme.Scheme, "terminating").
					Eventf(pod(ns, fmt.Sprint("web-", i)), nil, corev1.EventTypeNormal, "Started", "Start", "event %d", i)
			}
		}
		heb := hb.(*k8s.EventBroadcaster)
		if err := heb.Events().Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := logged(); len(got) != 0 {
			t.Errorf("herald logged above Debug for a terminating namespace:\n%s", strings.Join(got, "\n"))
		}
		if st := heb.Stats(); st.Terminating != n || st.Failed != n || st.Written != 0 {
			t.Errorf("herald: %+v, want %d terminating, failed", st, n)
		}
		hb.NewRecorder(scheme.Scheme, "terminating").
			Eventf(pod("no-such-namespace", "web"), nil, corev1.EventTypeNormal, "Started", "Start", "m")
		err := heb.ShutdownContext(context.Background())
		t.Logf("herald's Shutdown: %v", err)
		if got := logged(); len(got) == 0 {
			t.Error("herald logged nothing for a rejection in a namespace that does not exist: the capture does not work")
		}
		kb.Shutdown()
		if got := v1List(t, c, ns, ""); len(got) != 0 {
			t.Errorf("stored in a terminating namespace: %v", got)
		}
	})
}
