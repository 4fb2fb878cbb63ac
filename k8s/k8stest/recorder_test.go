package k8stest_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/k8s/k8stest"
)

// Both of client-go's recorder interfaces, and what controller-runtime's
// recorder.EventRecorder is made of (events.EventRecorder and
// AnnotatedEventRecorder).
var (
	_ record.EventRecorder                = (&k8stest.Recorder{}).CoreV1()
	_ record.EventRecorderLogger          = (&k8stest.Recorder{}).CoreV1()
	_ clientevents.EventRecorder          = (&k8stest.Recorder{}).EventsV1()
	_ clientevents.EventRecorderLogger    = (&k8stest.Recorder{}).EventsV1()
	_ clientevents.AnnotatedEventRecorder = (&k8stest.Recorder{}).EventsV1()
)

func pod() *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "7"}}
}

var podRef = corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "7"}

// TestNeverBlocks: 8 goroutines record 20,000 events each, through both
// views, and none waits for a reader (client-go's FakeRecorder blocks once
// its channel's buffer is full).
func TestNeverBlocks(t *testing.T) {
	var r k8stest.Recorder // the zero value works
	p := pod()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			core, v1 := r.CoreV1(), r.EventsV1()
			for i := range 10000 {
				core.Eventf(p, corev1.EventTypeNormal, "R", "%d/%d", g, i)
				v1.Eventf(p, nil, corev1.EventTypeNormal, "R", "A", "%d/%d", g, i)
			}
		})
	}
	wg.Wait()
	if n := r.Len(); n != 160000 {
		t.Fatalf("Len %d, want 160000", n)
	}
	var core, v1 int
	for _, e := range r.Events() {
		switch e.API {
		case k8stest.CoreV1:
			core++
		case k8stest.EventsV1:
			v1++
		}
	}
	if core != 80000 || v1 != 80000 {
		t.Fatalf("%d core/v1 and %d events.k8s.io/v1 events, want 80000 each", core, v1)
	}
}

// TestRecords: each method of both views records one Event with what it
// was given, the object's reference resolved as client-go resolves it.
func TestRecords(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u2"}}
	nodeRef := &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1", UID: "u2"}
	ann := map[string]string{"k": "v"}
	for _, tc := range []struct {
		name   string
		record func(r *k8stest.Recorder)
		want   k8stest.Event
	}{
		{"CoreV1 Event", func(r *k8stest.Recorder) {
			r.CoreV1().Event(pod(), corev1.EventTypeWarning, "BackOff", "100% %d") // not formatted, as client-go
		}, k8stest.Event{API: k8stest.CoreV1, Regarding: podRef, Type: "Warning", Reason: "BackOff", Message: "100% %d"}},
		{"CoreV1 Eventf", func(r *k8stest.Recorder) {
			r.CoreV1().Named("ctl").Eventf(pod(), corev1.EventTypeNormal, "Pulled", "image %s", "nginx")
		}, k8stest.Event{API: k8stest.CoreV1, Regarding: podRef, Type: "Normal", Reason: "Pulled", Message: "image nginx", Source: "ctl"}},
		{"CoreV1 AnnotatedEventf", func(r *k8stest.Recorder) {
			r.CoreV1().AnnotatedEventf(pod(), ann, corev1.EventTypeNormal, "R", "n=%d", 1)
		}, k8stest.Event{API: k8stest.CoreV1, Regarding: podRef, Type: "Normal", Reason: "R", Message: "n=1", Annotations: ann}},
		{"CoreV1 WithLogger", func(r *k8stest.Recorder) {
			r.CoreV1().WithLogger(klog.Background()).Eventf(pod(), corev1.EventTypeNormal, "R", "m")
		}, k8stest.Event{API: k8stest.CoreV1, Regarding: podRef, Type: "Normal", Reason: "R", Message: "m"}},
		{"EventsV1 Eventf", func(r *k8stest.Recorder) {
			r.EventsV1().Named("sched").Eventf(pod(), node, corev1.EventTypeWarning, "FailedScheduling", "Scheduling", "%d nodes", 0)
		}, k8stest.Event{API: k8stest.EventsV1, Regarding: podRef, RelatedRef: nodeRef, Type: "Warning", Reason: "FailedScheduling",
			Action: "Scheduling", Message: "0 nodes", Source: "sched"}},
		{"EventsV1 AnnotatedEventf", func(r *k8stest.Recorder) {
			r.EventsV1().AnnotatedEventf(pod(), nil, ann, corev1.EventTypeNormal, "R", "A", "n=%d", 2)
		}, k8stest.Event{API: k8stest.EventsV1, Regarding: podRef, Type: "Normal", Reason: "R", Action: "A", Message: "n=2", Annotations: ann}},
		{"EventsV1 WithLogger", func(r *k8stest.Recorder) {
			r.EventsV1().WithLogger(klog.Background()).Eventf(pod(), nil, corev1.EventTypeNormal, "R", "A", "m")
		}, k8stest.Event{API: k8stest.EventsV1, Regarding: podRef, Type: "Normal", Reason: "R", Action: "A", Message: "m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var r k8stest.Recorder
			before := time.Now()
			tc.record(&r)
			got := r.Events()
			if len(got) != 1 {
				t.Fatalf("%d events, want 1", len(got))
			}
			if diff := cmp.Diff(tc.want, got[0], cmpopts.IgnoreFields(k8stest.Event{}, "Object", "Related", "Time")); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
			if got[0].Time.Before(before) {
				t.Errorf("Time %v, before the call (%v)", got[0].Time, before)
			}
			if p, ok := got[0].Object.(*corev1.Pod); !ok || p.Name != "web" {
				t.Errorf("Object %#v", got[0].Object)
			}
		})
	}
}

