package events_test

// FuzzCorrelator feeds a Correlator a stream of events decoded from the
// fuzz input (few sources, objects, reasons, messages, both types, repeats,
// clock steps, UpdateState calls) and checks every decision against a model
// written from the documented rules (the package doc's guarantees 1–3, the
// CorrelatorOptions and Correlate doc comments), not from the code:
//
//   - de-duplication: an event seen before (same source, object without
//     resource version, type, reason, field path and message) is a Patch
//     with the first's Name, FirstTimestamp and ResourceVersion (or those
//     UpdateState recorded last) and Count one more than the last;
//   - aggregation: a group (source, object without field path, type,
//     reason, reporting controller and instance) counts distinct messages;
//     the MaxEvents-th distinct one and every similar event after it are the
//     group's aggregate event, until a gap of more than MaxInterval between
//     similar events starts the group over; the aggregate is named
//     "<object name>.<hex nanos>" at its creation, the nanos those of the
//     clock or one more than the previous aggregate name's, whichever is
//     larger, and carries MessageFunc's message for the newest event and no
//     annotations;
//   - the spam filter is a token bucket per source, object and type,
//     BurstSize tokens, one more per 1/QPS, run last, so a skipped event
//     still counts;
//   - each of the three caches holds LRUCacheSize keys and forgets the least
//     recently used first.
//
// Three modes: de-duplication and aggregation with the spam filter
// effectively off (a huge BurstSize), the spam filter alone (aggregation
// Disabled), and everything together. The correlator's clock is
// CorrelatorOptions.Now, stepped by the input; some events carry timestamps
// an hour old, to check that decisions read the clock, not the event.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/events"
)

