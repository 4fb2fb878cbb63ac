package metrics

import "github.com/heraldgo/herald/events"

// SinkStats returns the figures of one sink or watcher started on b (the
// Stopper its Start method returned), as an [EventsSource] to register
// with [Collector.AddEvents] under a name of its own, so that each sink
// has its own herald_events_* series beside the broadcaster's sums:
//
//	st, _ := b.StartRecordingToSink(apiServer)
//	c.AddEvents("recorder", b)                                  // all sinks
//	c.AddEvents("recorder/apiserver", metrics.SinkStats(b, st)) // this one
//
// The figures are [events.Broadcaster.StatsOf]'s: zero for a Stopper that
// b did not start. A nil b or s panics.
func SinkStats(b *events.Broadcaster, s events.Stopper) EventsSource {
	if b == nil || s == nil {
		panic("metrics: SinkStats: nil broadcaster or stopper")
	}
	return sinkSource{b: b, s: s}
}

type sinkSource struct {
	b *events.Broadcaster
	s events.Stopper
}

func (s sinkSource) Stats() events.Stats {
	st, _ := s.b.StatsOf(s.s)
	return st
}
