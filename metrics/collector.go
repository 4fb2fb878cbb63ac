package metrics

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/events"
	"go.opentelemetry.io/otel/attribute"
)

// Source is what a [Collector] reads a broadcaster's figures from. Every
// *[broadcast.Broadcaster][T] is one, whatever T is.
type Source interface {
	Stats() broadcast.Stats
}

// Watcher is what a [Collector] reads one watcher's figures from. Every
// *[broadcast.Watcher][T] is one, whatever T is.
//
// Two more methods are used when the watcher has them: Len() int, the
// values queued for it now, is exported as herald_broadcast_watcher_queued;
// Err() error, why the watcher ended, as herald_broadcast_watcher_ended (1
// once Err returns non-nil). A watcher without them simply has no such
// series.
type Watcher interface {
	Dropped() uint64
}

// EventsSource is what a [Collector] reads an event broadcaster's figures
// from. Every *[events.Broadcaster] is one.
type EventsSource interface {
	Stats() events.Stats
}

// The optional watcher methods, detected by type assertion so that a
// watcher type gains its series by gaining the method.
type (
	lener interface{ Len() int }
	errer interface{ Err() error }
)

// The label (Prometheus) and attribute (OpenTelemetry) names.
const (
	labelBroadcaster = "broadcaster"
	labelWatcher     = "watcher"
	attrBroadcaster  = "herald.broadcaster.name"
	attrWatcher      = "herald.watcher.name"
)

// A Collector holds named herald sources and exports their figures at
// collection time to Prometheus (it is a prometheus.Collector) and to
// OpenTelemetry ([Collector.RegisterOTel]). Create one with [NewCollector];
// the zero Collector is ready to use too. It must not be copied after first
// use.
type Collector struct {
	mu           sync.Mutex // guards the four maps, not the sources' calls
	broadcasters map[string]*broadcasterEntry
	watchers     map[watcherKey]*watcherEntry
	events       map[string]*eventsEntry
	links        map[string]*linkEntry
}

type watcherKey struct{ broadcaster, watcher string }

type broadcasterEntry struct {
	name  string
	src   Source
	attrs attribute.Set
}

type watcherEntry struct {
	key   watcherKey
	w     Watcher
	attrs attribute.Set
}

type eventsEntry struct {
	name  string
	src   EventsSource
	attrs attribute.Set
}

// NewCollector returns an empty Collector.
func NewCollector() *Collector { return &Collector{} }

// Add registers the broadcaster s under name, the value of its broadcaster
// label. An empty name, a nil s or a name already added panics: each is a
// mistake in the program, and two sources under one name would make two
// series with the same labels.
func (c *Collector) Add(name string, s Source) {
	if name == "" {
		panic("metrics: Add: the name must not be empty")
	}
	if s == nil {
		panic("metrics: Add: the source must not be nil")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.broadcasters[name]; ok {
		panic(fmt.Sprintf("metrics: Add: a broadcaster named %q was already added", name))
	}
	if c.broadcasters == nil {
		c.broadcasters = make(map[string]*broadcasterEntry)
	}
	c.broadcasters[name] = &broadcasterEntry{
		name:  name,
		src:   s,
		attrs: attribute.NewSet(attribute.String(attrBroadcaster, name)),
	}
}

// Remove takes the broadcaster named name out of c; its series disappear
// from the next collection. Removing a name not added does nothing. The
// watchers added under that broadcaster stay until removed themselves.
func (c *Collector) Remove(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.broadcasters, name)
}

// AddWatcher registers the watcher w of the broadcaster named broadcaster
// under the name watcher (its watcher label). The broadcaster need not be
// added itself. Empty names, a nil w or a pair of names already added
// panic.
func (c *Collector) AddWatcher(broadcaster, watcher string, w Watcher) {
	if broadcaster == "" || watcher == "" {
		panic("metrics: AddWatcher: the names must not be empty")
	}
	if w == nil {
		panic("metrics: AddWatcher: the watcher must not be nil")
	}
	k := watcherKey{broadcaster, watcher}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.watchers[k]; ok {
		panic(fmt.Sprintf("metrics: AddWatcher: a watcher named %q of broadcaster %q was already added", watcher, broadcaster))
	}
	if c.watchers == nil {
		c.watchers = make(map[watcherKey]*watcherEntry)
	}
	c.watchers[k] = &watcherEntry{
		key: k,
		w:   w,
		attrs: attribute.NewSet(
			attribute.String(attrBroadcaster, broadcaster),
			attribute.String(attrWatcher, watcher),
		),
	}
}

