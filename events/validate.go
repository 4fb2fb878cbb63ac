package events

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is wrapped by the errors of [Event.Validate]: the event is one
// no Kubernetes API server would store, whatever its name. A [Recorder] does
// not record such an event; it counts it in [Stats].Invalid and reports it.
var ErrInvalid = errors.New("events: invalid event")

// Limits of what an API server stores, from Kubernetes' validation of
// core/v1 Events and of object metadata.
const (
	// maxNamespaceLen is the length limit of a DNS-1123 label, which a
	// namespace is.
	maxNamespaceLen = 63
	// maxAnnotationsSize is the limit of the annotations' total size, keys
	// and values (256 KiB).
	maxAnnotationsSize = 256 << 10
	// maxQualifiedNameLen is the limit of an annotation key's name part,
	// and maxPrefixLen of its prefix (a DNS-1123 subdomain).
	maxQualifiedNameLen = 63
	maxPrefixLen        = 253
)

// Validate reports whether e could be stored as a core/v1 Event by a
// Kubernetes API server, with an error wrapping [ErrInvalid] that says why
// not. It rejects only what no API server stores and can be checked without
// one: a Type other than [Normal] or [Warning]; a Namespace that is not a
// DNS-1123 label (lower-case letters, digits and '-', at most 63), or the
// object's when the object has one, or not the object's ("default" for an
// object with none, a cluster-scoped one); an annotation key that is not a
// qualified name ("prefix/name"), or annotations that take more than 256
// KiB together.
//
// What client-go's recorder gets stored, Validate lets through: an empty
// Reason, an object with no Name, an object Name with characters an event
// name cannot hold ('/', ':', upper case, more than 253 bytes), and so an
// event Name made of it. A sink that writes to an API server gives such an
// event a valid generated name, as client-go does (the k8s module's sinks
// do, with ValidEventName). A Name of "" is allowed too: a Recorder's
// events are named when a sink needs the name.
//
// It does not check lengths that only the events.k8s.io API limits (a
// reason of 128 bytes, a note of 1024): the core/v1 API stores longer
// ones, and a Recorder does not drop them.
func (e *Event) Validate() error {
	if err := validate(&e.InvolvedObject, e.Type, e.Annotations); err != nil {
		return err
	}
	if e.Namespace != e.InvolvedObject.Namespace &&
		(e.InvolvedObject.Namespace != "" || e.Namespace != defaultNamespace) {
		return fmt.Errorf("%w: namespace %q is not the object's (%q, or %q for an object with none)",
			ErrInvalid, e.Namespace, e.InvolvedObject.Namespace, defaultNamespace)
	}
	return nil
}

// validate checks what a Recorder is given (see Event.Validate). It costs
// a few nanoseconds per event: the common case is a namespace of a few
// valid bytes and no annotations.
func validate(o *ObjectReference, eventtype string, annotations map[string]string) error {
	switch {
	case !validType(eventtype):
		return fmt.Errorf("%w: type %q is neither Normal nor Warning", ErrInvalid, eventtype)
	case o.Namespace != "" && !isDNSLabel(o.Namespace):
		return fmt.Errorf("%w: namespace %q is not a DNS-1123 label (at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit)",
			ErrInvalid, o.Namespace)
	}
	if len(annotations) > 0 {
		return validateAnnotations(annotations)
	}
	return nil
}

// isDNSLabel reports whether s matches [a-z0-9]([-a-z0-9]*[a-z0-9])? and is
// at most 63 bytes long.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > maxNamespaceLen || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// isDNSSubdomain reports whether s is DNS-1123 labels joined by dots, at
// most 253 bytes long.
func isDNSSubdomain(s string) bool {
	if len(s) == 0 || len(s) > maxPrefixLen {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if !isDNSLabel(label) {
			return false
		}
	}
	return true
}

// validateAnnotations checks the keys, as the API server does (lower-cased,
// as qualified names), and the total size.
func validateAnnotations(m map[string]string) error {
	size := 0
	for k, v := range m {
		size += len(k) + len(v)
		if !isQualifiedName(strings.ToLower(k)) {
			return fmt.Errorf("%w: annotation key %q is not a qualified name ([prefix/]name: a name of at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, and an optional DNS subdomain prefix)",
				ErrInvalid, k)
		}
	}
	if size > maxAnnotationsSize {
		return fmt.Errorf("%w: annotations take %d bytes, more than the %d an API server stores", ErrInvalid, size, maxAnnotationsSize)
	}
	return nil
}

// isQualifiedName reports whether s is "name" or "prefix/name", name being
// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] of at most 63 bytes and prefix
// a DNS-1123 subdomain.
func isQualifiedName(s string) bool {
	name := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		if !isDNSSubdomain(s[:i]) {
			return false
		}
		name = s[i+1:]
	}
	if len(name) == 0 || len(name) > maxQualifiedNameLen || !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
