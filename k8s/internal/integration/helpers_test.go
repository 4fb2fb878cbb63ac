package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
)

// quiet keeps herald's reports out of the test output; tests read Stats.
var quiet = k8s.WithEventsOptions(events.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))

// stored is what the comparison looks at in an Event: everything but its
// name, namespace, timestamps and metadata. The involved object's
// namespace is left out too: each pipeline writes into its own.
type stored struct {
	Kind, Name, UID, APIVersion, FieldPath string
	Reason, Type, Message                  string
	Count                                  int32
	Component, Host                        string
}

func (s stored) String() string {
	return fmt.Sprintf("%s/%s %s %s %q x%d by %s@%s", s.Kind, s.Name, s.Type, s.Reason, s.Message, s.Count, s.Component, s.Host)
}

func toStored(e *corev1.Event) stored {
	o := e.InvolvedObject
	return stored{
		Kind: o.Kind, Name: o.Name, UID: string(o.UID), APIVersion: o.APIVersion, FieldPath: o.FieldPath,
		Reason: e.Reason, Type: e.Type, Message: e.Message, Count: e.Count,
		Component: e.Source.Component, Host: e.Source.Host,
	}
}

// list returns the events stored in ns, sorted.
func list(t testing.TB, c kubernetes.Interface, ns string) []stored {
	t.Helper()
	l, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]stored, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, toStored(&l.Items[i]))
	}
	slices.SortFunc(out, func(a, b stored) int { return strings.Compare(a.String(), b.String()) })
	return out
}

// shutdownFailed shuts b down and checks that Shutdown reports failed
// events (rejected by the server) as lost: an error wrapping
// events.ErrLost whose Failed count is want.
func shutdownFailed(t testing.TB, b record.EventBroadcaster, want uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := b.(*k8s.Broadcaster).ShutdownContext(ctx)
	var lost *events.LostError
	if !errors.As(err, &lost) || lost.Failed != want {
		t.Fatalf("ShutdownContext: %v, want a LostError with %d failed", err, want)
	}
}

func shutdown(t testing.TB, b record.EventBroadcaster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.(*k8s.Broadcaster).ShutdownContext(ctx); err != nil {
		t.Fatalf("ShutdownContext: %v", err)
	}
}

func sinkFor(c kubernetes.Interface) record.EventSink {
	return &typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")}
}

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
}

// countingSink counts the calls made to a record.EventSink, and closes done
// when it has created an event with reason doneReason.
type countingSink struct {
	record.EventSink
	mu         sync.Mutex
	creates    int
	patches    int
	doneReason string
	done       chan struct{}
}

func (s *countingSink) Create(e *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(e)
	s.mu.Lock()
	s.creates++
	if err == nil && s.done != nil && e.Reason == s.doneReason {
		close(s.done)
		s.done = nil
	}
	s.mu.Unlock()
	return out, err
}

func (s *countingSink) Patch(e *corev1.Event, data []byte) (*corev1.Event, error) {
	s.mu.Lock()
	s.patches++
	s.mu.Unlock()
	return s.EventSink.Patch(e, data)
}

func (s *countingSink) calls() (creates, patches int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.creates, s.patches
}

// waitFor polls cond until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func sortStored(s []stored) {
	slices.SortFunc(s, func(a, b stored) int { return strings.Compare(a.String(), b.String()) })
}
