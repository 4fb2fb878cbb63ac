// Package metrics exports herald's counters to Prometheus and to
// OpenTelemetry, so that operators see on a dashboard what
// [broadcast.Broadcaster.Stats], [broadcast.Watcher.Dropped] and
// [events.Broadcaster.Stats] tell a program.
//
// It is a module of its own (github.com/heraldgo/herald/metrics): the
// herald module itself imports no metrics library, and a program that does
// not want metrics does not download one.
//
// # Usage
//
// Register what you want to see in a [Collector] under a name of your
// choice, which becomes the broadcaster label (Prometheus) or the
// herald.broadcaster.name attribute (OpenTelemetry):
//
//	c := metrics.NewCollector()
//	c.Add("orders", orders)                // any *broadcast.Broadcaster[T]
//	c.AddWatcher("orders", "audit", audit) // any *broadcast.Watcher[T]
//	c.AddEvents("recorder", eventBroadcaster)
//	c.AddLink("orders/out", link)          // any *natsbridge.Link (see [Link])
//
// Then hand the Collector to either ecosystem, or to both:
//
//	prometheus.MustRegister(c)     // c is a prometheus.Collector
//	reg, err := c.RegisterOTel(meter) // observable instruments on an OpenTelemetry Meter
//
// [Collector.Remove], [Collector.RemoveWatcher] and [Collector.RemoveEvents]
// take a source out again, for instance when a watcher stops.
//
// # Cost
//
// Nothing is added to the publish or record path: the figures are read when
// a scrape or an OpenTelemetry collection asks for them, by calling
// Stats(), Dropped() (and Len() and Err() where the watcher has them) on each
// registered source. A collection with B broadcasters, W watchers and E
// event broadcasters costs B+E Stats calls and W watcher calls.
//
// # Names
//
// Prometheus, with a broadcaster label (and a watcher label for per-watcher
// figures); counters end in _total, gauges do not:
//
//	herald_broadcast_published_total          counter  values accepted by Publish, PublishContext, TryPublish
//	herald_broadcast_dropped_total            counter  deliveries lost to policies, all watchers
//	herald_broadcast_watchers                 gauge    watchers currently registered
//	herald_broadcast_watcher_dropped_total    counter  values one watcher lost to its policy
//	herald_broadcast_watcher_queued           gauge    values queued for one watcher (watchers with Len() int)
//	herald_broadcast_watcher_ended            gauge    1 once a watcher was ended (watchers with Err() error)
//	herald_events_recorded_total              counter  and invalid, dropped, skipped, aggregated,
//	                                                   written, failed, abandoned, handled: events.Stats
//	herald_natsbridge_link_sent_total         counter  and received, failed, dropped, lost: LinkStats, link label
//	herald_natsbridge_link_pending            gauge    LinkStats.Pending
//	herald_natsbridge_link_up                 gauge    1 until the link's Done() is closed
//	herald_natsbridge_link_ended              gauge    1 once the link's Err() is not nil
//
// OpenTelemetry uses the dotted names (herald.broadcast.published,
// herald.broadcast.watcher.dropped, herald.events.written, ...) with no
// _total suffix, units {value}, {watcher} and {event}, and the attributes
// herald.broadcaster.name and herald.watcher.name. Counters are observable
// counters (monotonic sums); the gauges are observable up-down counters,
// whose sums over broadcasters or watchers mean something (watchers
// registered, values queued, watchers ended).
//
// # Resets
//
// A source that is removed and added again under the same name starts again
// from its own counts. Both ecosystems treat a counter that goes down as a
// reset, so rates stay right.
//
// # Concurrency
//
// A Collector is safe for concurrent use: sources may be added and removed
// while a scrape runs. The sources' methods are called without the
// Collector's lock held. A source whose method panics during a collection
// is reported as a collection error (an invalid metric for Prometheus, an
// error from the callback for OpenTelemetry) and the other sources are still
// collected.
package metrics
