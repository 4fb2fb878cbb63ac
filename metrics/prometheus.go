package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
)

// promDescs holds one prometheus.Desc per family; they are the same for
// every Collector, since the names of sources are label values.
var promDescs = func() map[*family]*prometheus.Desc {
	m := make(map[*family]*prometheus.Desc)
	for _, f := range families() {
		m[f] = prometheus.NewDesc(f.prom, f.help, f.labels, nil)
	}
	return m
}()

// Describe sends the descriptions of every family c can export, making c a
// prometheus.Collector. A family whose sources are absent (no watcher
// with Len, say) is described but has no series.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families() {
		ch <- promDescs[f]
	}
}

// Collect reads every registered source and sends its figures as constant
// metrics, making c a prometheus.Collector. A source whose method panics is
// sent as an invalid metric, which makes the scrape report an error (or, with
// promhttp.ContinueOnError, skip that source).
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	samples, errs := c.snapshot()
	for _, s := range samples {
		vt := prometheus.GaugeValue
		if s.fam.counter {
			vt = prometheus.CounterValue
		}
		ch <- prometheus.MustNewConstMetric(promDescs[s.fam], vt, float64(s.value), s.labels...)
	}
	for _, e := range errs {
		ch <- prometheus.NewInvalidMetric(promDescs[e.fam], e.err)
	}
}

var _ prometheus.Collector = (*Collector)(nil)