// TestCopies: the recorder keeps copies of the object and the annotations,
// taken when the event was recorded, and Events returns a copy of its
// slice.
func TestCopies(t *testing.T) {
	var r k8stest.Recorder
	p := pod()
	ann := map[string]string{"k": "v"}
	r.EventsV1().AnnotatedEventf(p, p, ann, corev1.EventTypeNormal, "R", "A", "m")
	p.Name, ann["k"] = "changed", "changed"
	got := r.Events()
	e := got[0]
	if e.Object.(*corev1.Pod).Name != "web" || e.Related.(*corev1.Pod).Name != "web" || e.Annotations["k"] != "v" {
		t.Errorf("the event changed with its caller's values: %+v", e)
	}
	got[0].Reason = "mine"
	if r.Events()[0].Reason != "R" {
		t.Error("Events returned the recorder's own slice")
	}
}

// notInScheme is an object client-go's scheme does not know.
type notInScheme struct{ corev1.Pod }

func (o *notInScheme) DeepCopyObject() runtime.Object { c := *o; return &c }

// TestUnresolved: an object whose reference cannot be resolved (client-go
// would log it and record nothing) is recorded with RefErr, so that a test
// sees what its controller did; a nil or typed-nil object too, never a
// panic.
func TestUnresolved(t *testing.T) {
	var r k8stest.Recorder
	r.CoreV1().Eventf(&notInScheme{}, corev1.EventTypeNormal, "R", "m")
	r.EventsV1().Eventf(nil, nil, corev1.EventTypeNormal, "R", "A", "m")
	r.CoreV1().Event((*corev1.Pod)(nil), corev1.EventTypeNormal, "R", "m")
	got := r.Events()
	if len(got) != 3 {
		t.Fatalf("%d events, want 3", len(got))
	}
	for i, e := range got {
		if e.RefErr == nil || e.Regarding != (corev1.ObjectReference{}) {
			t.Errorf("event %d: RefErr %v, Regarding %+v", i, e.RefErr, e.Regarding)
		}
	}
}

// TestSchemeField: Scheme resolves references instead of client-go's.
func TestSchemeField(t *testing.T) {
	r := k8stest.Recorder{Scheme: runtime.NewScheme()} // knows nothing
	r.CoreV1().Eventf(pod(), corev1.EventTypeNormal, "R", "m")
	if e := r.Events()[0]; e.RefErr == nil {
		t.Errorf("an empty scheme resolved %+v", e.Regarding)
	}
}

// TestWait: Wait returns once n events are recorded, from other
// goroutines, and with ctx.Err() and the events so far when ctx ends
// first.
func TestWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var r k8stest.Recorder
		go func() {
			for i := range 3 {
				time.Sleep(time.Second)
				r.EventsV1().Eventf(pod(), nil, corev1.EventTypeNormal, "R", "A", "%d", i)
			}
		}()
		got, err := r.Wait(context.Background(), 2)
		if err != nil || len(got) != 2 {
			t.Fatalf("Wait(2): %d events, %v", len(got), err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
		defer cancel()
		got, err = r.Wait(ctx, 5)
		if !errors.Is(err, context.DeadlineExceeded) || len(got) != 3 {
			t.Fatalf("Wait(5): %d events, %v; want 3 and the deadline", len(got), err)
		}
		if got, err := r.Wait(context.Background(), 0); err != nil || len(got) != 3 {
			t.Fatalf("Wait(0): %d events, %v", len(got), err)
		}
	})
}

// TestResetAndString: Reset forgets; String is record.FakeRecorder's line.
func TestResetAndString(t *testing.T) {
	var r k8stest.Recorder
	r.CoreV1().Eventf(pod(), corev1.EventTypeWarning, "BackOff", "restarting %s", "c")
	if s := r.Events()[0].String(); s != "Warning BackOff restarting c" {
		t.Errorf("String %q", s)
	}
	r.Reset()
	if r.Len() != 0 || len(r.Events()) != 0 {
		t.Errorf("after Reset: Len %d", r.Len())
	}
}
