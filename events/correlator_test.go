package events_test

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/events"
)

// step is what a test expects of one Correlate call.
type step struct {
	Skip       bool
	Create     bool // else Patch
	Count      int32
	Message    string
	Aggregated bool
}

func decide(t *testing.T, c *events.Correlator, e *events.Event) (step, events.CorrelateResult) {
	t.Helper()
	res, err := c.Correlate(e)
	if err != nil {
		t.Fatalf("Correlate: %v", err)
	}
	if res.Skip {
		return step{Skip: true, Aggregated: res.Aggregated}, res
	}
	if res.Patch != nil && (res.Patch.Count != res.Event.Count || res.Patch.Message != res.Event.Message ||
		!res.Patch.LastTimestamp.Equal(res.Event.LastTimestamp)) {
		t.Fatalf("Patch %+v does not match Event", *res.Patch)
	}
	return step{Create: res.Patch == nil, Count: res.Event.Count, Message: res.Event.Message, Aggregated: res.Aggregated}, res
}

func TestCorrelatorIdenticalEventsCounted(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now})
	var first *events.Event
	for i := 1; i <= 5; i++ {
		e := newEvent(pod, events.Warning, "BackOff", "restarting", clk.step(time.Second))
		got, res := decide(t, c, e)
		want := step{Create: i == 1, Count: int32(i), Message: "restarting"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("event %d (-want +got):\n%s", i, diff)
		}
		if i == 1 {
			first = res.Event
			continue
		}
		if res.Event.Name != first.Name || !res.Event.FirstTimestamp.Equal(first.FirstTimestamp) {
			t.Errorf("event %d: name %q first %v, want the first's %q %v", i,
				res.Event.Name, res.Event.FirstTimestamp, first.Name, first.FirstTimestamp)
		}
		if !res.Event.LastTimestamp.Equal(e.LastTimestamp) {
			t.Errorf("event %d: LastTimestamp %v, want the newest %v", i, res.Event.LastTimestamp, e.LastTimestamp)
		}
	}
}

func TestCorrelatorTenDistinctMessagesAggregated(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now})
	msg := func(i int) string { return fmt.Sprintf("probe failed: %d", i) }
	var got []step
	for i := 1; i <= 10; i++ {
		s, _ := decide(t, c, newEvent(pod, events.Warning, "Unhealthy", msg(i), clk.step(time.Second)))
		got = append(got, s)
	}
	var want []step
	for i := 1; i <= 9; i++ {
		want = append(want, step{Create: true, Count: 1, Message: msg(i)})
	}
	want = append(want, step{Create: true, Count: 1, Message: events.AggregatePrefix + msg(10), Aggregated: true})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("first ten (-want +got):\n%s", diff)
	}

	// Deterministic: every similar event, repeats of the first nine
	// included, patches the aggregate until the group is quiet.
	for i := 1; i <= 12; i++ {
		s, _ := decide(t, c, newEvent(pod, events.Warning, "Unhealthy", msg(i), clk.step(time.Minute)))
		w := step{Count: int32(i + 1), Message: events.AggregatePrefix + msg(i), Aggregated: true}
		if diff := cmp.Diff(w, s); diff != "" {
			t.Fatalf("similar event %d (-want +got):\n%s", i, diff)
		}
	}

	// Quiet for more than MaxInterval: the group starts over, and message 1
	// is a repeat of its plain event.
	clk.step(events.DefaultMaxInterval + time.Nanosecond)
	s, _ := decide(t, c, newEvent(pod, events.Warning, "Unhealthy", msg(1), clk.now()))
	if diff := cmp.Diff(step{Count: 2, Message: msg(1)}, s); diff != "" {
		t.Fatalf("after MaxInterval (-want +got):\n%s", diff)
	}
}

