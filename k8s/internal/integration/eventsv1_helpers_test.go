package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientevents "k8s.io/client-go/tools/events"

	"github.com/heraldgo/herald/k8s"
)

// v1SinkFor is client-go's own events.k8s.io/v1 sink on c.
func v1SinkFor(c kubernetes.Interface) clientevents.EventSink {
	return &clientevents.EventSinkImpl{Interface: c.EventsV1()}
}

// v1List returns the events.k8s.io/v1 Events stored in ns whose
// reportingController is controller ("" for every one), sorted by
// regarding name, reason, action, type and note.
func v1List(t testing.TB, c kubernetes.Interface, ns, controller string) []eventsv1.Event {
	t.Helper()
	l, err := c.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range l.Items {
		if controller == "" || e.ReportingController == controller {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b eventsv1.Event) int { return strings.Compare(v1SortKey(&a), v1SortKey(&b)) })
	return out
}

func v1SortKey(e *eventsv1.Event) string {
	return strings.Join([]string{e.Regarding.Kind, e.Regarding.Name, e.Reason, e.Action, e.Type, e.Note}, "\x00")
}

// seriesCount is e's series.count, 0 for a singleton.
func seriesCount(e *eventsv1.Event) int32 {
	if e.Series == nil {
		return 0
	}
	return e.Series.Count
}

// v1Normalize checks what differs by nature between two namespaces and two
// runs (name, times, server metadata) and returns e without it, so that
// what is left can be compared field by field: the namespace ns (of the
// event, and of its regarding and related objects when they are in it)
// becomes "NS", the name becomes "<regarding name>.<hex>" when the name has
// that form and "<generated>" when it is a valid name of another form
// (client-go's UUID), eventTime and series.lastObservedTime become the
// zero time when they are within [from, to], and the server's metadata
// (uid, resourceVersion, creationTimestamp, managedFields) is cleared.
func v1Normalize(t testing.TB, e eventsv1.Event, ns string, from, to time.Time) eventsv1.Event {
	t.Helper()
	e = *e.DeepCopy()
	if errs := validation.NameIsDNSSubdomain(e.Name, false); len(errs) > 0 {
		t.Errorf("event %q: invalid name: %v", e.Name, errs)
	}
	prefix := e.Regarding.Name + "."
	if rest, ok := strings.CutPrefix(e.Name, prefix); ok && isHex(rest) {
		e.Name = prefix + "<hex>"
	} else {
		e.Name = "<generated>"
	}
	inWindow := func(what string, tm time.Time) bool {
		if tm.Before(from.Truncate(time.Microsecond)) || tm.After(to) {
			t.Errorf("event %s: %s %v is not within the run [%v, %v]", e.Name, what, tm, from, to)
			return false
		}
		return true
	}
	if inWindow("eventTime", e.EventTime.Time) {
		e.EventTime = metav1.MicroTime{}
	}
	if e.Series != nil {
		if e.Series.LastObservedTime.Before(&metav1.MicroTime{Time: e.EventTime.Time}) {
			t.Errorf("event %s: series.lastObservedTime before eventTime", e.Name)
		}
		if inWindow("series.lastObservedTime", e.Series.LastObservedTime.Time) {
			e.Series.LastObservedTime = metav1.MicroTime{}
		}
	}
	fix := func(s *string) {
		if *s == ns {
			*s = "NS"
		}
	}
	fix(&e.Namespace)
	fix(&e.Regarding.Namespace)
	if e.Related != nil {
		fix(&e.Related.Namespace)
	}
	e.UID, e.ResourceVersion, e.CreationTimestamp, e.ManagedFields, e.Generation = "", "", metav1.Time{}, nil, 0
	// The deprecated core/v1 fields the server fills from the new ones.
	if !e.DeprecatedFirstTimestamp.IsZero() && inWindow("deprecatedFirstTimestamp", e.DeprecatedFirstTimestamp.Time) {
		e.DeprecatedFirstTimestamp = metav1.Time{}
	}
	if !e.DeprecatedLastTimestamp.IsZero() && inWindow("deprecatedLastTimestamp", e.DeprecatedLastTimestamp.Time) {
		e.DeprecatedLastTimestamp = metav1.Time{}
	}
	return e
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// v1Shutdown shuts a herald events.k8s.io broadcaster down within 2
// minutes and fails t if Shutdown reports a loss.
func v1Shutdown(t testing.TB, b clientevents.EventBroadcaster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := b.(*k8s.EventBroadcaster).ShutdownContext(ctx); err != nil {
		t.Fatalf("ShutdownContext: %v", err)
	}
}

// describeV1 is a short form of e for failure messages.
func describeV1(e *eventsv1.Event) string {
	return fmt.Sprintf("%s %s/%s %s %s %s %q series=%d", e.Name, e.Regarding.Kind, e.Regarding.Name, e.Type, e.Reason, e.Action, e.Note, seriesCount(e))
}
