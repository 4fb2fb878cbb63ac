package metrics_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/metrics"
	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// TestConcurrentAddRemoveAndCollect adds and removes sources while both
// exporters collect; run with -race.
func TestConcurrentAddRemoveAndCollect(t *testing.T) {
	c := metrics.NewCollector()
	b := broadcast.New[int]()
	defer b.Shutdown(context.Background())
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	r := sdkmetric.NewManualReader()
	p := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	defer p.Shutdown(context.Background())
	if _, err := c.RegisterOTel(p.Meter(scope)); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				name := fmt.Sprintf("b%d-%d", g, i)
				c.Add(name, b)
				c.AddWatcher(name, "w", &fakeWatcher{dropped: uint64(i)})
				_ = b.Publish(i)
				c.RemoveWatcher(name, "w")
				c.Remove(name)
			}
		})
	}
	wg.Go(func() {
		for range 50 {
			if _, err := reg.Gather(); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Go(func() {
		for range 50 {
			var rm metricdata.ResourceMetrics
			if err := r.Collect(context.Background(), &rm); err != nil {
				t.Error(err)
				return
			}
		}
	})
	wg.Wait()

	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != 0 {
		t.Errorf("after every source was removed, %d families remain", len(mfs))
	}
}

// reentrantSource removes itself from its Collector while being read: the
// Collector must not hold its lock while calling a source.
type reentrantSource struct {
	c    *metrics.Collector
	name string
}

func (s reentrantSource) Stats() broadcast.Stats {
	s.c.Remove(s.name)
	return broadcast.Stats{Published: 42}
}

func TestSourceMayCallTheCollector(t *testing.T) {
	c := metrics.NewCollector()
	c.Add("self", reentrantSource{c, "self"})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather() // deadlocks if Stats ran under the Collector's lock
	if err != nil {
		t.Fatal(err)
	}
	var got float64
	for _, mf := range mfs {
		if mf.GetName() == "herald_broadcast_published_total" {
			got = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if got != 42 {
		t.Errorf("published = %v, want 42 from the source read before it removed itself", got)
	}
	if mfs, _ := reg.Gather(); len(mfs) != 0 {
		t.Errorf("the source removed itself; %d families remain", len(mfs))
	}
}
