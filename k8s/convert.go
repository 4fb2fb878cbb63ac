package k8s

import (
	"maps"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/heraldgo/herald/events"
)

// ToCoreV1 returns e as a core/v1 Event: every field of e, under the same
// name, the timestamps as metav1.Time. The result's Annotations are a copy.
// ToCoreV1 of nil is nil.
func ToCoreV1(e *events.Event) *corev1.Event {
	if e == nil {
		return nil
	}
	o := &e.InvolvedObject
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{
			Name:            e.Name,
			Namespace:       e.Namespace,
			Annotations:     cloneMap(e.Annotations),
			ResourceVersion: e.ResourceVersion,
		},
		InvolvedObject: ToObjectReference(*o),
		Reason:         e.Reason,
		Message:        e.Message,
		Source:         corev1.EventSource{Component: e.Source.Component, Host: e.Source.Host},
		FirstTimestamp: metav1.NewTime(e.FirstTimestamp),
		LastTimestamp:  metav1.NewTime(e.LastTimestamp),
		Count:          e.Count,
		Type:           e.Type,

		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
}

// FromCoreV1 returns the fields of e that an events.Event has: name,
// namespace, annotations (a copy) and resource version of its metadata,
// involved object, reason, message, type, source, first and last
// timestamps, count, reporting controller and instance. The fields herald
// does not model (Action, Related, EventTime, Series and the rest of the
// metadata) are left out. FromCoreV1 of nil is nil.
func FromCoreV1(e *corev1.Event) *events.Event {
	if e == nil {
		return nil
	}
	return &events.Event{
		Name:                e.Name,
		Namespace:           e.Namespace,
		InvolvedObject:      FromObjectReference(e.InvolvedObject),
		Reason:              e.Reason,
		Message:             e.Message,
		Type:                e.Type,
		Source:              events.Source{Component: e.Source.Component, Host: e.Source.Host},
		FirstTimestamp:      e.FirstTimestamp.Time,
		LastTimestamp:       e.LastTimestamp.Time,
		Count:               e.Count,
		Annotations:         cloneMap(e.Annotations),
		ResourceVersion:     e.ResourceVersion,
		ReportingController: e.ReportingController,
		ReportingInstance:   e.ReportingInstance,
	}
}

// ToObjectReference returns r as a core/v1 ObjectReference.
func ToObjectReference(r events.ObjectReference) corev1.ObjectReference {
	return corev1.ObjectReference{
		Kind:            r.Kind,
		Namespace:       r.Namespace,
		Name:            r.Name,
		UID:             types.UID(r.UID),
		APIVersion:      r.APIVersion,
		ResourceVersion: r.ResourceVersion,
		FieldPath:       r.FieldPath,
	}
}

// FromObjectReference returns r as herald's ObjectReference.
func FromObjectReference(r corev1.ObjectReference) events.ObjectReference {
	return events.ObjectReference{
		Kind:            r.Kind,
		Namespace:       r.Namespace,
		Name:            r.Name,
		UID:             string(r.UID),
		APIVersion:      r.APIVersion,
		ResourceVersion: r.ResourceVersion,
		FieldPath:       r.FieldPath,
	}
}

func cloneMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	return maps.Clone(m)
}

// eventNameSpace is the UUID namespace of the names given to events whose
// own name the API server would refuse (see ValidEventName).
var eventNameSpace = uuid.MustParse("5d1c5b44-7a43-4c1e-9a43-68657261c64b")

// ValidEventName returns name if the API server accepts it as an Event name
// (a DNS subdomain: at most 253 lowercase alphanumerics, '-' and '.'), and
// otherwise a UUID derived from it. herald names an event
// "<object name>.<hex nanos>", which is invalid when the object's name is
// (a ClusterRole "system:controller:x", say, or a very long name);
// client-go gives such an event a random UUID instead. herald's is derived
// from the invalid name, the same every time, so that the event's later
// Patches, which carry the name it was recorded under, find it. The sinks
// of this package (NewSink, and StartRecordingToSink's) apply it to every
// event they write, and StartEventWatcher's handlers see the name it
// returns.
func ValidEventName(name string) string {
	if len(validation.NameIsDNSSubdomain(name, false)) == 0 {
		return name
	}
	return uuid.NewSHA1(eventNameSpace, []byte(name)).String()
}
