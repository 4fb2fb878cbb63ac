package example_test

import (
	"testing"

	"github.com/go-logr/logr"
	"go.uber.org/goleak"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// controller-runtime v0.25 starts an events.k8s.io broadcaster next to the
// one given in Options.EventBroadcaster and never stops it in that case
// (its documentation of the option warns of the leak): its goroutines are
// not herald's.
//
// The manager's recorder providers that recorded nothing start their
// broadcaster only as the manager stops, on a goroutine that may outlive
// Start and run after Shutdown; a broadcaster then logs "Unable start
// event watcher", client-go's as herald's. klog is silenced once, before
// anything logs (klog.SetLogger is not safe while others log).
func TestMain(m *testing.M) {
	klog.SetLogger(logr.Discard())
	apiservertest.Main(m,
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/watch.(*Broadcaster).loop"),
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/events.(*eventBroadcasterImpl).startEventWatcher.func1"),
		goleak.IgnoreTopFunction("k8s.io/client-go/tools/events.(*eventBroadcasterImpl).startRecordingEvents.func2"),
		// Its two periodic goroutines (StartRecordingToSinkWithContext).
		goleak.IgnoreTopFunction("k8s.io/apimachinery/pkg/util/wait.BackoffUntilWithContext"),
	)
}
