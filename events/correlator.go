package events

import (
	"errors"
	"hash/maphash"
	"slices"
	"sync"
	"time"
)

// Defaults of [CorrelatorOptions], those of client-go's EventCorrelator.
const (
	DefaultLRUCacheSize = 4096
	DefaultBurstSize    = 25
	DefaultQPS          = 1.0 / 300
	DefaultMaxEvents    = 10
	DefaultMaxInterval  = 10 * time.Minute

	// AggregatePrefix starts the message of an aggregate event unless
	// [CorrelatorOptions.MessageFunc] says otherwise.
	AggregatePrefix = "(combined from similar events): "
)

// Disable, as [CorrelatorOptions.BurstSize] or [CorrelatorOptions.MaxEvents],
// turns the spam filter or the aggregation off. Any negative value does.
const Disable = -1

// CorrelatorOptions configures a [Correlator]. The zero value gives
// client-go's defaults.
type CorrelatorOptions struct {
	// LRUCacheSize is the number of entries in each of the correlator's three
	// caches (aggregation groups, observed events, spam buckets); the least
	// recently used entry is forgotten first. 0 means DefaultLRUCacheSize
	// (4096); a negative value panics.
	LRUCacheSize int

	// BurstSize is how many events one source may report about one object
	// (and event type) before the spam filter holds it to QPS. 0 means
	// DefaultBurstSize (25); a negative value ([Disable]) turns the spam
	// filter off.
	BurstSize int
	// QPS is the rate, in events per second, at which the spam filter lets
	// a source+object's events through once its burst is spent. 0 means
	// DefaultQPS (one per 5 minutes); a negative value panics.
	QPS float64

	// KeyFunc groups events for aggregation: events with the same
	// aggregateKey are similar, and localKey tells them apart within the
	// group. nil means the default: similar events share source, object
	// (kind, namespace, name, UID, API version), type, reason and reporting
	// controller and instance, and differ by message. The default key is a
	// comparable struct, not a joined string, so distinct events never
	// collide.
	KeyFunc func(*Event) (aggregateKey, localKey string)
	// MessageFunc is the message of an aggregate event, given the newest
	// event of the group. nil means AggregatePrefix + the event's message.
	MessageFunc func(*Event) string
	// MaxEvents is the number of distinct localKeys, within MaxInterval,
	// whose last one starts aggregation: that event and every similar event
	// after it, repeats of earlier messages included, are recorded as one
	// aggregate event until MaxInterval passes with no similar event. 0 means
	// DefaultMaxEvents (10); a negative value ([Disable]) turns aggregation
	// off.
	MaxEvents int
	// MaxInterval is how long a group must see no similar event before it
	// starts over. 0 means DefaultMaxInterval (10 minutes); a negative value
	// panics.
	MaxInterval time.Duration

	// SpamKeyFunc, if not nil, returns the spam filter's bucket for an event
	// (after de-duplication, so it sees the event as it would be written).
	// nil means one bucket per source, object and type.
	SpamKeyFunc func(*Event) string

	// Now returns the current time; nil means time.Now. Simulations and
	// tests set it to replay a stream at its own pace. A [Broadcaster] also
	// stamps recorded events with it.
	Now func() time.Time
}

// CorrelateResult is what a [Correlator] decided for one event.
type CorrelateResult struct {
	// Event is the event to write, nil when Skip is true. It is a new value
	// that shares nothing with the event given to Correlate.
	Event *Event
	// Patch, if not nil, updates the existing event named Event.Name;
	// nil means Event is to be created.
	Patch *Patch
	// Skip means the spam filter withheld the event: write nothing.
	Skip bool
	// Aggregated means Event is an aggregate of similar events (see
	// [CorrelatorOptions.MaxEvents]).
	Aggregated bool
}

