package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// pipeline is one of the two record.EventBroadcaster implementations
// under the same options.
type pipeline struct {
	name string
	ns   string
	b    record.EventBroadcaster
	w    watch.Interface // StartRecordingToSink's
	rec  record.EventRecorder
}

// recordPair starts client-go's record.NewBroadcaster(kopts...) and
// k8s.NewBroadcaster(hopts...), each recording to the API server into a
// namespace of its own, with one recorder each from source.
func recordPair(t *testing.T, s *apiservertest.Server, source corev1.EventSource, kopts []record.BroadcasterOption, hopts []k8s.Option) []*pipeline {
	c := s.Clientset()
	k := &pipeline{name: "client-go", ns: s.Namespace(t), b: record.NewBroadcaster(kopts...)}
	h := &pipeline{name: "herald", ns: s.Namespace(t), b: k8s.NewBroadcaster(append([]k8s.Option{quiet}, hopts...)...)}
	for _, p := range []*pipeline{k, h} {
		p.w = p.b.StartRecordingToSink(sinkFor(c))
		p.rec = p.b.NewRecorder(scheme.Scheme, source)
	}
	return []*pipeline{k, h}
}

// fakeClock is a clock.PassiveClock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

func (c *fakeClock) Step(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRecordWithContext is guarantee 17 for WithContext, on the real
// server: with record.WithContext(ctx) and k8s.WithContext(ctx), the end
// of ctx shuts either broadcaster down (the watch StartRecordingToSink
// returned is closed), and an event recorded after it is stored by
// neither. herald also counts it (Stats().Dropped).
func TestRecordWithContext(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ps := recordPair(t, s, corev1.EventSource{Component: "with-context"},
		[]record.BroadcasterOption{record.WithContext(ctx)}, []k8s.Option{k8s.WithContext(ctx)})
	for _, p := range ps {
		p.rec.Event(pod(p.ns, "web"), corev1.EventTypeNormal, "Before", "recorded before the cancel")
		waitStored(t, c, p.ns, "Before", 1)
	}
	cancel()
	for _, p := range ps {
		select {
		case _, ok := <-p.w.ResultChan():
			if ok {
				t.Fatalf("%s: the recording watch delivered an event", p.name)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s: the end of WithContext's ctx did not shut the broadcaster down within a minute", p.name)
		}
		// client-go's recorder drops it (and logs it); herald's drops
		// and counts it. Neither panics.
		p.rec.Event(pod(p.ns, "web"), corev1.EventTypeNormal, "After", "recorded after the cancel")
	}
	if st := stats(ps[1].b); st.Dropped != 1 || st.Written != 1 {
		t.Errorf("herald after the cancel: %+v, want 1 written and 1 dropped", st)
	}
	// Nothing can write the event any more (both broadcasters have shut
	// down); a second lets a wrongly running pipeline show it.
	time.Sleep(time.Second)
	for _, p := range ps {
		got := list(t, c, p.ns)
		if len(got) != 1 || got[0].Reason != "Before" {
			t.Errorf("%s stored %v, want the event before the cancel alone", p.name, got)
		}
	}
	// Shutdown after the context's: nothing more to do, no panic.
	for _, p := range ps {
		p.b.Shutdown()
	}
}

// TestRecordCorrelatorOptions is guarantee 17 for WithCorrelatorOptions'
// BurstSize, KeyFunc (with MessageFunc) and Clock on the real server:
// record.WithCorrelatorOptions(o) and k8s.WithCorrelatorOptions(o) with
// the same o leave the same Events, and each option visibly changes them
// from what the defaults would store.
func TestRecordCorrelatorOptions(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	run := func(t *testing.T, o record.CorrelatorOptions, play func(p *pipeline)) (client, herald []stored, hs events.Stats) {
		ps := recordPair(t, s, corev1.EventSource{Component: "correlator"},
			[]record.BroadcasterOption{record.WithCorrelatorOptions(o)}, []k8s.Option{k8s.WithCorrelatorOptions(o)})
		for _, p := range ps {
			play(p)
			p.rec.Event(pod(p.ns, "done"), corev1.EventTypeNormal, "Done", "done")
			waitStored(t, c, p.ns, "Done", 1)
		}
		ps[0].b.Shutdown()
		shutdown(t, ps[1].b)
		return list(t, c, ps[0].ns), list(t, c, ps[1].ns), stats(ps[1].b)
	}
	same := func(t *testing.T, k, h []stored) {
		t.Helper()
		if diff := cmp.Diff(k, h); diff != "" {
			t.Fatalf("stored events differ (-client-go +herald)\n%s", diff)
		}
	}
	reasons := func(got []stored) string {
		var r []string
		for _, e := range got {
			r = append(r, fmt.Sprintf("%s:%s", e.Name, e.Reason))
		}
		return strings.Join(r, " ")
	}

	t.Run("BurstSize", func(t *testing.T) {
		// A burst of 3 per source and object, then one per 300 s: of 6
		// distinct events about web, 3 are stored (the default burst of 25
		// would store all 6).
		k, h, hs := run(t, record.CorrelatorOptions{BurstSize: 3}, func(p *pipeline) {
			for i := range 6 {
				p.rec.Eventf(pod(p.ns, "web"), corev1.EventTypeNormal, fmt.Sprint("Step", i), "step %d", i)
			}
		})
		same(t, k, h)
		if got := reasons(h); got != "done:Done web:Step0 web:Step1 web:Step2" {
			t.Fatalf("stored %s, want the first 3 steps", got)
		}
		if hs.Skipped != 3 {
			t.Errorf("herald: %+v, want 3 skipped", hs)
		}
	})

	t.Run("KeyFunc", func(t *testing.T) {
		// Events about one object are similar whatever their reason, and
		// the 2nd distinct message aggregates: the default key (by
		// reason) would store 2 plain events per object.
		o := record.CorrelatorOptions{
			MaxEvents: 2,
			KeyFunc: func(e *corev1.Event) (string, string) {
				return e.Source.Component + "/" + e.InvolvedObject.Name, e.Message
			},
			MessageFunc: func(e *corev1.Event) string { return "similar: " + e.Message },
		}
		k, h, _ := run(t, o, func(p *pipeline) {
			for _, name := range []string{"a", "b"} {
				p.rec.Event(pod(p.ns, name), corev1.EventTypeWarning, "Failed", "first")
				p.rec.Event(pod(p.ns, name), corev1.EventTypeWarning, "BackOff", "second")
			}
		})
		same(t, k, h)
		var agg int
		for _, e := range h {
			if e.Message == "similar: second" && e.Reason == "BackOff" {
				agg++
			}
		}
		if agg != 2 || len(h) != 5 {
			t.Fatalf("stored %v, want per object a plain Failed event and an aggregate BackOff one", h)
		}
	})

	t.Run("Clock", func(t *testing.T) {
		// A burst of 1, one token per 300 s, on a clock that moves only
		// when told: the second event is filtered, the third, 301 s later
		// on that clock (a fraction of a second of real time), passes.
		// client-go's correlator reads the clock when its goroutine gets to
		// the event, so the clock moves only once an event about another
		// object recorded after the filtered one is stored (client-go
		// handles events in recording order); herald's reads it when the
		// event is recorded.
		clock := &fakeClock{now: time.Now()}
		k, h, hs := run(t, record.CorrelatorOptions{BurstSize: 1, Clock: clock}, func(p *pipeline) {
			p.rec.Event(pod(p.ns, "web"), corev1.EventTypeNormal, "First", "1")
			p.rec.Event(pod(p.ns, "web"), corev1.EventTypeNormal, "Filtered", "2")
			p.rec.Event(pod(p.ns, "marker"), corev1.EventTypeNormal, "Marker", "m")
			waitStored(t, c, p.ns, "Marker", 1)
			clock.Step(301 * time.Second)
			p.rec.Event(pod(p.ns, "web"), corev1.EventTypeNormal, "Later", "3")
		})
		same(t, k, h)
		if hs.Skipped != 1 {
			t.Errorf("herald: %+v, want 1 skipped", hs)
		}
		if got := reasons(h); got != "done:Done marker:Marker web:First web:Later" {
			t.Fatalf("stored %s, want First and Later (Filtered by the spam filter)", got)
		}
	})
}
