package integration

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// step is one event of a stream, independent of the namespace it goes to.
type step struct {
	src, obj             int
	typ, reason, message string
	pauseAfter           time.Duration // a burst ends here
}

// group is the aggregation group of a step: the events that differ only in
// message.
func (s step) group() string { return fmt.Sprintf("c%d|p%d|%s|%s", s.src, s.obj, s.typ, s.reason) }

// randomStream returns n steps over 2 sources and 12 objects: exact repeats
// of recent events, reasons with 1, 3 or 5 messages (groups that never
// aggregate), a reason with 12 (groups that reach 10 distinct messages and
// aggregate), one object far busier than the others (the spam filter's
// burst of 25 per source and object is used up on most objects), in bursts
// of 1 to 60 events.
func randomStream(seed uint64, n int) []step {
	rng := rand.New(rand.NewPCG(seed, 7))
	out := make([]step, 0, n)
	burst := 0
	unhealthy := map[int]int{} // the messages cycle, so that the 10th distinct one comes early
	for len(out) < n {
		var s step
		if len(out) > 0 && rng.Float64() < 0.35 {
			s = out[len(out)-1-rng.IntN(min(len(out), 8))]
		} else {
			s.src = rng.IntN(2)
			s.obj = rng.IntN(10)
			if rng.IntN(4) == 0 {
				s.obj = 0
			}
			switch r := rng.IntN(10); {
			case r < 3:
				s.typ, s.reason, s.message = corev1.EventTypeNormal, "Synced", "synced"
			case r < 6:
				s.typ, s.reason = corev1.EventTypeNormal, "Scaled"
				s.message = fmt.Sprintf("scaled to %d", rng.IntN(3))
				if rng.IntN(2) == 0 {
					s.typ = corev1.EventTypeWarning
				}
			case r < 8:
				s.typ, s.reason = corev1.EventTypeWarning, "Failed"
				s.message = fmt.Sprintf("pull failed: attempt %d", rng.IntN(5))
			default:
				s.typ, s.reason = corev1.EventTypeWarning, "Unhealthy"
				s.src, s.obj = 0, 10+rng.IntN(2) // two groups of their own, many messages each
				s.message = fmt.Sprintf("probe failed: status %d", 500+unhealthy[s.obj]%12)
				unhealthy[s.obj]++
			}
		}
		s.pauseAfter = 0
		if burst--; burst <= 0 {
			burst = 1 + rng.IntN(60)
			s.pauseAfter = time.Duration(rng.IntN(20)) * time.Millisecond
		}
		out = append(out, s)
	}
	return out
}

// play records stream through rec about pods in ns, then one last event
// with reason "Done" about pod "done".
func play(rec []record.EventRecorder, ns string, stream []step) {
	for _, s := range stream {
		rec[s.src].Eventf(pod(ns, fmt.Sprintf("p%d", s.obj)), s.typ, s.reason, "%s", s.message)
		if s.pauseAfter > 0 {
			time.Sleep(s.pauseAfter)
		}
	}
	rec[0].Event(pod(ns, "done"), corev1.EventTypeNormal, "Done", "done")
}

// heraldModel runs stream through herald's Correlator with its defaults
// and a sink that stores exactly what it is given: the Event objects
// herald's pipeline must leave in the API server.
func heraldModel(ns string, stream []step) []stored {
	corr := events.NewCorrelator(events.CorrelatorOptions{})
	byName := map[string]*events.Event{}
	var order []string
	for i, s := range stream {
		now := time.Now()
		src := events.Source{Component: fmt.Sprintf("c%d", s.src)}
		name := fmt.Sprintf("p%d", s.obj)
		e := &events.Event{
			Name: fmt.Sprintf("%s.%x", name, i), Namespace: ns,
			InvolvedObject: events.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name, UID: "uid-" + name},
			Reason:         s.reason, Message: s.message, Type: s.typ, Source: src,
			FirstTimestamp: now, LastTimestamp: now, Count: 1, ReportingController: src.Component,
		}
		res, err := corr.Correlate(e)
		if err != nil {
			panic(err)
		}
		if res.Skip {
			continue
		}
		if old, ok := byName[res.Event.Name]; ok && res.Patch != nil {
			old.Count, old.Message = res.Patch.Count, res.Patch.Message
			continue
		}
		byName[res.Event.Name] = res.Event.Clone()
		order = append(order, res.Event.Name)
	}
	out := []stored{{Kind: "Pod", Name: "done", UID: "uid-done", APIVersion: "v1", Reason: "Done", Type: corev1.EventTypeNormal, Message: "done", Count: 1, Component: "c0"}}
	for _, n := range order {
		out = append(out, toStored(k8s.ToCoreV1(byName[n])))
	}
	return sorted(out)
}

