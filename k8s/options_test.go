package k8s_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/k8s"
)

// serialSink is a record.EventSink that is not safe for concurrent use
// (the race detector catches two calls at once) and counts its calls in
// flight.
type serialSink struct {
	events    []*corev1.Event // no lock: concurrent calls race
	now, peak atomic.Int32
}

func (s *serialSink) call(e *corev1.Event) (*corev1.Event, error) {
	n := s.now.Add(1)
	for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
	}
	time.Sleep(time.Millisecond) // in the bubble: lets other calls start
	s.events = append(s.events, e)
	s.now.Add(-1)
	return e, nil
}
func (s *serialSink) Create(e *corev1.Event) (*corev1.Event, error)          { return s.call(e) }
func (s *serialSink) Update(e *corev1.Event) (*corev1.Event, error)          { return s.call(e) }
func (s *serialSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) { return s.call(e) }

func podNamed(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: "u-" + "x"}}
}

// TestUserSinkSerial: guarantee 18, a user's sink is called one at a
// time by default, in recording order per object.
func TestUserSinkSerial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := k8s.NewBroadcaster()
		s := &serialSink{}
		b.StartRecordingToSink(s)
		r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "c"})
		for i := range 40 {
			r.Eventf(podNamed(string(rune('a'+i%20))), corev1.EventTypeNormal, "R", "m%d", i)
		}
		b.Shutdown()
		if p := s.peak.Load(); p != 1 {
			t.Errorf("%d calls in flight at most, want 1", p)
		}
		if len(s.events) != 40 {
			t.Errorf("%d calls, want 40", len(s.events))
		}
	})
}

// TestWithContextShutsDown: the end of WithContext's ctx shuts the
// broadcaster down (recording after it is dropped, Start returns an empty
// watch).
func TestWithContextShutsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		b := k8s.NewBroadcaster(k8s.WithContext(ctx))
		s := &serialSink{}
		b.StartRecordingToSink(s)
		r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "c"})
		r.Event(podNamed("a"), corev1.EventTypeNormal, "R", "before")
		cancel()
		synctest.Wait()
		r.Event(podNamed("a"), corev1.EventTypeNormal, "R", "after")
		b.Shutdown() // waits for the shutdown ctx started
		if len(s.events) != 1 || s.events[0].Message != "before" {
			t.Errorf("stored %v, want the event before the cancel only", s.events)
		}
		if st := b.(*k8s.Broadcaster).Events().Stats(); st.Dropped != 1 {
			t.Errorf("Stats %+v: want 1 dropped after the shutdown", st)
		}
	})
}

// fakeClock is a clock.PassiveClock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time                  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// TestWithCorrelatorOptions: BurstSize, KeyFunc (given *corev1.Event) and
// Clock take effect.
func TestWithCorrelatorOptions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &fakeClock{t: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
		var keyed atomic.Int32
		b := k8s.NewBroadcaster(k8s.WithCorrelatorOptions(record.CorrelatorOptions{
			BurstSize: 2,
			Clock:     clk,
			KeyFunc: func(e *corev1.Event) (string, string) {
				keyed.Add(1)
				return e.InvolvedObject.Name + e.Reason, e.Message
			},
		}))
		s := &serialSink{}
		b.StartRecordingToSink(s)
		r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "c"})
		for i := range 5 {
			r.Eventf(podNamed("a"), corev1.EventTypeNormal, "R", "m%d", i)
		}
		b.Shutdown()
		if len(s.events) != 2 {
			t.Errorf("%d events written, want 2 (BurstSize 2)", len(s.events))
		}
		if keyed.Load() == 0 {
			t.Error("KeyFunc never called")
		}
		for _, e := range s.events {
			if !e.LastTimestamp.Time.Equal(clk.Now()) {
				t.Errorf("LastTimestamp %v, want the fake clock's %v", e.LastTimestamp, clk.Now())
			}
		}
	})
}
