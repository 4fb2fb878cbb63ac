package eventstest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

var pod = events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"}

func TestFakeRecorderNeverBlocks(t *testing.T) {
	var r eventstest.FakeRecorder // the zero value works
	var wg sync.WaitGroup
	for g := range 10 {
		wg.Go(func() {
			for i := range 10000 {
				r.Eventf(pod, events.Normal, "R", "%d/%d", g, i)
			}
		})
	}
	wg.Wait()
	if r.Len() != 100000 {
		t.Fatalf("Len %d, want 100000", r.Len())
	}
}

func TestFakeRecorderRecords(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	r := &eventstest.FakeRecorder{Source: events.Source{Component: "c", Host: "h"}, Now: func() time.Time { return now }}
	ann := map[string]string{"k": "v"}
	r.AnnotatedEventf(pod, ann, events.Warning, "BackOff", "restarting %s", "app")
	ann["k"] = "changed"
	r.Event(events.ObjectReference{Name: "n"}, events.Normal, "Ready", "ready")
	r.Event(pod, "Bogus", "R", "m")

	r.Expect(t, "Warning BackOff restarting app", "Normal Ready ready")
	got := r.Events()
	want := events.Event{
		Name: fmt.Sprintf("web.%x", now.UnixNano()), Namespace: "ns", InvolvedObject: pod,
		Reason: "BackOff", Message: "restarting app", Type: events.Warning,
		Source: events.Source{Component: "c", Host: "h"}, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		Annotations: map[string]string{"k": "v"}, ReportingController: "c", ReportingInstance: "h",
	}
	if diff := cmp.Diff(want, got[0]); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got[1].Namespace != "default" {
		t.Errorf("Namespace %q, want default", got[1].Namespace)
	}
	got[0].Annotations["k"] = "mutated" // a copy
	if r.Events()[0].Annotations["k"] != "v" {
		t.Error("Events returned the recorder's own map")
	}
	if inv := r.Invalid(); len(inv) != 1 || inv[0].Type != "Bogus" {
		t.Errorf("Invalid %+v", inv)
	}
	if e := r.ExpectContains(t, events.Warning, "BackOff", "restart"); e.Message != "restarting app" {
		t.Errorf("ExpectContains returned %+v", e)
	}
	r.Reset()
	r.ExpectNone(t)
}

// fakeTB records failures instead of failing.
type fakeTB struct {
	testing.TB
	failed []string
}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Errorf(format string, a ...any) {
	f.failed = append(f.failed, fmt.Sprintf(format, a...))
}

func TestFakeRecorderExpectFails(t *testing.T) {
	r := &eventstest.FakeRecorder{}
	r.Event(pod, events.Normal, "Ready", "ready")
	tb := &fakeTB{TB: t}
	r.Expect(tb, "Normal Ready not ready")
	r.ExpectContains(tb, events.Warning, "Ready", "")
	r.ExpectNone(tb)
	if len(tb.failed) != 3 {
		t.Fatalf("want 3 failures, got %q", tb.failed)
	}
}

func TestFakeSink(t *testing.T) {
	ctx := context.Background()
	s := eventstest.NewFakeSink()
	e := &events.Event{Namespace: "ns", Name: "web.1", Message: "m", Count: 1}

	boom := errors.New("boom")
	s.FailNext(eventstest.OpCreate, 2, boom)
	for range 2 {
		if _, err := s.Create(ctx, e); !errors.Is(err, boom) {
			t.Fatalf("Create: %v, want the injected error", err)
		}
	}
	stored, err := s.Create(ctx, e)
	if err != nil || stored.ResourceVersion != "1" {
		t.Fatalf("Create: %+v, %v", stored, err)
	}
	if _, err := s.Create(ctx, e); !errors.Is(err, events.ErrAlreadyExists) {
		t.Fatalf("second Create: %v", err)
	}
	p := events.Patch{Count: 2, LastTimestamp: time.Unix(5, 0), Message: "m2"}
	patched, err := s.Patch(ctx, e, p)
	if err != nil || patched.Count != 2 || patched.Message != "m2" || patched.ResourceVersion != "2" {
		t.Fatalf("Patch: %+v, %v", patched, err)
	}
	if !s.Delete("ns", "web.1") || s.Delete("ns", "web.1") {
		t.Fatal("Delete")
	}
	if _, err := s.Patch(ctx, e, p); !errors.Is(err, events.ErrNotFound) {
		t.Fatalf("Patch after Delete: %v", err)
	}
	ops := []eventstest.Op{}
	for _, c := range s.Calls() {
		ops = append(ops, c.Op)
	}
	wantOps := []eventstest.Op{"Create", "Create", "Create", "Create", "Patch", "Patch"}
	if !slices.Equal(ops, wantOps) {
		t.Fatalf("calls %v, want %v", ops, wantOps)
	}
	if s.CallCount(eventstest.OpPatch) != 2 || s.CallCount("") != 6 {
		t.Fatal("CallCount")
	}
	if len(s.Events()) != 0 {
		t.Fatal("Events after Delete")
	}
}

func TestFakeSinkHookAndWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &eventstest.FakeSink{}
		release := make(chan struct{})
		s.Hook = func(ctx context.Context, op eventstest.Op, e *events.Event) error {
			if e.Reason == "Slow" {
				<-release
			}
			if e.Reason == "Refuse" {
				return events.ErrRejected
			}
			return nil
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Create(context.Background(), &events.Event{Name: "a", Reason: "Slow"})
			s.Create(context.Background(), &events.Event{Name: "b", Reason: "Refuse"})
		}()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.WaitCalls(ctx, 1); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("WaitCalls while the hook blocks: %v", err)
		}
		close(release)
		if err := s.WaitCalls(context.Background(), 2); err != nil {
			t.Fatal(err)
		}
		<-done
		calls := s.Calls()
		if len(calls) != 2 || !errors.Is(calls[1].Err, events.ErrRejected) || len(s.Events()) != 1 {
			t.Fatalf("calls %+v", calls)
		}
	})
}