func sorted(s []stored) []stored {
	sortStored(s)
	return s
}

// TestSameEventsAsClientGo is guarantee 12: the same random stream
// recorded through client-go's record.NewBroadcaster and through
// k8s.NewBroadcaster, each into its own namespace of one API server,
// leaves the same Event objects in every aggregation group where client-go
// is deterministic (fewer than 10 distinct messages). In the groups that
// aggregate, client-go forgets a random message (sets.PopAny) and lets some
// repeats through as plain events; there herald's events must be exactly
// what herald's Correlator decides (every similar event from the 10th
// distinct message on, in one aggregate), and both must have an aggregate
// event and the same total count.
func TestSameEventsAsClientGo(t *testing.T) {
	s := apiservertest.Shared(t)
	c := s.Clientset()
	for seed := range uint64(2) {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			// Under 1000 events: neither pipeline's queue can overflow,
			// so neither drops.
			stream := randomStream(seed, 900)
			kns, hns := s.Namespace(t), s.Namespace(t)

			kb := record.NewBroadcaster()
			ksink := &countingSink{EventSink: sinkFor(c), doneReason: "Done", done: make(chan struct{})}
			kdone := ksink.done
			kb.StartRecordingToSink(ksink)
			hb := k8s.NewBroadcaster(quiet)
			hb.StartRecordingToSink(sinkFor(c))
			var krec, hrec []record.EventRecorder
			for src := range 2 {
				source := corev1.EventSource{Component: fmt.Sprintf("c%d", src)}
				krec = append(krec, kb.NewRecorder(scheme.Scheme, source))
				hrec = append(hrec, hb.NewRecorder(scheme.Scheme, source))
			}
			play(krec, kns, stream)
			play(hrec, hns, stream)
			// client-go's Shutdown does not flush: wait until its sink
			// has written the last event.
			select {
			case <-kdone:
			case <-time.After(2 * time.Minute):
				t.Fatal("client-go did not write its last event within 2 minutes")
			}
			kb.Shutdown()
			shutdown(t, hb)
			hs := hb.(*k8s.Broadcaster).Events().Stats()
			if hs.Dropped != 0 || hs.Failed != 0 || hs.Abandoned != 0 {
				t.Fatalf("herald lost events: %+v", hs)
			}

			kgot, hgot := list(t, c, kns), list(t, c, hns)
			if diff := cmp.Diff(heraldModel(hns, stream), hgot); diff != "" {
				t.Fatalf("herald's events are not its Correlator's decisions (-model +server)\n%s", diff)
			}

			distinct := map[string]map[string]bool{}
			for _, st := range stream {
				if distinct[st.group()] == nil {
					distinct[st.group()] = map[string]bool{}
				}
				distinct[st.group()][st.message] = true
			}
			groupOf := func(e stored) string {
				return fmt.Sprintf("%s|%s|%s|%s", e.Component, e.Name, e.Type, e.Reason)
			}
			aggregating := func(e stored) bool { return len(distinct[groupOf(e)]) >= events.DefaultMaxEvents }
			var kdet, hdet []stored
			ktotal, htotal := map[string]int32{}, map[string]int32{}
			kagg := map[string]bool{}
			patched, aggGroups := 0, 0
			for _, e := range kgot {
				if aggregating(e) {
					ktotal[groupOf(e)] += e.Count
					if strings.HasPrefix(e.Message, events.AggregatePrefix) {
						kagg[groupOf(e)] = true
					}
					continue
				}
				kdet = append(kdet, e)
			}
			for _, e := range hgot {
				if e.Count > 1 {
					patched++
				}
				if aggregating(e) {
					if strings.HasPrefix(e.Message, events.AggregatePrefix) {
						aggGroups++
						if !kagg[groupOf(e)] {
							t.Errorf("group %s: herald aggregated, client-go did not", groupOf(e))
						}
					}
					htotal[groupOf(e)] += e.Count
					continue
				}
				hdet = append(hdet, e)
			}
			if diff := cmp.Diff(kdet, hdet); diff != "" {
				t.Errorf("deterministic groups differ (-client-go +herald)\n%s", diff)
			}
			if diff := cmp.Diff(ktotal, htotal); diff != "" {
				t.Errorf("aggregating groups: total counts differ (-client-go +herald)\n%s", diff)
			}
			t.Logf("%d events recorded; stored: client-go %d, herald %d events (%d in deterministic groups, %d with count > 1, %d aggregate events); herald %+v",
				len(stream)+1, len(kgot), len(hgot), len(hdet), patched, aggGroups, hs)
			if patched == 0 || aggGroups == 0 || hs.Skipped == 0 {
				t.Errorf("the stream does not test enough: %d patched, %d aggregates, %d skipped", patched, aggGroups, hs.Skipped)
			}
		})
	}
}
