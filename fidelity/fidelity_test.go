package fidelity

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/heraldgo/herald/events"
)

// decision is what a correlator decided for one event, in terms both share.
type decision struct {
	Skip    bool
	Create  bool // else Patch
	Count   int32
	Name    string
	Message string
	First   int64 // FirstTimestamp, unix nanos
}

// pair runs client-go's and herald's correlators side by side on one fake
// clock.
type pair struct {
	clk *clocktesting.FakeClock
	k8s *record.EventCorrelator
	hd  *events.Correlator
}

func newPair(lruSize int) *pair {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	return &pair{
		clk: clk,
		k8s: record.NewEventCorrelatorWithOptions(record.CorrelatorOptions{Clock: clk, LRUCacheSize: lruSize}),
		hd:  events.NewCorrelator(events.CorrelatorOptions{Now: clk.Now, LRUCacheSize: lruSize}),
	}
}

func toV1(e *events.Event) *v1.Event {
	o := e.InvolvedObject
	return &v1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: e.Name, Namespace: e.Namespace, ResourceVersion: e.ResourceVersion},
		InvolvedObject: v1.ObjectReference{
			Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, UID: types.UID(o.UID),
			APIVersion: o.APIVersion, ResourceVersion: o.ResourceVersion, FieldPath: o.FieldPath,
		},
		Reason: e.Reason, Message: e.Message, Type: e.Type,
		Source:         v1.EventSource{Component: e.Source.Component, Host: e.Source.Host},
		FirstTimestamp: metav1.NewTime(e.FirstTimestamp), LastTimestamp: metav1.NewTime(e.LastTimestamp),
		Count: e.Count, ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
	}
}

// step feeds e to both at the clock's current time and, like a sink that
// stores what it is given, feeds each result back through UpdateState.
func (p *pair) step(t *testing.T, e *events.Event) (k, h decision, hres events.CorrelateResult) {
	t.Helper()
	kres, err := p.k8s.EventCorrelate(toV1(e))
	if err != nil {
		t.Fatalf("client-go: %v", err)
	}
	if kres.Skip {
		k = decision{Skip: true}
	} else {
		ke := kres.Event
		k = decision{Create: len(kres.Patch) == 0, Count: ke.Count, Name: ke.Name, Message: ke.Message, First: ke.FirstTimestamp.UnixNano()}
		p.k8s.UpdateState(ke)
	}
	hres, err = p.hd.Correlate(e)
	if err != nil {
		t.Fatalf("herald: %v", err)
	}
	if hres.Skip {
		h = decision{Skip: true}
	} else {
		he := hres.Event
		h = decision{Create: hres.Patch == nil, Count: he.Count, Name: he.Name, Message: he.Message, First: he.FirstTimestamp.UnixNano()}
		p.hd.UpdateState(he)
	}
	return k, h, hres
}

// streamConfig shapes a random event stream.
type streamConfig struct {
	events   int
	sources  int
	objects  int
	reasons  int
	messages int     // distinct messages per reason
	repeat   float64 // chance of repeating one of the last 8 events exactly
}

// gen is one generated event and its aggregation group.
type gen struct {
	e     events.Event
	group string
	at    time.Duration // since the start
}

// stream returns a reproducible random stream: sources, objects, reasons,
// messages, types and repeats, at random steps of up to 3 s, with an
// occasional jump of 4 to 12 minutes (past the spam filter's refill and the
// aggregation window).
func stream(cfg streamConfig, seed uint64) []gen {
	rng := rand.New(rand.NewPCG(seed, 42))
	var out []gen
	var at time.Duration
	for i := range cfg.events {
		if rng.IntN(50) == 0 {
			at += time.Duration(4+rng.IntN(9)) * time.Minute
		} else {
			at += time.Duration(rng.IntN(3000)) * time.Millisecond
		}
		var g gen
		if i > 0 && rng.Float64() < cfg.repeat {
			g = out[len(out)-1-rng.IntN(min(len(out), 8))]
		} else {
			s := rng.IntN(cfg.sources)
			o := rng.IntN(cfg.objects)
			r := rng.IntN(cfg.reasons)
			typ := events.Normal
			if rng.IntN(3) == 0 {
				typ = events.Warning
			}
			src := events.Source{Component: fmt.Sprintf("c%d", s), Host: fmt.Sprintf("h%d", s%2)}
			obj := events.ObjectReference{
				Kind: "Pod", Namespace: fmt.Sprintf("ns%d", o%3), Name: fmt.Sprintf("pod%d", o),
				UID: fmt.Sprintf("uid-%d", o), APIVersion: "v1",
			}
			if o%4 == 0 {
				obj.FieldPath = "spec.containers{app}"
			}
			g.e = events.Event{
				Namespace: obj.Namespace, InvolvedObject: obj,
				Reason: fmt.Sprintf("Reason%d", r), Message: fmt.Sprintf("message %d", rng.IntN(cfg.messages)),
				Type: typ, Source: src, ReportingController: src.Component, ReportingInstance: src.Host,
			}
			g.group = strings.Join([]string{src.Component, src.Host, obj.Namespace, obj.Name, typ, g.e.Reason}, "|")
		}
		g.at = at
		out = append(out, g)
	}
	return out
}