func TestCorrelatorAggregateEventShape(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now, MaxEvents: 2})
	decide(t, c, newEvent(pod, events.Warning, "Unhealthy", "a", clk.step(time.Second)))
	e := newEvent(pod, events.Warning, "Unhealthy", "b", clk.step(time.Second))
	e.Annotations = map[string]string{"k": "v"}
	_, res := decide(t, c, e)
	now := clk.now()
	want := &events.Event{
		Name: fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()), Namespace: "ns",
		InvolvedObject: pod, Reason: "Unhealthy", Message: events.AggregatePrefix + "b", Type: events.Warning,
		Source: src, FirstTimestamp: now, LastTimestamp: now, Count: 1,
		ReportingController: src.Component, ReportingInstance: src.Host,
	}
	if diff := cmp.Diff(want, res.Event); diff != "" {
		t.Fatalf("aggregate event (-want +got):\n%s", diff)
	}
}

func TestCorrelatorSpamFilter(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now})
	passed := 0
	for i := range 40 {
		// Distinct reasons: neither de-duplicated nor aggregated, one bucket.
		s, _ := decide(t, c, newEvent(pod, events.Normal, fmt.Sprintf("R%d", i), "m", clk.step(time.Millisecond)))
		if !s.Skip {
			passed++
		}
	}
	if passed != events.DefaultBurstSize {
		t.Fatalf("passed %d of 40 at once, want the burst %d", passed, events.DefaultBurstSize)
	}
	// Another object, or the other type, has its own bucket.
	if s, _ := decide(t, c, newEvent(pod2, events.Normal, "R0", "m", clk.now())); s.Skip {
		t.Fatal("another object was skipped")
	}
	if s, _ := decide(t, c, newEvent(pod, events.Warning, "R0", "m", clk.now())); s.Skip {
		t.Fatal("the other type was skipped")
	}
	// One token per 300s.
	clk.step(299 * time.Second)
	if s, _ := decide(t, c, newEvent(pod, events.Normal, "Late", "m", clk.now())); !s.Skip {
		t.Fatal("let through before the refill")
	}
	clk.step(2 * time.Second)
	if s, _ := decide(t, c, newEvent(pod, events.Normal, "Late2", "m", clk.now())); s.Skip {
		t.Fatal("skipped after the refill")
	}
	if s, _ := decide(t, c, newEvent(pod, events.Normal, "Late3", "m", clk.now())); !s.Skip {
		t.Fatal("two let through for one refill")
	}
}

func TestCorrelatorSkippedEventsStillCount(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now, BurstSize: 1})
	for i := 1; i <= 5; i++ {
		s, _ := decide(t, c, newEvent(pod, events.Normal, "Pulled", "m", clk.step(time.Second)))
		if s.Skip != (i > 1) {
			t.Fatalf("event %d: Skip %v", i, s.Skip)
		}
	}
	clk.step(events.DefaultMaxInterval)
	s, _ := decide(t, c, newEvent(pod, events.Normal, "Pulled", "m", clk.now()))
	if diff := cmp.Diff(step{Count: 6, Message: "m"}, s); diff != "" {
		t.Fatalf("after refill (-want +got):\n%s", diff)
	}
}

func TestCorrelatorDisable(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    events.CorrelatorOptions
		// whether 100 events with distinct messages about one object are
		// all plain creates
		wantPlain int
	}{
		{"defaults", events.CorrelatorOptions{}, 9},
		{"spam filter off", events.CorrelatorOptions{BurstSize: events.Disable}, 9},
		{"aggregation off", events.CorrelatorOptions{MaxEvents: events.Disable}, 25},
		{"both off", events.CorrelatorOptions{BurstSize: events.Disable, MaxEvents: -5}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			tc.o.Now = clk.now
			c := events.NewCorrelator(tc.o)
			plain, aggregated, skipped := 0, 0, 0
			for i := range 100 {
				s, _ := decide(t, c, newEvent(pod, events.Warning, "Failed", fmt.Sprint(i), clk.step(time.Millisecond)))
				switch {
				case s.Skip:
					skipped++
				case s.Aggregated:
					aggregated++
				default:
					plain++
				}
			}
			if plain != tc.wantPlain {
				t.Errorf("plain %d, aggregated %d, skipped %d; want %d plain", plain, aggregated, skipped, tc.wantPlain)
			}
			if tc.o.BurstSize < 0 && skipped > 0 {
				t.Errorf("spam filter off but %d skipped", skipped)
			}
			if tc.o.MaxEvents < 0 && aggregated > 0 {
				t.Errorf("aggregation off but %d aggregated", aggregated)
			}
		})
	}
}

