package k8s_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
)

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 891, time.UTC)

func fullEvent() *events.Event {
	return &events.Event{
		Name: "web-0.17f0a1b2c3d4e5f6", Namespace: "prod",
		InvolvedObject: events.ObjectReference{
			Kind: "Pod", Namespace: "prod", Name: "web-0", UID: "uid-1", APIVersion: "v1",
			ResourceVersion: "42", FieldPath: "spec.containers{app}",
		},
		Reason: "BackOff", Message: "restarting", Type: events.Warning,
		Source:         events.Source{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: t0, LastTimestamp: t0.Add(time.Minute), Count: 3,
		Annotations:     map[string]string{"a": "1"},
		ResourceVersion: "7", ReportingController: "kubelet", ReportingInstance: "node-1",
	}
}

func fullV1() *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "web-0.17f0a1b2c3d4e5f6", Namespace: "prod", ResourceVersion: "7", Annotations: map[string]string{"a": "1"}},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", Namespace: "prod", Name: "web-0", UID: "uid-1", APIVersion: "v1",
			ResourceVersion: "42", FieldPath: "spec.containers{app}",
		},
		Reason: "BackOff", Message: "restarting", Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-1"},
		FirstTimestamp: metav1.NewTime(t0), LastTimestamp: metav1.NewTime(t0.Add(time.Minute)), Count: 3,
		ReportingController: "kubelet", ReportingInstance: "node-1",
	}
}

// TestToCoreV1: every field of herald's Event lands in its core/v1 field.
func TestToCoreV1(t *testing.T) {
	if diff := cmp.Diff(fullV1(), k8s.ToCoreV1(fullEvent())); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	if k8s.ToCoreV1(nil) != nil || k8s.FromCoreV1(nil) != nil {
		t.Fatal("conversion of nil is not nil")
	}
}

// TestFromCoreV1: every field herald models comes back; the rest is left.
func TestFromCoreV1(t *testing.T) {
	v := fullV1()
	v.Action, v.ReportingController = "Restart", "kubelet"
	v.Series = &corev1.EventSeries{Count: 9}
	if diff := cmp.Diff(fullEvent(), k8s.FromCoreV1(v)); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
}

// TestConversionRoundTrips: events.Event -> core/v1 -> events.Event and
// core/v1 (herald's fields) -> events.Event -> core/v1 are the identity,
// zero values, nil and empty annotations included.
func TestConversionRoundTrips(t *testing.T) {
	empty := fullEvent()
	empty.Annotations = map[string]string{}
	for name, e := range map[string]*events.Event{
		"full": fullEvent(), "zero": {}, "empty annotations": empty,
	} {
		if diff := cmp.Diff(e, k8s.FromCoreV1(k8s.ToCoreV1(e))); diff != "" {
			t.Errorf("%s: herald round trip (-want +got)\n%s", name, diff)
		}
	}
	for name, v := range map[string]*corev1.Event{"full": fullV1(), "zero": {}} {
		if diff := cmp.Diff(v, k8s.ToCoreV1(k8s.FromCoreV1(v))); diff != "" {
			t.Errorf("%s: core/v1 round trip (-want +got)\n%s", name, diff)
		}
	}
}

// TestConversionCopiesAnnotations: neither side shares its map.
func TestConversionCopiesAnnotations(t *testing.T) {
	e := fullEvent()
	v := k8s.ToCoreV1(e)
	v.Annotations["a"] = "changed"
	if e.Annotations["a"] != "1" {
		t.Fatal("ToCoreV1 shares the annotations")
	}
	back := k8s.FromCoreV1(v)
	back.Annotations["a"] = "again"
	if v.Annotations["a"] != "changed" {
		t.Fatal("FromCoreV1 shares the annotations")
	}
}

// TestPatchDataIsClientGos: PatchData is byte for byte the patch
// client-go's EventCorrelator computes (same base, same merge).
func TestPatchDataIsClientGos(t *testing.T) {
	for _, p := range []events.Patch{
		{Count: 2, LastTimestamp: t0, Message: "restarting"},
		{Count: 1234567, LastTimestamp: t0.Add(time.Hour), Message: `quotes " and \ and ünïcode <>&`},
		{Count: 2, LastTimestamp: t0},               // no message
		{Count: 5, LastTimestamp: time.Unix(0, 0)},  // the base's timestamp
		{Count: 3, Message: "zero time"},            // no timestamp
		{Count: 0, LastTimestamp: t0, Message: "x"}, // the base's count
	} {
		t.Run(fmt.Sprint(p.Count, p.Message), func(t *testing.T) {
			got, err := k8s.PatchData(p)
			if err != nil {
				t.Fatal(err)
			}
			if want := clientGoPatch(t, p); string(got) != string(want) {
				t.Fatalf("PatchData %s, client-go %s", got, want)
			}
		})
	}
}

// clientGoPatch computes the patch as client-go's eventObserve does.
func clientGoPatch(t *testing.T, p events.Patch) []byte {
	t.Helper()
	ev := fullV1()
	ev.Count, ev.LastTimestamp, ev.Message = p.Count, metav1.NewTime(p.LastTimestamp), p.Message
	base := *ev
	base.Count, base.LastTimestamp, base.Message = 0, metav1.NewTime(time.Unix(0, 0)), ""
	newData, _ := json.Marshal(ev)
	oldData, _ := json.Marshal(&base)
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldData, newData, ev)
	if err != nil {
		t.Fatal(err)
	}
	return patch
}

// TestValidEventName: valid names are kept; invalid ones become a valid
// name, the same every time, different for different inputs.
func TestValidEventName(t *testing.T) {
	for _, name := range []string{"web-0.17f0a1b2c3d4e5f6", "a.b.c", "x"} {
		if got := k8s.ValidEventName(name); got != name {
			t.Errorf("ValidEventName(%q) = %q, want it kept", name, got)
		}
	}
	invalid := []string{
		"system:controller:attachdetach.17f0a1b2c3d4e5f6",
		"system:controller:attachdetach.17f0a1b2c3d4e5f7",
		"Upper.17f0a1b2c3d4e5f6",
		strings.Repeat("a", 250) + ".17f0a1b2c3d4e5f6",
		".17f0a1b2c3d4e5f6", // an object with no name
	}
	seen := map[string]string{}
	for _, name := range invalid {
		got := k8s.ValidEventName(name)
		if errs := validation.NameIsDNSSubdomain(got, false); len(errs) > 0 {
			t.Errorf("ValidEventName(%q) = %q, invalid: %v", name, got, errs)
		}
		if again := k8s.ValidEventName(name); again != got {
			t.Errorf("ValidEventName(%q) = %q, then %q", name, got, again)
		}
		if other, ok := seen[got]; ok {
			t.Errorf("%q and %q both became %q", other, name, got)
		}
		seen[got] = name
	}
}