// RemoveWatcher takes the watcher added under these names out of c.
// Removing one not added does nothing.
func (c *Collector) RemoveWatcher(broadcaster, watcher string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.watchers, watcherKey{broadcaster, watcher})
}

// AddEvents registers the event broadcaster s under name, the value of its
// broadcaster label in the herald_events_* families. Names are separate
// from those of [Collector.Add]. An empty name, a nil s or a name already
// added panics.
func (c *Collector) AddEvents(name string, s EventsSource) {
	if name == "" {
		panic("metrics: AddEvents: the name must not be empty")
	}
	if s == nil {
		panic("metrics: AddEvents: the source must not be nil")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.events[name]; ok {
		panic(fmt.Sprintf("metrics: AddEvents: an event broadcaster named %q was already added", name))
	}
	if c.events == nil {
		c.events = make(map[string]*eventsEntry)
	}
	c.events[name] = &eventsEntry{
		name:  name,
		src:   s,
		attrs: attribute.NewSet(attribute.String(attrBroadcaster, name)),
	}
}

// RemoveEvents takes the event broadcaster named name out of c. Removing a
// name not added does nothing.
func (c *Collector) RemoveEvents(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.events, name)
}

// A family is one metric: its names and description in both ecosystems.
type family struct {
	prom    string   // Prometheus name, _total on counters
	otel    string   // OpenTelemetry instrument name
	unit    string   // OpenTelemetry unit (UCUM annotation)
	help    string   // both ecosystems' description
	counter bool     // monotonic; otherwise a gauge / up-down counter
	labels  []string // Prometheus label names, in the order of sample.labels
}

var broadcastLabels = []string{labelBroadcaster}
var watcherLabels = []string{labelBroadcaster, labelWatcher}

var (
	famPublished = &family{"herald_broadcast_published_total", "herald.broadcast.published", "{value}",
		"Values the broadcaster accepted (Publish, PublishContext, TryPublish).", true, broadcastLabels}
	famDropped = &family{"herald_broadcast_dropped_total", "herald.broadcast.dropped", "{value}",
		"Deliveries lost to the watchers' policies, over all watchers, stopped ones included.", true, broadcastLabels}
	famWatchers = &family{"herald_broadcast_watchers", "herald.broadcast.watchers", "{watcher}",
		"Watchers currently registered.", false, broadcastLabels}
	famWatcherDropped = &family{"herald_broadcast_watcher_dropped_total", "herald.broadcast.watcher.dropped", "{value}",
		"Values this watcher lost to its policy.", true, watcherLabels}
	famWatcherQueued = &family{"herald_broadcast_watcher_queued", "herald.broadcast.watcher.queued", "{value}",
		"Values queued for this watcher and not yet received.", false, watcherLabels}
	famWatcherEnded = &family{"herald_broadcast_watcher_ended", "herald.broadcast.watcher.ended", "{watcher}",
		"1 once the watcher was ended by eviction, Shutdown or its context (its Err is not nil), else 0.", false, watcherLabels}
)

// eventsField is one counter of events.Stats.
type eventsField struct {
	fam *family
	get func(events.Stats) uint64
}

func eventsFamily(name, help string) *family {
	return &family{"herald_events_" + name + "_total", "herald.events." + name, "{event}", help, true, broadcastLabels}
}

// eventsFields lists events.Stats field by field. A counter added to
// events.Stats gains its series by gaining a line here.
var eventsFields = []eventsField{
	{eventsFamily("recorded", "Events the Recorders accepted."),
		func(s events.Stats) uint64 { return s.Recorded }},
	{eventsFamily("invalid", "Events the Recorders refused as invalid (a type other than Normal or Warning, for one)."),
		func(s events.Stats) uint64 { return s.Invalid }},
	{eventsFamily("dropped", "Events lost before a watcher or sink saw them (a full queue, or recorded after Shutdown)."),
		func(s events.Stats) uint64 { return s.Dropped }},
	{eventsFamily("skipped", "Events the spam filter kept from a sink."),
		func(s events.Stats) uint64 { return s.Skipped }},
	{eventsFamily("aggregated", "Events written as part of an aggregate event."),
		func(s events.Stats) uint64 { return s.Aggregated }},
	{eventsFamily("written", "Events a sink stored."),
		func(s events.Stats) uint64 { return s.Written }},
	{eventsFamily("failed", "Events a sink did not store, or a watcher did not handle: rejected, out of tries, given up, or discarded at Stop."),
		func(s events.Stats) uint64 { return s.Failed }},
	{eventsFamily("abandoned", "Events still queued or being retried when Shutdown's context ended."),
		func(s events.Stats) uint64 { return s.Abandoned }},
	{eventsFamily("handled", "Events given to the handlers of StartEventWatcher, StartLogging and StartStructuredLogging."),
		func(s events.Stats) uint64 { return s.Handled }},
}

