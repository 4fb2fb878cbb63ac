package k8s_test

import (
	"context"
	"errors"
	"net/url"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
)

func newEvent(name string) *events.Event {
	e := fullEvent()
	e.Name, e.ResourceVersion, e.Count = name, "", 1
	e.LastTimestamp = e.FirstTimestamp
	return e
}

// TestSinkCreateAndPatch: Create stores the event in its namespace; Patch
// sends client-go's strategic merge patch, which the store applies.
func TestSinkCreateAndPatch(t *testing.T) {
	c := fake.NewClientset()
	s := k8s.NewSink(c.CoreV1())
	ctx := context.Background()
	e := newEvent("web-0.17f0a1b2c3d4e5f6")
	out, err := s.Create(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if out.Name != e.Name || out.Namespace != "prod" || out.Count != 1 || out.Reason != "BackOff" {
		t.Fatalf("Create returned %+v", out)
	}
	p := events.Patch{Count: 2, LastTimestamp: t0.Add(time.Hour), Message: "again"}
	old := out.Clone()
	old.Count, old.LastTimestamp, old.Message = p.Count, p.LastTimestamp, p.Message
	if _, err := s.Patch(ctx, old, p); err != nil {
		t.Fatal(err)
	}
	got, err := c.CoreV1().Events("prod").Get(ctx, e.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 2 || got.Message != "again" || !got.LastTimestamp.Equal(&metav1.Time{Time: p.LastTimestamp.Truncate(time.Second)}) {
		t.Fatalf("after Patch: count %d message %q last %v", got.Count, got.Message, got.LastTimestamp)
	}
	var patch clienttesting.PatchAction
	for _, a := range c.Actions() {
		if pa, ok := a.(clienttesting.PatchAction); ok {
			patch = pa
		}
	}
	want, _ := k8s.PatchData(p)
	if patch == nil || patch.GetPatchType() != types.StrategicMergePatchType || string(patch.GetPatch()) != string(want) {
		t.Fatalf("patch sent: %v", patch)
	}
}

// TestSinkInvalidName: an event whose name the server would refuse is
// stored under ValidEventName of it, and its Patch finds it there.
func TestSinkInvalidName(t *testing.T) {
	c := fake.NewClientset()
	s := k8s.NewSink(c.CoreV1())
	ctx := context.Background()
	e := newEvent("system:controller:x.17f0a1b2c3d4e5f6")
	out, err := s.Create(ctx, e)
	if err != nil {
		t.Fatal(err)
	}
	if out.Name != k8s.ValidEventName(e.Name) || out.Name == e.Name {
		t.Fatalf("stored as %q", out.Name)
	}
	old := e.Clone() // the correlator still has the recorded name
	old.Count = 2
	if _, err := s.Patch(ctx, old, events.Patch{Count: 2, LastTimestamp: t0}); err != nil {
		t.Fatalf("Patch under the recorded name: %v", err)
	}
}

var (
	podGR = schema.GroupResource{Resource: "events"}
	fail  = map[string]error{
		"not found":         apierrors.NewNotFound(podGR, "x"),
		"already exists":    apierrors.NewAlreadyExists(podGR, "x"),
		"invalid":           apierrors.NewInvalid(schema.GroupKind{Kind: "Event"}, "x", nil),
		"forbidden":         apierrors.NewForbidden(podGR, "x", errors.New("no")),
		"internal":          apierrors.NewInternalError(errors.New("boom")),
		"too many requests": apierrors.NewTooManyRequests("slow down", 1),
		"unavailable":       apierrors.NewServiceUnavailable("starting"),
		"server timeout":    apierrors.NewServerTimeout(podGR, "create", 1),
		"gateway timeout":   apierrors.NewTimeoutError("timeout", 1),
		"terminating": &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 403, Reason: metav1.StatusReasonForbidden,
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}},
		}},
		"request construction": &rest.RequestConstructionError{Err: errors.New("bad body")},
		"transport":            &url.Error{Op: "Post", URL: "https://x", Err: syscall.ECONNREFUSED},
		"unexpected object":    &apierrors.UnexpectedObjectError{},
	}
)

// TestSinkErrors: each client error maps to the herald sink error the
// broadcaster acts on, and stays reachable with errors.As.
func TestSinkErrors(t *testing.T) {
	for _, tc := range []struct {
		fail        string
		create, pat error // nil: not a sentinel, retried
	}{
		{"not found", events.ErrRejected, events.ErrNotFound},
		{"already exists", events.ErrAlreadyExists, events.ErrAlreadyExists},
		{"invalid", events.ErrRejected, events.ErrRejected},
		{"forbidden", events.ErrRejected, events.ErrRejected},
		{"internal", events.ErrRejected, events.ErrRejected},
		{"terminating", events.ErrRejected, events.ErrRejected},
		{"request construction", events.ErrRejected, events.ErrRejected},
		{"too many requests", nil, nil},
		{"unavailable", nil, nil},
		{"server timeout", nil, nil},
		{"gateway timeout", nil, nil},
		{"transport", nil, nil},
		{"unexpected object", nil, nil},
	} {
		t.Run(tc.fail, func(t *testing.T) {
			c := fake.NewClientset()
			c.PrependReactor("*", "events", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, fail[tc.fail]
			})
			s := k8s.NewSink(c.CoreV1())
			_, cerr := s.Create(context.Background(), newEvent("a.1"))
			_, perr := s.Patch(context.Background(), newEvent("a.1"), events.Patch{Count: 2, LastTimestamp: t0})
			for _, got := range []struct {
				op        string
				err, want error
			}{{"Create", cerr, tc.create}, {"Patch", perr, tc.pat}} {
				if got.err == nil {
					t.Fatalf("%s: nil error", got.op)
				}
				if !errors.Is(got.err, fail[tc.fail]) {
					t.Errorf("%s: %v does not wrap the client's error", got.op, got.err)
				}
				for _, sentinel := range []error{events.ErrNotFound, events.ErrAlreadyExists, events.ErrRejected} {
					if is := errors.Is(got.err, sentinel); is != (sentinel == got.want) {
						t.Errorf("%s: errors.Is(%v, %v) = %v", got.op, got.err, sentinel, is)
					}
				}
			}
		})
	}
}

func TestNewSinkNilPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || r.(string)[:5] != "k8s: " {
			t.Fatalf("recovered %v, want a k8s: panic", r)
		}
	}()
	k8s.NewSink(nil)
}
