package metrics_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A broadcaster and one of its watchers exported to Prometheus: 10 values
// published to a Drop watcher with room for 3.
func ExampleCollector_prometheus() {
	b := broadcast.New[int]()
	defer b.Shutdown(context.Background())
	w, _ := b.Watch(broadcast.WithPolicy(broadcast.Drop), broadcast.WithQueueLength(3))

	c := metrics.NewCollector()
	c.Add("orders", b)
	c.AddWatcher("orders", "ui", w)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c) // or prometheus.MustRegister(c), served by promhttp.Handler()

	for i := range 10 {
		_ = b.Publish(i)
	}

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "herald_broadcast_") {
			_, _ = expfmt.MetricFamilyToText(os.Stdout, mf)
		}
	}
	// Output:
	// # HELP herald_broadcast_dropped_total Deliveries lost to the watchers' policies, over all watchers, stopped ones included.
	// # TYPE herald_broadcast_dropped_total counter
	// herald_broadcast_dropped_total{broadcaster="orders"} 7
	// # HELP herald_broadcast_published_total Values the broadcaster accepted (Publish, PublishContext, TryPublish).
	// # TYPE herald_broadcast_published_total counter
	// herald_broadcast_published_total{broadcaster="orders"} 10
	// # HELP herald_broadcast_watcher_dropped_total Values this watcher lost to its policy.
	// # TYPE herald_broadcast_watcher_dropped_total counter
	// herald_broadcast_watcher_dropped_total{broadcaster="orders",watcher="ui"} 7
	// # HELP herald_broadcast_watcher_ended 1 once the watcher was ended by eviction, Shutdown or its context (its Err is not nil), else 0.
	// # TYPE herald_broadcast_watcher_ended gauge
	// herald_broadcast_watcher_ended{broadcaster="orders",watcher="ui"} 0
	// # HELP herald_broadcast_watcher_queued Values queued for this watcher and not yet received.
	// # TYPE herald_broadcast_watcher_queued gauge
	// herald_broadcast_watcher_queued{broadcaster="orders",watcher="ui"} 3
	// # HELP herald_broadcast_watchers Watchers currently registered.
	// # TYPE herald_broadcast_watchers gauge
	// herald_broadcast_watchers{broadcaster="orders"} 1
}

// The same figures as OpenTelemetry observable instruments, read when the
// provider's reader collects (a ManualReader here; a PeriodicReader with an
// OTLP exporter in a service).
func ExampleCollector_RegisterOTel() {
	b := broadcast.New[int]()
	defer b.Shutdown(context.Background())
	_, _ = b.Watch(broadcast.WithPolicy(broadcast.Drop), broadcast.WithQueueLength(3))

	c := metrics.NewCollector()
	c.Add("orders", b)

	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	reg, err := c.RegisterOTel(provider.Meter("example"))
	if err != nil {
		panic(err)
	}
	defer reg.Unregister()

	for i := range 10 {
		_ = b.Publish(i)
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, m := range rm.ScopeMetrics[0].Metrics {
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			name, _ := dp.Attributes.Value("herald.broadcaster.name")
			fmt.Printf("%s %s %s=%d\n", m.Name, m.Unit, name.AsString(), dp.Value)
		}
	}
	// Output:
	// herald.broadcast.published {value} orders=10
	// herald.broadcast.dropped {value} orders=7
	// herald.broadcast.watchers {watcher} orders=1
}