// Correlator decides, for each event in a stream, whether to create it, to
// patch an earlier occurrence with a higher count, to fold it into an
// aggregate event, or to skip it as spam. It keeps client-go's
// EventCorrelator's semantics (see [CorrelatorOptions]) with one deliberate
// difference: once a group aggregates, every similar event is aggregated
// until the group is quiet for MaxInterval, where client-go forgets a random
// message and lets some repeats through as plain events.
//
// A Correlator is safe for concurrent use; a [Broadcaster] makes one per
// sink.
type Correlator struct {
	// Read-only after NewCorrelator.
	keyFunc     func(*Event) (string, string)
	messageFunc func(*Event) string
	spamKeyFunc func(*Event) string
	now         func() time.Time
	maxEvents   int
	maxInterval time.Duration
	burst       int
	limit       float64 // spam filter refill, tokens per second
	seed        maphash.Seed

	// mu guards the three caches. It is held for map and list work only:
	// of the options' functions, just Now and SpamKeyFunc run under it, and
	// no I/O does.
	mu   sync.Mutex
	agg  *lru[aggKey, aggRecord]   // nil when aggregation is off
	seen *lru[logKey, logRecord]   // observed events, for de-duplication
	spam *lru[spamKey, spamRecord] // nil when the spam filter is off
}

// objKey is the part of an ObjectReference that identifies the object.
type objKey struct {
	kind, namespace, name, uid, apiVersion string
}

func objKeyOf(r *ObjectReference) objKey {
	return objKey{r.Kind, r.Namespace, r.Name, r.UID, r.APIVersion}
}

// aggKey names an aggregation group: either custom (KeyFunc's aggregateKey)
// or the default fields, never both.
type aggKey struct {
	custom              string
	source              Source
	obj                 objKey
	typ, reason         string
	reportingController string
	reportingInstance   string
}

// logKey names an observed event: a plain event by all its identifying
// fields and message (group then holds source, object, type and reason), an
// aggregate event by its group.
type logKey struct {
	aggregate bool
	group     aggKey
	fieldPath string
	message   string
}

// spamKey names a spam filter bucket: custom (SpamKeyFunc) or default.
type spamKey struct {
	custom string
	source Source
	obj    objKey
	typ    string
}

type aggRecord struct {
	last        time.Time
	aggregating bool
	// locals holds the group's distinct local keys while it is not
	// aggregating; fewer than maxEvents of them.
	locals []string
}

type logRecord struct {
	count int32
	first time.Time
	name  string
	rv    string
}

type spamRecord struct {
	bucket bucket
}

// resultBox holds a result's Event and Patch in one allocation.
type resultBox struct {
	e Event
	p Patch
}

var errNilEvent = errors.New("events: Correlate: nil event")

