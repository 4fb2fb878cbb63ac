package metrics

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
)

// RegisterOTel creates herald's observable instruments on m and registers a
// callback that reads every source of c when m's provider collects. Nothing
// runs between collections. Unregister the returned Registration to stop
// (the instruments stay, with no more measurements). Call it once per
// Meter: the instruments of a second call on the same Meter would report
// the same figures twice.
//
// An error creating an instrument or registering the callback is returned
// as is. During a collection, a source whose method panics is skipped and
// reported through the callback's error, which the OpenTelemetry SDK hands
// to its error handler; the other sources are still observed.
func (c *Collector) RegisterOTel(m metric.Meter) (metric.Registration, error) {
	if m == nil {
		panic("metrics: RegisterOTel: the Meter must not be nil")
	}
	fs := families()
	counters := make(map[*family]metric.Int64Observable, len(fs))
	insts := make([]metric.Observable, 0, len(fs))
	for _, f := range fs {
		var inst metric.Int64Observable
		var err error
		if f.counter {
			inst, err = m.Int64ObservableCounter(f.otel, metric.WithUnit(f.unit), metric.WithDescription(f.help))
		} else {
			inst, err = m.Int64ObservableUpDownCounter(f.otel, metric.WithUnit(f.unit), metric.WithDescription(f.help))
		}
		if err != nil {
			return nil, fmt.Errorf("metrics: creating instrument %s: %w", f.otel, err)
		}
		counters[f] = inst
		insts = append(insts, inst)
	}
	return m.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		samples, errs := c.snapshot()
		for _, s := range samples {
			o.ObserveInt64(counters[s.fam], s.value, metric.WithAttributeSet(s.attrs))
		}
		var all []error
		for _, e := range errs {
			all = append(all, e.err)
		}
		return errors.Join(all...)
	}, insts...)
}