// families lists every family, in the order Describe sends them.
func families() []*family {
	fs := []*family{famPublished, famDropped, famWatchers, famWatcherDropped, famWatcherQueued, famWatcherEnded}
	for _, f := range eventsFields {
		fs = append(fs, f.fam)
	}
	return append(fs, linkFamilies()...)
}

// A sample is one figure read at collection time.
type sample struct {
	fam    *family
	labels []string      // values of fam.labels
	attrs  attribute.Set // the same as OpenTelemetry attributes
	value  int64
}

// A collectError is a source whose method panicked during a collection.
type collectError struct {
	fam    *family // a family of the source, to name it in Prometheus
	labels []string
	err    error
}

// snapshot reads every registered source. It holds c.mu only to copy the
// registrations, so a source's methods never run under it (a source may
// add or remove sources, or be slow, without blocking the Collector).
// Samples come sorted by names, so that the output is stable.
func (c *Collector) snapshot() ([]sample, []collectError) {
	c.mu.Lock()
	bs := slices.SortedFunc(maps.Values(c.broadcasters), func(a, b *broadcasterEntry) int { return cmp.Compare(a.name, b.name) })
	ws := slices.SortedFunc(maps.Values(c.watchers), func(a, b *watcherEntry) int {
		return cmp.Or(cmp.Compare(a.key.broadcaster, b.key.broadcaster), cmp.Compare(a.key.watcher, b.key.watcher))
	})
	es := slices.SortedFunc(maps.Values(c.events), func(a, b *eventsEntry) int { return cmp.Compare(a.name, b.name) })
	ls := slices.SortedFunc(maps.Values(c.links), func(a, b *linkEntry) int { return cmp.Compare(a.name, b.name) })
	c.mu.Unlock()

	var out []sample
	var errs []collectError
	for _, e := range bs {
		labels := []string{e.name}
		st, err := call(e.src.Stats)
		if err != nil {
			errs = append(errs, collectError{famPublished, labels, err})
			continue
		}
		out = append(out,
			sample{famPublished, labels, e.attrs, clamp(st.Published)},
			sample{famDropped, labels, e.attrs, clamp(st.Dropped)},
			sample{famWatchers, labels, e.attrs, int64(st.Watchers)},
		)
	}
	for _, e := range ws {
		labels := []string{e.key.broadcaster, e.key.watcher}
		got, err := call(func() []sample { return readWatcher(e, labels) })
		if err != nil {
			errs = append(errs, collectError{famWatcherDropped, labels, err})
			continue
		}
		out = append(out, got...)
	}
	for _, e := range es {
		labels := []string{e.name}
		st, err := call(e.src.Stats)
		if err != nil {
			errs = append(errs, collectError{eventsFields[0].fam, labels, err})
			continue
		}
		for _, f := range eventsFields {
			out = append(out, sample{f.fam, labels, e.attrs, clamp(f.get(st))})
		}
	}
	for _, e := range ls {
		got, err := call(func() []sample { return readLink(e) })
		if err != nil {
			errs = append(errs, collectError{famLinkUp, []string{e.name}, err})
			continue
		}
		out = append(out, got...)
	}
	return out, errs
}

// readWatcher reads one watcher's figures, the optional ones included.
func readWatcher(e *watcherEntry, labels []string) []sample {
	s := []sample{{famWatcherDropped, labels, e.attrs, clamp(e.w.Dropped())}}
	if l, ok := e.w.(lener); ok {
		s = append(s, sample{famWatcherQueued, labels, e.attrs, int64(l.Len())})
	}
	if x, ok := e.w.(errer); ok {
		ended := int64(0)
		if x.Err() != nil {
			ended = 1
		}
		s = append(s, sample{famWatcherEnded, labels, e.attrs, ended})
	}
	return s
}

// call runs f, turning a panic into an error so that one broken source
// cannot take a scrape, or the process serving it, down.
func call[R any](f func() R) (r R, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("metrics: a source panicked during collection: %v", p)
		}
	}()
	return f(), nil
}

// clamp converts a count to the int64 OpenTelemetry's Int64 instruments
// take; no herald count reaches 2^63 in practice, but saturating is better
// than wrapping to a negative number.
func clamp(v uint64) int64 {
	if v > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(v)
}
