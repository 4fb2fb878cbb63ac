package metrics_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/metrics"
	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// benchCollector: 10 broadcasters with 100 watchers each, the size of a
// busy service.
func benchCollector(b *testing.B) *metrics.Collector {
	c := metrics.NewCollector()
	for i := range 10 {
		bc := broadcast.New[int]()
		b.Cleanup(func() { _ = bc.Shutdown(context.Background()) })
		name := fmt.Sprintf("b%d", i)
		c.Add(name, bc)
		for j := range 100 {
			w, err := bc.Watch()
			if err != nil {
				b.Fatal(err)
			}
			c.AddWatcher(name, fmt.Sprintf("w%d", j), w)
		}
	}
	return c
}

// BenchmarkPrometheusGather: one scrape's worth of work (Gather, without
// the text encoding) for 10 broadcasters and 1000 watchers.
func BenchmarkPrometheusGather(b *testing.B) {
	c := benchCollector(b)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	for b.Loop() {
		if _, err := reg.Gather(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOTelCollect: one OpenTelemetry collection through a
// ManualReader for the same sources.
func BenchmarkOTelCollect(b *testing.B) {
	c := benchCollector(b)
	r := sdkmetric.NewManualReader()
	p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	if _, err := c.RegisterOTel(p.Meter("bench")); err != nil {
		b.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	for b.Loop() {
		if err := r.Collect(context.Background(), &rm); err != nil {
			b.Fatal(err)
		}
	}
}