func TestCorrelatorCustomKeyFunc(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{
		Now:       clk.now,
		MaxEvents: 3,
		// Group by reason alone, across objects; tell events apart by object.
		KeyFunc:     func(e *events.Event) (string, string) { return e.Reason, e.InvolvedObject.Name },
		MessageFunc: func(e *events.Event) string { return "many objects: " + e.Reason },
	})
	var got []step
	for i := range 4 {
		obj := pod
		obj.Name = fmt.Sprintf("web-%d", i)
		s, _ := decide(t, c, newEvent(obj, events.Warning, "FailedMount", "volume", clk.step(time.Second)))
		got = append(got, s)
	}
	want := []step{
		{Create: true, Count: 1, Message: "volume"},
		{Create: true, Count: 1, Message: "volume"},
		{Create: true, Count: 1, Message: "many objects: FailedMount", Aggregated: true},
		{Count: 2, Message: "many objects: FailedMount", Aggregated: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestCorrelatorCustomSpamKeyFunc(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{
		Now: clk.now, BurstSize: 2,
		SpamKeyFunc: func(e *events.Event) string { return e.Source.Component }, // one bucket per component
	})
	var skips []bool
	for i := range 4 {
		obj := pod
		obj.Name = fmt.Sprintf("web-%d", i)
		s, _ := decide(t, c, newEvent(obj, events.Normal, "Pulled", "m", clk.step(time.Millisecond)))
		skips = append(skips, s.Skip)
	}
	if diff := cmp.Diff([]bool{false, false, true, true}, skips); diff != "" {
		t.Fatalf("skips (-want +got):\n%s", diff)
	}
}

// client-go joins key fields with no separator, so these two events share a
// key there; herald's keys are structs.
func TestCorrelatorKeysDoNotCollide(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now})
	a := events.ObjectReference{Kind: "Pod", Namespace: "a", Name: "bc"}
	b := events.ObjectReference{Kind: "Pod", Namespace: "ab", Name: "c"}
	for _, obj := range []events.ObjectReference{a, b} {
		s, _ := decide(t, c, newEvent(obj, events.Normal, "Started", "m", clk.step(time.Second)))
		if diff := cmp.Diff(step{Create: true, Count: 1, Message: "m"}, s); diff != "" {
			t.Fatalf("%s/%s (-want +got):\n%s", obj.Namespace, obj.Name, diff)
		}
	}
}

func TestCorrelatorLRUEviction(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now, LRUCacheSize: 2})
	ev := func(reason string) step {
		s, _ := decide(t, c, newEvent(pod, events.Normal, reason, "m", clk.step(time.Second)))
		return s
	}
	ev("A")
	ev("B")
	if s := ev("A"); s.Count != 2 { // A is the most recent now
		t.Fatalf("A again: %+v", s)
	}
	ev("C") // evicts B, the least recent
	if s := ev("A"); s.Count != 3 {
		t.Fatalf("A kept: %+v", s)
	}
	if s := ev("B"); !s.Create || s.Count != 1 {
		t.Fatalf("B was evicted, want a create: %+v", s)
	}
}

func TestCorrelatorUpdateState(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now})
	_, res := decide(t, c, newEvent(pod, events.Normal, "Pulled", "m", clk.step(time.Second)))
	stored := res.Event.Clone()
	stored.ResourceVersion, stored.Count = "42", 7
	c.UpdateState(stored)
	c.UpdateState(nil) // ignored
	s, res := decide(t, c, newEvent(pod, events.Normal, "Pulled", "m", clk.step(time.Second)))
	if s.Count != 8 || s.Create || res.Event.ResourceVersion != "42" || res.Event.Name != stored.Name {
		t.Fatalf("after UpdateState: %+v rv %q name %q", s, res.Event.ResourceVersion, res.Event.Name)
	}
}

func TestCorrelatorNilEvent(t *testing.T) {
	res, err := events.NewCorrelator(events.CorrelatorOptions{}).Correlate(nil)
	if err == nil || !res.Skip || res.Event != nil {
		t.Fatalf("Correlate(nil) = %+v, %v", res, err)
	}
}

