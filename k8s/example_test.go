package k8s_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
)

// The one-line swap in a controller: k8s.NewBroadcaster where
// record.NewBroadcaster was; the rest is client-go's interface.
func ExampleNewBroadcaster() {
	client := fake.NewClientset() // a real clientset in a controller

	b := k8s.NewBroadcaster() // was: record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "my-controller"})

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "web-0"}}
	rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "restarting container %s", "app")
	rec.Eventf(pod, corev1.EventTypeWarning, "BackOff", "restarting container %s", "app")
	b.Shutdown() // writes both, within k8s.DefaultShutdownTimeout

	l, _ := client.CoreV1().Events("prod").List(context.Background(), metav1.ListOptions{})
	for _, e := range l.Items {
		fmt.Printf("%s %s/%s %s: %s (x%d) from %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name,
			e.Reason, e.Message, e.Count, e.Source.Component)
	}
	// Output:
	// Warning Pod/web-0 BackOff: restarting container app (x2) from my-controller
}

// NewSink lets herald's own events.Broadcaster write to an API server.
func ExampleNewSink() {
	client := fake.NewClientset()
	b := events.NewBroadcaster()
	b.StartRecordingToSink(k8s.NewSink(client.CoreV1()))
	rec := b.NewRecorder(events.Source{Component: "my-controller"})
	rec.Event(events.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "prod", Name: "web-0"},
		events.Normal, "Started", "started")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b.Shutdown(ctx)

	l, _ := client.CoreV1().Events("prod").List(context.Background(), metav1.ListOptions{})
	fmt.Println(len(l.Items), l.Items[0].Reason, l.Items[0].Count)
	// Output:
	// 1 Started 1
}

// The patch of an event that occurred again is client-go's, byte for byte.
func ExamplePatchData() {
	p, _ := k8s.PatchData(events.Patch{
		Count: 3, LastTimestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Message: "restarting",
	})
	fmt.Println(string(p))
	// Output:
	// {"count":3,"lastTimestamp":"2026-01-02T03:04:05Z","message":"restarting"}
}

// A name the API server would refuse becomes a UUID derived from it.
func ExampleValidEventName() {
	fmt.Println(k8s.ValidEventName("web-0.188a3c1e9b4f2d10"))
	fmt.Println(k8s.ValidEventName("system:controller:x.188a3c1e9b4f2d10"))
	// Output:
	// web-0.188a3c1e9b4f2d10
	// 9991d9fb-82e9-570f-b0e3-ae3de4d0412b
}