// stamp makes g's event as a Recorder would at the pair's clock time.
func (p *pair) stamp(g *gen) *events.Event {
	p.clk.SetTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(g.at))
	e := g.e
	now := p.clk.Now()
	e.Name = fmt.Sprintf("%s.%x", e.InvolvedObject.Name, now.UnixNano())
	e.FirstTimestamp, e.LastTimestamp, e.Count = now, now, 1
	return &e
}

// TestSameDecisions: de-duplication, the spam filter with its defaults and
// LRU eviction under pressure, on streams where no group reaches 10 distinct
// messages, so that the two must agree on every event.
func TestSameDecisions(t *testing.T) {
	for _, tc := range []struct {
		name string
		lru  int
		cfg  streamConfig
	}{
		{"dedup and spam, defaults", 0, streamConfig{events: 4000, sources: 2, objects: 3, reasons: 4, messages: 5, repeat: 0.5}},
		{"spam filter, one object", 0, streamConfig{events: 3000, sources: 1, objects: 1, reasons: 3, messages: 3, repeat: 0.3}},
		{"many keys, no pressure", 0, streamConfig{events: 4000, sources: 3, objects: 50, reasons: 5, messages: 9, repeat: 0.3}},
		{"LRU pressure 8", 8, streamConfig{events: 4000, sources: 2, objects: 10, reasons: 4, messages: 6, repeat: 0.4}},
		{"LRU pressure 64", 64, streamConfig{events: 5000, sources: 3, objects: 40, reasons: 5, messages: 9, repeat: 0.3}},
		{"LRU pressure 1", 1, streamConfig{events: 2000, sources: 1, objects: 3, reasons: 2, messages: 3, repeat: 0.5}},
		// Few spam buckets (they stay cached and skip), many events and
		// groups (evicted all the time).
		{"LRU pressure 16 with spam", 16, streamConfig{events: 4000, sources: 1, objects: 2, reasons: 20, messages: 9, repeat: 0.3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(10) {
				p := newPair(tc.lru)
				var counts [4]int // skip, create, patch, (unused)
				for i, g := range stream(tc.cfg, seed) {
					e := p.stamp(&g)
					k, h, _ := p.step(t, e)
					if diff := cmp.Diff(k, h); diff != "" {
						t.Fatalf("seed %d, event %d %s/%s %s %q: (-client-go +herald)\n%s",
							seed, i, e.Source.Component, e.InvolvedObject.Name, e.Reason, e.Message, diff)
					}
					switch {
					case k.Skip:
						counts[0]++
					case k.Create:
						counts[1]++
					default:
						counts[2]++
					}
				}
				if seed == 0 {
					t.Logf("seed 0: %d skipped, %d created, %d patched", counts[0], counts[1], counts[2])
				}
				if counts[0] == 0 && tc.lru != 1 && tc.cfg.objects*tc.cfg.sources*2 <= max(tc.lru, 16) {
					t.Errorf("seed %d: the spam filter never skipped: the stream does not test it", seed)
				}
				if counts[2] == 0 {
					t.Errorf("seed %d: nothing was patched: the stream does not test de-duplication", seed)
				}
			}
		})
	}
}

// heraldModel is herald's aggregation rule, written plainly: a group
// aggregates from its MaxEvents-th distinct message on, every similar event
// included, until it is quiet for MaxInterval.
type heraldModel struct {
	groups map[string]*modelGroup
}

type modelGroup struct {
	last        time.Duration
	seen        bool
	aggregating bool
	messages    map[string]bool
	aggCount    int32
}

func (m *heraldModel) observe(g *gen) (aggregated bool, count int32) {
	mg := m.groups[g.group]
	if mg == nil {
		mg = &modelGroup{}
		m.groups[g.group] = mg
	}
	if !mg.seen || g.at-mg.last > events.DefaultMaxInterval {
		mg.aggregating, mg.messages = false, map[string]bool{}
	}
	mg.seen, mg.last = true, g.at
	if !mg.aggregating {
		mg.messages[g.e.Message] = true
		mg.aggregating = len(mg.messages) >= events.DefaultMaxEvents
	}
	if mg.aggregating {
		mg.aggCount++
	}
	return mg.aggregating, mg.aggCount
}

