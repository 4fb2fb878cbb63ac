package events

import "testing"

// TestCorrelateAllocs: the hot path allocates at most the result (one
// allocation for Event and Patch together) on the mixed stream's kind of
// traffic, once the caches are warm.
func TestCorrelateAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	c := NewCorrelator(CorrelatorOptions{BurstSize: Disable})
	src := Source{Component: "kubelet", Host: "n1"}
	evs := make([]Event, 64)
	for i := range evs {
		evs[i] = Event{
			Name: "p", Namespace: "ns", Source: src, Type: Warning, Reason: "BackOff", Count: 1,
			InvolvedObject: ObjectReference{Kind: "Pod", Namespace: "ns", Name: []string{"a", "b", "c", "d"}[i%4]},
			Message:        []string{"m1", "m2", "m3"}[i%3],
		}
	}
	for i := range evs {
		c.Correlate(&evs[i])
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		c.Correlate(&evs[i%len(evs)])
		i++
	})
	if allocs > 1 {
		t.Fatalf("%.1f allocations per Correlate, want at most 1", allocs)
	}
}

// TestRecordAllocs: Recorder.Event allocates the event and its name.
func TestRecordAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts differ under -race")
	}
	b := NewBroadcaster()
	defer b.Shutdown(t.Context())
	r := b.NewRecorder(Source{Component: "c"})
	obj := ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web"}
	if allocs := testing.AllocsPerRun(1000, func() { r.Event(obj, Normal, "Started", "started") }); allocs > 2 {
		t.Fatalf("%.1f allocations per Event, want at most 2", allocs)
	}
}

func TestNilBroadcasterRecorder(t *testing.T) {
	var b *Broadcaster
	b.NewRecorder(Source{}).Event(ObjectReference{}, Normal, "R", "m") // no panic
	(&Broadcaster{}).NewRecorder(Source{}).Eventf(ObjectReference{}, Normal, "R", "%d", 1)
}