func TestCorrelatorResultIsACopy(t *testing.T) {
	c := events.NewCorrelator(events.CorrelatorOptions{})
	e := newEvent(pod, events.Normal, "Pulled", "m", time.Now())
	e.Annotations = map[string]string{"k": "v"}
	before := e.Clone()
	res, _ := c.Correlate(e)
	res.Event.Annotations["k"] = "changed"
	res.Event.Message = "changed"
	if diff := cmp.Diff(before, e); diff != "" {
		t.Fatalf("input changed (-before +after):\n%s", diff)
	}
}

func TestCorrelatorOptionsPanic(t *testing.T) {
	for _, o := range []events.CorrelatorOptions{
		{LRUCacheSize: -1}, {QPS: -1}, {MaxInterval: -time.Second},
	} {
		func() {
			defer func() {
				r := recover()
				if s, _ := r.(string); !strings.HasPrefix(s, "events: ") {
					t.Errorf("NewCorrelator(%+v): recovered %v, want an \"events: \" panic", o, r)
				}
			}()
			events.NewCorrelator(o)
		}()
	}
}

func TestCorrelatorConcurrent(t *testing.T) {
	c := events.NewCorrelator(events.CorrelatorOptions{BurstSize: events.Disable})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				e := newEvent(pod, events.Normal, fmt.Sprint("R", g), fmt.Sprint(i%3), time.Now())
				if _, err := c.Correlate(e); err != nil {
					t.Error(err)
				}
				if i%10 == 0 {
					c.UpdateState(e)
				}
			}
		})
	}
	wg.Wait()
}

// TestCorrelatorGroupsByReportingFields: the plain event key leaves out the
// reporting controller and instance, the group key has them. A repeated
// event reaches its group through the link its entry keeps (logRecord), and
// that link must not lead an event reported by another controller into the
// first controller's group: here controller b's ten distinct messages
// aggregate at the tenth, as they would with no other controller, although
// each of its first nine repeats an event (same plain key) that controller a
// reported, whose entry links to a's group.
func TestCorrelatorGroupsByReportingFields(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{Now: clk.now, BurstSize: events.Disable})
	record := func(controller string, i int) step {
		e := newEvent(pod, events.Warning, "BackOff", fmt.Sprintf("m%d", i), clk.step(time.Second))
		e.ReportingController = controller
		st, res := decide(t, c, e)
		if !res.Skip {
			c.UpdateState(res.Event)
		}
		return st
	}
	for i := range 9 {
		if st := record("a", i); st.Aggregated {
			t.Fatalf("a's message %d aggregated; nine distinct messages must not", i)
		}
	}
	for i := range 9 {
		st := record("b", i)
		if st.Aggregated || st.Create || st.Count != 2 {
			t.Fatalf("b's message %d: %+v, want a plain patch with count 2 (the plain key has no controller)", i, st)
		}
	}
	if st := record("b", 9); !st.Aggregated {
		t.Fatalf("b's tenth distinct message: %+v, want it aggregated in b's own group", st)
	}
	if st := record("a", 0); st.Aggregated {
		t.Fatalf("a's repeat of its first message: %+v, want a plain patch (a's group has nine messages)", st)
	}
}

// TestCorrelatorHugeCache: an LRUCacheSize too large to ever fill
// (math.MaxInt) means no limit; growing past the first 1024 keys used to
// overflow computing the next capacity and panic.
func TestCorrelatorHugeCache(t *testing.T) {
	clk := newClock()
	c := events.NewCorrelator(events.CorrelatorOptions{LRUCacheSize: math.MaxInt, BurstSize: events.Disable, Now: clk.now})
	const n = 3000
	for round, wantCount := range []int32{1, 2} {
		for i := range n {
			e := newEvent(pod, events.Normal, "R", "m", clk.now())
			e.InvolvedObject.Name = fmt.Sprintf("pod-%d", i)
			res, err := c.Correlate(e)
			if err != nil || res.Skip || res.Event.Count != wantCount || (res.Patch != nil) != (round == 1) {
				t.Fatalf("round %d, event %d: %+v, %v; want count %d", round, i, res, err, wantCount)
			}
		}
	}
}