// TestAggregation: streams where groups reach 10 distinct messages. Both
// must agree on every event of a group up to and including its first
// aggregate event. From then on client-go removes a random message from the
// group's set (sets.PopAny) and lets some similar events through as plain
// ones; herald aggregates every similar event until the group is quiet for
// MaxInterval, which the test checks against heraldModel. Other groups, and
// every spam filter decision, must still agree.
func TestAggregation(t *testing.T) {
	cfg := streamConfig{events: 5000, sources: 2, objects: 3, reasons: 2, messages: 14, repeat: 0.3}
	totalAggregates := 0
	for seed := range uint64(20) {
		p := newPair(0)
		model := &heraldModel{groups: map[string]*modelGroup{}}
		diverged := map[string]bool{}
		for i, g := range stream(cfg, seed) {
			e := p.stamp(&g)
			k, h, hres := p.step(t, e)
			wantAgg, wantCount := model.observe(&g)
			where := fmt.Sprintf("seed %d, event %d (group %s, %q)", seed, i, g.group, e.Message)
			if hres.Aggregated != wantAgg {
				t.Fatalf("%s: herald Aggregated %v, want %v", where, hres.Aggregated, wantAgg)
			}
			if k.Skip != h.Skip {
				t.Fatalf("%s: spam filter: client-go skip %v, herald %v", where, k.Skip, h.Skip)
			}
			if wantAgg && !h.Skip {
				if h.Message != events.AggregatePrefix+e.Message || h.Count != wantCount {
					t.Fatalf("%s: herald aggregate %+v, want message %q count %d", where, h, events.AggregatePrefix+e.Message, wantCount)
				}
			}
			if diverged[g.group] {
				continue
			}
			if diff := cmp.Diff(k, h); diff != "" {
				t.Fatalf("%s: (-client-go +herald)\n%s", where, diff)
			}
			if hres.Aggregated {
				// The group's first aggregate event: the same in both, and
				// the end of the comparison for this group.
				diverged[g.group] = true
				totalAggregates++
			}
		}
	}
	if totalAggregates < 20 {
		t.Fatalf("only %d groups aggregated: the streams do not test aggregation", totalAggregates)
	}
	t.Logf("%d groups compared up to their first aggregate event", totalAggregates)
}

// TestMixedUntilFirstAggregate: everything at once (many keys, LRU pressure,
// aggregation), compared event by event until the first group aggregates;
// from there the caches hold different keys and eviction order may differ.
func TestMixedUntilFirstAggregate(t *testing.T) {
	// 48 groups fit the cache of 64, 576 distinct events do not.
	cfg := streamConfig{events: 3000, sources: 2, objects: 6, reasons: 2, messages: 12, repeat: 0.3}
	compared, reached := 0, 0
	for seed := range uint64(20) {
		p := newPair(64)
		for i, g := range stream(cfg, seed) {
			e := p.stamp(&g)
			k, h, hres := p.step(t, e)
			if diff := cmp.Diff(k, h); diff != "" {
				t.Fatalf("seed %d, event %d: (-client-go +herald)\n%s", seed, i, diff)
			}
			compared++
			if hres.Aggregated {
				reached++
				break
			}
		}
	}
	if compared < 1000 || reached < 10 {
		t.Fatalf("compared %d events, %d streams reached an aggregate", compared, reached)
	}
	t.Logf("compared %d events; %d of 20 streams reached an aggregate", compared, reached)
}

// TestDeliberateDifferencePopAny names the one intended difference. After a
// group's 10th distinct message, client-go removes a random message from its
// set, so a repeat of an earlier message is aggregated only if that message
// happened to be removed (1 time in 10); herald aggregates it always.
func TestDeliberateDifferencePopAny(t *testing.T) {
	k8sPlain, k8sAggregated := 0, 0
	for range 100 {
		p := newPair(0)
		src := events.Source{Component: "kubelet"}
		obj := events.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web", UID: "u"}
		at := time.Duration(0)
		ev := func(msg string) *gen {
			at += time.Second
			return &gen{e: events.Event{
				Namespace: "ns", InvolvedObject: obj, Reason: "Unhealthy", Message: msg, Type: events.Warning,
				Source: src, ReportingController: src.Component,
			}, at: at}
		}
		for i := 1; i <= 10; i++ {
			k, h, _ := p.step(t, p.stamp(ev(fmt.Sprint("probe failed ", i))))
			if diff := cmp.Diff(k, h); diff != "" {
				t.Fatalf("message %d: (-client-go +herald)\n%s", i, diff)
			}
		}
		k, h, hres := p.step(t, p.stamp(ev("probe failed 1"))) // a repeat
		if !hres.Aggregated || h.Message != events.AggregatePrefix+"probe failed 1" || h.Count != 2 {
			t.Fatalf("herald: %+v, want the repeat aggregated with count 2", h)
		}
		if strings.HasPrefix(k.Message, events.AggregatePrefix) {
			k8sAggregated++
		} else {
			k8sPlain++
		}
	}
	t.Logf("client-go: repeat aggregated %d times, plain %d times of 100; herald: aggregated 100 times", k8sAggregated, k8sPlain)
	if k8sPlain == 0 {
		t.Error("client-go never let the repeat through as a plain event: the difference this test names is gone")
	}
}
