package events

import (
	"maps"
	"strconv"
	"time"
)

// The only valid values of [Event.Type]. A [Recorder] does not record an
// event of any other type; it reports it to the logger instead.
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// defaultNamespace is the namespace of an event about an object that has none.
const defaultNamespace = "default"

// ObjectReference names the object an event is about. Its fields mean what
// they mean in Kubernetes' core/v1 ObjectReference; herald only compares them.
type ObjectReference struct {
	Kind            string
	Namespace       string
	Name            string
	UID             string
	APIVersion      string
	ResourceVersion string
	FieldPath       string
}

// Source is the component, and the host it runs on, that reports an event.
type Source struct {
	Component string
	Host      string
}

// Event is one occurrence, or a counted series of occurrences, of something
// that happened to an object. It mirrors Kubernetes' core/v1 Event.
//
// A [Recorder] builds each Event once and never reads or changes it after
// publishing it; every watcher and sink gets its own copy (see
// [Event.Clone]): when a single watcher or sink is started, the recorded
// Event itself, which nothing else ever sees.
type Event struct {
	// Name is "<object name>.<hex unix nanos>" of the first occurrence.
	Name string
	// Namespace is the object's namespace, or "default".
	Namespace string

	InvolvedObject ObjectReference
	// Reason is short, UpperCamelCase and machine-readable ("BackOff").
	Reason string
	// Message is for people.
	Message string
	// Type is [Normal] or [Warning].
	Type   string
	Source Source

	// FirstTimestamp is when the first occurrence was recorded.
	FirstTimestamp time.Time
	// LastTimestamp is when the latest occurrence was recorded.
	LastTimestamp time.Time
	// Count is the number of occurrences, 1 for a new event.
	Count int32

	Annotations     map[string]string
	ResourceVersion string

	ReportingController string
	ReportingInstance   string
}

// Clone returns a deep copy of e: the copy's Annotations map is its own.
// Clone of nil is nil.
func (e *Event) Clone() *Event {
	if e == nil {
		return nil
	}
	c := *e
	c.Annotations = cloneAnnotations(e.Annotations)
	return &c
}

// cloneAnnotations copies m, keeping nil and empty apart.
func cloneAnnotations(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

// eventName returns "<name>.<hex nanos>" with a single allocation
// (fmt.Sprintf needs three on this path).
func eventName(name string, nanos int64) string {
	var buf [128]byte
	b := append(buf[:0], name...)
	b = append(b, '.')
	b = strconv.AppendInt(b, nanos, 16)
	return string(b)
}

// validType reports whether t is Normal or Warning.
func validType(t string) bool { return t == Normal || t == Warning }
