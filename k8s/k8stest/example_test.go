package k8stest_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientevents "k8s.io/client-go/tools/events"

	"github.com/heraldgo/herald/k8s/k8stest"
)

// reconcile stands for the code under test: it records through a
// tools/events recorder (as controller-runtime's mgr.GetEventRecorder).
func reconcile(rec clientevents.EventRecorder, p *corev1.Pod) {
	rec.Eventf(p, nil, corev1.EventTypeWarning, "BackOff", "Restart", "restarting %s", p.Name)
}

func Example() {
	var rec k8stest.Recorder
	reconcile(rec.EventsV1(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}})
	for _, e := range rec.Events() {
		fmt.Println(e.API, e.Regarding.Kind, e.Regarding.Name, e.Action, e)
	}
	// Output:
	// events.k8s.io/v1 Pod web Restart Warning BackOff restarting web
}
