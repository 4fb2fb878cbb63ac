package metrics_test

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
)

const scope = "github.com/heraldgo/herald/metrics/test"

// otelReader returns a manual reader on a fresh provider, shut down at the
// end of the test.
func otelReader(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	r := sdkmetric.NewManualReader()
	p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	t.Cleanup(func() {
		if err := p.Shutdown(context.Background()); err != nil {
			t.Errorf("provider Shutdown: %v", err)
		}
	})
	return r, p
}

func collect(t *testing.T, r *sdkmetric.ManualReader) (metricdata.ResourceMetrics, error) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	err := r.Collect(context.Background(), &rm)
	return rm, err
}

func bAttrs(name string) attribute.Set {
	return attribute.NewSet(attribute.String("herald.broadcaster.name", name))
}

func wAttrs(b, w string) attribute.Set {
	return attribute.NewSet(attribute.String("herald.broadcaster.name", b), attribute.String("herald.watcher.name", w))
}

func point(attrs attribute.Set, v int64) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attrs, Value: v}
}

// sum builds the expected data of one instrument.
func sum(name, unit, desc string, monotonic bool, pts ...metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{
		Name:        name,
		Description: desc,
		Unit:        unit,
		Data: metricdata.Sum[int64]{
			DataPoints:  pts,
			Temporality: metricdata.CumulativeTemporality,
			IsMonotonic: monotonic,
		},
	}
}

// otelWant is the workload's collection, instrument by instrument.
func otelWant(w *workload) []metricdata.Metrics {
	var queued, ended []metricdata.DataPoint[int64]
	if hasLen(w.lossy) {
		queued = append(queued, point(wAttrs("orders", "latest"), 2), point(wAttrs("orders", "lossy"), 3))
	}
	if hasErr(w.lossy) {
		ended = append(ended, point(wAttrs("orders", "latest"), 0), point(wAttrs("orders", "lossy"), 0))
	}
	queued = append(queued, point(wAttrs("other", "fake"), 2))
	ended = append(ended, point(wAttrs("other", "fake"), 1))
	rec := bAttrs("recorder")
	ev := func(name, desc string, v int64) metricdata.Metrics {
		return sum("herald.events."+name, "{event}", desc, true, point(rec, v))
	}
	return []metricdata.Metrics{
		sum("herald.broadcast.published", "{value}", "Values the broadcaster accepted (Publish, PublishContext, TryPublish).", true,
			point(bAttrs("orders"), 10)),
		sum("herald.broadcast.dropped", "{value}", "Deliveries lost to the watchers' policies, over all watchers, stopped ones included.", true,
			point(bAttrs("orders"), 15)),
		sum("herald.broadcast.watchers", "{watcher}", "Watchers currently registered.", false,
			point(bAttrs("orders"), 2)),
		sum("herald.broadcast.watcher.dropped", "{value}", "Values this watcher lost to its policy.", true,
			point(wAttrs("orders", "latest"), 8), point(wAttrs("orders", "lossy"), 7), point(wAttrs("other", "fake"), 5)),
		sum("herald.broadcast.watcher.queued", "{value}", "Values queued for this watcher and not yet received.", false, queued...),
		sum("herald.broadcast.watcher.ended", "{watcher}", "1 once the watcher was ended by eviction, Shutdown or its context (its Err is not nil), else 0.", false, ended...),
		ev("recorded", "Events the Recorders accepted.", 2),
		ev("invalid", "Events the Recorders refused as invalid (a type other than Normal or Warning, for one).", 1),
		ev("dropped", "Events lost before a watcher or sink saw them (a full queue, or recorded after Shutdown).", 0),
		ev("skipped", "Events the spam filter kept from a sink.", 0),
		ev("aggregated", "Events written as part of an aggregate event.", 0),
		ev("written", "Events a sink stored.", 0),
		ev("failed", "Events a sink did not store, or a watcher did not handle: rejected, out of tries, given up, or discarded at Stop.", 0),
		ev("abandoned", "Events still queued or being retried when Shutdown's context ended.", 0),
		ev("handled", "Events given to the handlers of StartEventWatcher, StartLogging and StartStructuredLogging.", 2),
	}
}

func TestOTelCollect(t *testing.T) {
	w := newWorkload(t)
	r, p := otelReader(t)
	reg, err := w.c.RegisterOTel(p.Meter(scope))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := reg.Unregister(); err != nil {
			t.Error(err)
		}
	}()

	rm, err := collect(t, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.ScopeMetrics) != 1 {
		t.Fatalf("got %d scopes, want 1", len(rm.ScopeMetrics))
	}
	want := metricdata.ScopeMetrics{Metrics: otelWant(w)}
	want.Scope.Name = scope
	metricdatatest.AssertEqual(t, want, rm.ScopeMetrics[0], metricdatatest.IgnoreTimestamp())
}

// TestOTelReadsAtCollection checks that figures are read at each
// collection, and that Unregister stops the measurements.
func TestOTelReadsAtCollection(t *testing.T) {
	w := newWorkload(t)
	r, p := otelReader(t)
	reg, err := w.c.RegisterOTel(p.Meter(scope))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := w.b.Publish(100 + i); err != nil {
			t.Fatal(err)
		}
	}
	rm, err := collect(t, r)
	if err != nil {
		t.Fatal(err)
	}
	if got := valueOf(t, rm, "herald.broadcast.published", bAttrs("orders")); got != 15 {
		t.Errorf("published = %d, want 15", got)
	}
	if got := valueOf(t, rm, "herald.broadcast.watcher.dropped", wAttrs("orders", "lossy")); got != 12 {
		t.Errorf("lossy dropped = %d, want 12", got)
	}

	if err := reg.Unregister(); err != nil {
		t.Fatal(err)
	}
	rm, err = collect(t, r)
	if err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && len(s.DataPoints) > 0 {
				t.Errorf("after Unregister, %s still has %d points", m.Name, len(s.DataPoints))
			}
		}
	}
}

// TestOTelPanickingSource checks that a panicking source makes the
// collection report an error and leaves the other sources observed.
func TestOTelPanickingSource(t *testing.T) {
	w := newWorkload(t)
	w.c.Add("broken", panicSource{})
	r, p := otelReader(t)
	reg, err := w.c.RegisterOTel(p.Meter(scope))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reg.Unregister() }()
	rm, err := collect(t, r)
	if err == nil || !strings.Contains(err.Error(), "metrics: a source panicked during collection: boom") {
		t.Fatalf("Collect error = %v, want the source's panic", err)
	}
	if got := valueOf(t, rm, "herald.broadcast.published", bAttrs("orders")); got != 10 {
		t.Errorf("published = %d, want 10", got)
	}
}

func valueOf(t *testing.T, rm metricdata.ResourceMetrics, name string, attrs attribute.Set) int64 {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			s, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				t.Fatalf("%s: data %T, want Sum[int64]", name, m.Data)
			}
			for _, dp := range s.DataPoints {
				if dp.Attributes.Equals(&attrs) {
					return dp.Value
				}
			}
		}
	}
	t.Fatalf("%s %v: no data point", name, attrs.ToSlice())
	return 0
}