var (
	fzSources = []events.Source{{Component: "kubelet", Host: "node-1"}, {Component: "scheduler"}}
	fzObjects = []events.ObjectReference{
		{Kind: "Pod", Namespace: "ns", Name: "web-1", UID: "u1", APIVersion: "v1"},
		{Kind: "Pod", Namespace: "ns", Name: "web-2", UID: "u2", APIVersion: "v1"},
		{Kind: "Node", Name: "node-1", UID: "n1", APIVersion: "v1"},
		{Kind: "Pod", Namespace: "other", Name: "web-1", UID: "u3", APIVersion: "v1"},
	}
	fzReasons  = []string{"BackOff", "Pulled", "Unhealthy", ""}
	fzMessages = []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", ""}
	fzTypes    = []string{events.Normal, events.Warning}

	fzMaxEvents    = []int{1, 2, 5, events.DefaultMaxEvents} // 10 is out of reach of 8 messages: aggregation off
	fzBursts       = []int{1, 2, 5, events.DefaultBurstSize}
	fzPeriods      = []time.Duration{time.Second, 300 * time.Second, 2 * time.Second, 100 * time.Millisecond}
	fzLRUSizes     = []int{1, 2, 4, events.DefaultLRUCacheSize}
	fzMaxIntervals = []time.Duration{events.DefaultMaxInterval, time.Minute, time.Second}
	fzStart        = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

const fzMaxOps = 256

// fzConfig is the first three bytes of an input.
type fzConfig struct {
	mode        int // 0 dedupe+aggregation, 1 spam filter only, 2 all
	maxEvents   int // <= 0: off
	burst       int // <= 0: off
	period      time.Duration
	lruSize     int
	maxInterval time.Duration
	customMsg   bool
}

func decodeConfig(b []byte) fzConfig {
	c := fzConfig{
		mode:        int(b[0]) % 3,
		maxEvents:   fzMaxEvents[b[1]&3],
		burst:       fzBursts[b[1]>>2&3],
		period:      fzPeriods[b[2]&3],
		lruSize:     fzLRUSizes[b[2]>>2&3],
		maxInterval: fzMaxIntervals[int(b[2]>>4&3)%len(fzMaxIntervals)],
		customMsg:   b[1]>>4&1 == 1,
	}
	switch c.mode {
	case 0:
		c.burst = 1 << 30 // never runs out in a fuzz input
	case 1:
		c.maxEvents = events.Disable
	}
	return c
}

func (c fzConfig) options(now func() time.Time) events.CorrelatorOptions {
	o := events.CorrelatorOptions{
		LRUCacheSize: c.lruSize, BurstSize: c.burst, QPS: 1 / c.period.Seconds(),
		MaxEvents: c.maxEvents, MaxInterval: c.maxInterval, Now: now,
	}
	if c.customMsg {
		o.MessageFunc = fzMessageFunc
	}
	return o
}

func fzMessageFunc(e *events.Event) string { return "agg " + e.Reason + ": " + e.Message }

// fzOp is one op: an event, the clock step before it, and whether the
// result is then given back to UpdateState (as a sink's answer).
type fzOp struct {
	src, obj, typ, reason, msg int
	step                       int
	update, fieldPath, old     bool
	annotated                  bool
}

func decodeOp(b0, b1 byte) fzOp {
	return fzOp{
		src: int(b0 & 1), obj: int(b0 >> 1 & 3), typ: int(b0 >> 3 & 1), reason: int(b0 >> 4 & 3),
		msg:       int(b0>>6&3) | int(b1>>3&1)<<2,
		step:      int(b1 & 7),
		update:    b1>>4&1 == 1,
		fieldPath: b1>>5&1 == 1,
		old:       b1>>6&1 == 1,
		annotated: b1>>7&1 == 1,
	}
}

func (c fzConfig) stepOf(i int) time.Duration {
	return []time.Duration{0, time.Millisecond, time.Second, 7 * time.Second, time.Minute, 5 * time.Minute,
		c.maxInterval, c.maxInterval + time.Millisecond}[i]
}

// mlru is the model of a cache: keys least recent first.
type mlru[V any] struct {
	max  int
	keys []string
	vals map[string]*V
}

func newMLRU[V any](max int) *mlru[V] { return &mlru[V]{max: max, vals: map[string]*V{}} }

// touch returns k's value, making k the most recent; an absent k is inserted
// (evicting the least recent key of a full cache) with a zero value.
func (l *mlru[V]) touch(k string) (*V, bool) {
	if v, ok := l.vals[k]; ok {
		i := slices.Index(l.keys, k)
		l.keys = append(slices.Delete(l.keys, i, i+1), k)
		return v, true
	}
	if len(l.keys) == l.max {
		delete(l.vals, l.keys[0])
		l.keys = slices.Delete(l.keys, 0, 1)
	}
	l.keys = append(l.keys, k)
	v := new(V)
	l.vals[k] = v
	return v, false
}

type fzGroup struct {
	last        time.Time
	aggregating bool
	messages    map[string]bool
}

type fzRecord struct {
	count int32
	first time.Time
	name  string
	rv    string
}

type fzBucket struct {
	credit time.Duration // tokens × period
	last   time.Time
}

type fzModel struct {
	c    fzConfig
	agg  *mlru[fzGroup]
	seen *mlru[fzRecord]
	spam *mlru[fzBucket]
	// lastNanos is the nanoseconds in the latest aggregate name made.
	lastNanos int64
}

func join(s ...string) string { return strings.Join(s, "\x00") }

func objKey(o *events.ObjectReference) string {
	return join(o.Kind, o.Namespace, o.Name, o.UID, o.APIVersion)
}

func groupKey(e *events.Event) string {
	return join(e.Source.Component, e.Source.Host, objKey(&e.InvolvedObject), e.Type, e.Reason, e.ReportingController, e.ReportingInstance)
}

func plainKey(e *events.Event) string {
	return join("plain", e.Source.Component, e.Source.Host, objKey(&e.InvolvedObject), e.Type, e.Reason, e.InvolvedObject.FieldPath, e.Message)
}

func spamKeyOf(e *events.Event) string {
	return join(e.Source.Component, e.Source.Host, objKey(&e.InvolvedObject), e.Type)
}

// fzPrediction is what the model expects of one Correlate call.
type fzPrediction struct {
	Skip, Aggregated, Patch bool
	Event                   *events.Event // nil when skipped
}

func (m *fzModel) correlate(e *events.Event, now time.Time) fzPrediction {
	var p fzPrediction
	// 1. Aggregation.
	if m.c.maxEvents > 0 {
		g, found := m.agg.touch(groupKey(e))
		if !found || now.Sub(g.last) > m.c.maxInterval {
			*g = fzGroup{messages: map[string]bool{}}
		}
		g.last = now
		if g.aggregating {
			p.Aggregated = true
		} else {
			g.messages[e.Message] = true
			if len(g.messages) >= m.c.maxEvents {
				g.aggregating, g.messages, p.Aggregated = true, nil, true
			}
		}
	}
	// 2. De-duplication.
	out := e.Clone()
	key := plainKey(e)
	if p.Aggregated {
		key = join("aggregate", groupKey(e))
		msg := events.AggregatePrefix + e.Message
		if m.c.customMsg {
			msg = fzMessageFunc(e)
		}
		out = &events.Event{
			Namespace: e.Namespace, InvolvedObject: e.InvolvedObject, Reason: e.Reason, Message: msg,
			Type: e.Type, Source: e.Source, LastTimestamp: now,
			ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
			FirstTimestamp: now, Count: 1,
		}
	}
	rec, found := m.seen.touch(key)
	if found && rec.count > 0 {
		p.Patch = true
		out.Count, out.FirstTimestamp, out.Name, out.ResourceVersion = rec.count+1, rec.first, rec.name, rec.rv
	} else if p.Aggregated {
		m.lastNanos = max(now.UnixNano(), m.lastNanos+1)
		out.Name = fmt.Sprintf("%s.%x", e.InvolvedObject.Name, m.lastNanos)
	}
	*rec = fzRecord{count: out.Count, first: out.FirstTimestamp, name: out.Name, rv: out.ResourceVersion}
	// 3. Spam filter.
	if m.c.burst > 0 {
		full := time.Duration(m.c.burst) * m.c.period
		b, found := m.spam.touch(spamKeyOf(e))
		if !found {
			*b = fzBucket{credit: full, last: now}
		}
		credit := b.credit
		if now.After(b.last) {
			credit = min(full, credit+now.Sub(b.last))
		}
		if credit >= m.c.period {
			b.credit, b.last = credit-m.c.period, now
		} else {
			p.Skip = true
		}
	}
	if p.Skip {
		p.Patch = false // nothing to write
	} else {
		p.Event = out
	}
	return p
}

func (m *fzModel) updateState(e *events.Event) {
	rec, _ := m.seen.touch(plainKey(e))
	*rec = fzRecord{count: e.Count, first: e.FirstTimestamp, name: e.Name, rv: e.ResourceVersion}
}

func FuzzCorrelator(f *testing.F) {
	// More seeds live in testdata/fuzz/FuzzCorrelator.
	f.Add([]byte{0, 3, 0, 0x00, 0x02, 0x00, 0x02, 0x40, 0x02})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 3 {
			return
		}
		cfg := decodeConfig(data)
		now := fzStart
		c := events.NewCorrelator(cfg.options(func() time.Time { return now }))
		m := &fzModel{c: cfg, agg: newMLRU[fzGroup](cfg.lruSize), seen: newMLRU[fzRecord](cfg.lruSize), spam: newMLRU[fzBucket](cfg.lruSize)}
		rv := 0
		// explain describes ops 0..n, only when a check fails: formatting
		// every op would slow fuzzing (and minimizing) down.
		explain := func(n int) string {
			cfg := decodeConfig(data)
			var b strings.Builder
			for i := 0; i <= n; i++ {
				op := decodeOp(data[3+2*i], data[3+2*i+1])
				fmt.Fprintf(&b, "%d: +%v src=%d obj=%d fp=%v %s %q %q old=%v annotated=%v update=%v\n", i, cfg.stepOf(op.step),
					op.src, op.obj, op.fieldPath, fzTypes[op.typ], fzReasons[op.reason], fzMessages[op.msg], op.old, op.annotated, op.update)
			}
			return b.String()
		}
		for i := 0; 3+2*i+1 < len(data) && i < fzMaxOps; i++ {
			op := decodeOp(data[3+2*i], data[3+2*i+1])
			now = now.Add(cfg.stepOf(op.step))
			obj := fzObjects[op.obj]
			if op.fieldPath {
				obj.FieldPath = "spec.containers{app}"
			}
			ts := now
			if op.old {
				ts = now.Add(-time.Hour)
			}
			e := newEvent(obj, fzTypes[op.typ], fzReasons[op.reason], fzMessages[op.msg], ts)
			e.Source = fzSources[op.src]
			e.ReportingController, e.ReportingInstance = e.Source.Component, e.Source.Host
			e.Name = fmt.Sprintf("%s.%x", obj.Name, i)
			if op.annotated {
				e.Annotations = map[string]string{"op": fmt.Sprint(i)}
			}
			in := e.Clone()

			want := m.correlate(e, now)
			res, err := c.Correlate(e)
			if err != nil {
				t.Fatalf("op %d: Correlate: %v", i, err)
			}
			got := fzPrediction{Skip: res.Skip, Aggregated: res.Aggregated, Patch: res.Patch != nil, Event: res.Event}
			if !predictionsEqual(want, got) {
				t.Fatalf("config %+v, op %d (-model +correlator):\n%s\nops:\n%s", cfg, i, cmp.Diff(want, got), explain(i))
			}
			if !eventsEqual(in, e) {
				t.Fatalf("op %d: Correlate changed its input (-before +after):\n%s", i, cmp.Diff(in, e))
			}
			if res.Patch != nil {
				wantPatch := events.Patch{Count: res.Event.Count, LastTimestamp: res.Event.LastTimestamp, Message: res.Event.Message}
				if diff := cmp.Diff(wantPatch, *res.Patch); diff != "" {
					t.Fatalf("op %d: Patch does not match Event (-want +got):\n%s", i, diff)
				}
			}
			if res.Event != nil && res.Event.Annotations != nil && e.Annotations != nil {
				res.Event.Annotations["op"] = "changed" // the result is the caller's own
				if e.Annotations["op"] == "changed" {
					t.Fatalf("op %d: the result shares its Annotations with the input", i)
				}
			}
			if op.update && res.Event != nil {
				rv++
				stored := res.Event.Clone()
				stored.ResourceVersion = fmt.Sprint("rv", rv)
				c.UpdateState(stored)
				m.updateState(stored)
			}
		}
	})
}

// predictionsEqual is cmp.Equal for predictions, without reflection (which
// made up most of an execution's time).
func predictionsEqual(a, b fzPrediction) bool {
	return a.Skip == b.Skip && a.Aggregated == b.Aggregated && a.Patch == b.Patch && eventsEqual(a.Event, b.Event)
}

func eventsEqual(a, b *events.Event) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Name == b.Name && a.Namespace == b.Namespace && a.InvolvedObject == b.InvolvedObject &&
		a.Reason == b.Reason && a.Message == b.Message && a.Type == b.Type && a.Source == b.Source &&
		a.FirstTimestamp.Equal(b.FirstTimestamp) && a.LastTimestamp.Equal(b.LastTimestamp) && a.Count == b.Count &&
		(a.Annotations == nil) == (b.Annotations == nil) && maps.Equal(a.Annotations, b.Annotations) &&
		a.ResourceVersion == b.ResourceVersion && a.ReportingController == b.ReportingController &&
		a.ReportingInstance == b.ReportingInstance
}