// NewCorrelator returns a Correlator with o's settings, defaults filled in.
// It panics on a negative LRUCacheSize, QPS or MaxInterval.
func NewCorrelator(o CorrelatorOptions) *Correlator {
	switch {
	case o.LRUCacheSize < 0:
		panic("events: CorrelatorOptions.LRUCacheSize must not be negative")
	case o.QPS < 0:
		panic("events: CorrelatorOptions.QPS must not be negative")
	case o.MaxInterval < 0:
		panic("events: CorrelatorOptions.MaxInterval must not be negative")
	}
	size := cmpOr(o.LRUCacheSize, DefaultLRUCacheSize)
	c := &Correlator{
		keyFunc:     o.KeyFunc,
		messageFunc: o.MessageFunc,
		spamKeyFunc: o.SpamKeyFunc,
		now:         o.Now,
		maxEvents:   cmpOr(o.MaxEvents, DefaultMaxEvents),
		maxInterval: cmpOr(o.MaxInterval, DefaultMaxInterval),
		burst:       cmpOr(o.BurstSize, DefaultBurstSize),
		limit:       cmpOr(o.QPS, DefaultQPS),
		seen:        newLRU[logKey, logRecord](size),
		seed:        maphash.MakeSeed(),
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.maxEvents > 0 {
		c.agg = newLRU[aggKey, aggRecord](size)
	}
	if c.burst > 0 {
		c.spam = newLRU[spamKey, spamRecord](size)
	}
	return c
}

// cmpOr returns v, or def when v is zero.
func cmpOr[T int | float64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// Correlate decides what to write for e, which it does not modify, and
// records e in the correlator's state: the aggregation group, then the
// observed-event cache (so an event the spam filter skips still counts), then
// the spam bucket, in client-go's order. It returns an error only for a nil
// event, with Skip set.
//
// KeyFunc runs before the correlator's lock is taken and MessageFunc after
// it is released; Now and SpamKeyFunc run under it and must not call the
// Correlator.
func (c *Correlator) Correlate(e *Event) (CorrelateResult, error) {
	if e == nil {
		return CorrelateResult{Skip: true}, errNilEvent
	}
	k := c.keysOf(e)
	d, box := c.decide(e, &k)
	if d.skip {
		return CorrelateResult{Skip: true, Aggregated: d.aggregated}, nil
	}
	if box == nil {
		box = c.build(e, d)
	}
	res := CorrelateResult{Event: &box.e, Aggregated: d.aggregated}
	if d.patch {
		box.p = Patch{Count: box.e.Count, LastTimestamp: box.e.LastTimestamp, Message: box.e.Message}
		res.Patch = &box.p
	}
	return res, nil
}

// eventKeys are an event's cache keys and their hashes, computed before the
// lock is taken.
type eventKeys struct {
	group     aggKey
	local     string
	groupHash uint64
	event     logKey
	eventHash uint64
	spam      spamKey // default key; SpamKeyFunc's is computed under the lock
	spamHash  uint64
}

// keysOf computes e's keys and their hashes. A hash only picks a map slot:
// keys are compared whole, so a hash may leave fields out, as long as equal
// keys hash alike. The three hashes grow from one another over the fields
// that tell events apart in practice: source component, object namespace,
// name and UID, and type (the spam key), then reason (the group key), then
// message (the event key). Hashing every field, with maphash.Hash, made
// hashing half of Correlate's time.
func (c *Correlator) keysOf(e *Event) eventKeys {
	o := &e.InvolvedObject
	k := eventKeys{
		event: eventKeyOf(e),
		spam:  spamKey{source: e.Source, obj: objKeyOf(o), typ: e.Type},
	}
	h := c.spamHash(e)
	k.spamHash = h
	h = mix(h, maphash.String(c.seed, e.Reason))
	if c.agg != nil {
		if c.keyFunc != nil {
			k.group.custom, k.local = c.keyFunc(e)
			k.groupHash = maphash.String(c.seed, k.group.custom)
		} else {
			k.group = aggKey{
				source: e.Source, obj: k.spam.obj, typ: e.Type, reason: e.Reason,
				reportingController: e.ReportingController,
				reportingInstance:   e.ReportingInstance,
			}
			k.local = e.Message
			k.groupHash = h
		}
	}
	k.eventHash = mix(h, maphash.String(c.seed, e.Message))
	return k
}

func (c *Correlator) spamHash(e *Event) uint64 {
	o := &e.InvolvedObject
	h := maphash.String(c.seed, e.Source.Component)
	h = mix(h, maphash.String(c.seed, o.Namespace))
	h = mix(h, maphash.String(c.seed, o.Name))
	if o.UID != "" {
		h = mix(h, maphash.String(c.seed, o.UID))
	}
	return mix(h, maphash.String(c.seed, e.Type))
}

// eventHash is the hash keysOf gives e's event key.
func (c *Correlator) eventHash(e *Event) uint64 {
	h := mix(c.spamHash(e), maphash.String(c.seed, e.Reason))
	return mix(h, maphash.String(c.seed, e.Message))
}

// mix combines a hash with the hash of one more field.
func mix(h, x uint64) uint64 {
	h ^= x + 0x9e3779b97f4a7c15 + h<<6 + h>>2
	return h
}

// aggregateEventHash is the hash of the event key of a group's aggregate
// event: distinct from the group's hash, which a plain event key could share.
func aggregateEventHash(groupHash uint64) uint64 { return groupHash ^ 0x9e3779b97f4a7c15 }

// decision is what the correlator's state says about one event.
type decision struct {
	now        time.Time
	aggregated bool
	skip       bool
	// The observation: patch an event with this identity and count, or
	// create one.
	patch bool
	count int32
	first time.Time
	name  string
	rv    string
}

// decide runs the three stages under c.mu. It returns the built event too
// when SpamKeyFunc needed it.
func (c *Correlator) decide(e *Event, k *eventKeys) (d decision, box *resultBox) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	d.now = now

	// 1. Aggregation.
	if c.agg != nil {
		d.aggregated = c.aggregate(k, now)
	}

	// 2. De-duplication.
	var rec *logRecord
	var found bool
	if d.aggregated {
		rec, found = c.seen.touch(logKey{aggregate: true, group: k.group}, aggregateEventHash(k.groupHash))
		d.count, d.first = 1, now
	} else {
		rec, found = c.seen.touch(k.event, k.eventHash)
		d.count, d.first, d.name, d.rv = e.Count, e.FirstTimestamp, e.Name, e.ResourceVersion
	}
	if found && rec.count > 0 {
		d.patch = true
		d.count, d.first, d.name, d.rv = rec.count+1, rec.first, rec.name, rec.rv
	} else if d.aggregated {
		d.name = eventName(e.InvolvedObject.Name, now.UnixNano())
	}
	*rec = logRecord{count: d.count, first: d.first, name: d.name, rv: d.rv}

	// 3. Spam filter.
	if c.spam != nil {
		sk, sh := k.spam, k.spamHash
		if c.spamKeyFunc != nil {
			box = c.build(e, d)
			sk = spamKey{custom: c.spamKeyFunc(&box.e)}
			sh = maphash.String(c.seed, sk.custom)
		}
		r, found := c.spam.touch(sk, sh)
		if !found {
			r.bucket.reset(c.burst)
		}
		d.skip = !r.bucket.allow(now, c.limit, c.burst)
	}
	return d, box
}

// build makes the event to write: a copy of e, or an aggregate event, with
// the observation's identity and count.
func (c *Correlator) build(e *Event, d decision) *resultBox {
	box := new(resultBox)
	out := &box.e
	if d.aggregated {
		msg := ""
		if c.messageFunc != nil {
			msg = c.messageFunc(e)
		} else {
			msg = AggregatePrefix + e.Message
		}
		// Like client-go, an aggregate event carries no annotations: they
		// belong to single occurrences.
		*out = Event{
			Namespace:           e.Namespace,
			InvolvedObject:      e.InvolvedObject,
			Reason:              e.Reason,
			Message:             msg,
			Type:                e.Type,
			Source:              e.Source,
			LastTimestamp:       d.now,
			ReportingController: e.ReportingController,
			ReportingInstance:   e.ReportingInstance,
		}
	} else {
		*out = *e
		out.Annotations = cloneAnnotations(e.Annotations)
	}
	out.Name = d.name
	out.ResourceVersion = d.rv
	out.FirstTimestamp = d.first
	out.Count = d.count
	return box
}

// aggregate records local in group and reports whether the event is to be
// aggregated. Caller holds c.mu.
func (c *Correlator) aggregate(k *eventKeys, now time.Time) bool {
	local := k.local
	r, found := c.agg.touch(k.group, k.groupHash)
	if !found || now.Sub(r.last) > c.maxInterval {
		clear(r.locals)
		r.locals = r.locals[:0]
		r.aggregating = false
	}
	r.last = now
	if r.aggregating {
		return true
	}
	if !slices.Contains(r.locals, local) {
		if r.locals == nil {
			r.locals = make([]string, 0, min(c.maxEvents, 16))
		}
		r.locals = append(r.locals, local)
	}
	if len(r.locals) < c.maxEvents {
		return false
	}
	// From here on every similar event is aggregated, so the set of
	// messages is no longer needed.
	clear(r.locals)
	r.locals = r.locals[:0]
	r.aggregating = true
	return true
}

// eventKeyOf is the de-duplication key of a plain event: client-go's
// getEventKey fields, as a struct.
func eventKeyOf(e *Event) logKey {
	return logKey{
		group: aggKey{
			source: e.Source, obj: objKeyOf(&e.InvolvedObject),
			typ: e.Type, reason: e.Reason,
		},
		fieldPath: e.InvolvedObject.FieldPath,
		message:   e.Message,
	}
}

// UpdateState records e, as a sink returned it, as the latest observation of
// its event, so that the next occurrence patches e's Name and
// ResourceVersion with e.Count+1. A nil e is ignored.
func (c *Correlator) UpdateState(e *Event) {
	if e == nil {
		return
	}
	key, h := eventKeyOf(e), c.eventHash(e)
	c.mu.Lock()
	defer c.mu.Unlock()
	rec, _ := c.seen.touch(key, h)
	*rec = logRecord{count: e.Count, first: e.FirstTimestamp, name: e.Name, rv: e.ResourceVersion}
}
