package events

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"slices"
	"sync"
	"time"
	"unsafe"
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
//
// The functions among them are the caller's code: a Correlator used
// directly lets their panics through to its caller (after releasing its
// lock). In a [Broadcaster]'s sink, a panic in KeyFunc, MessageFunc or
// SpamKeyFunc loses that one event (counted in [Stats].Failed and
// reported) and the sink goes on; a panic in Now, which Recorders call,
// stamps the event with time.Now instead and is reported.
type CorrelatorOptions struct {
	// LRUCacheSize is the number of entries in each of the correlator's three
	// caches (aggregation groups, observed events, spam buckets); the least
	// recently used entry is forgotten first. 0 means DefaultLRUCacheSize
	// (4096); a negative value panics. Sizes above 2³⁰−1 (math.MaxInt, say)
	// mean no limit: no memory holds that many entries.
	LRUCacheSize int

	// BurstSize is how many events one source may report about one object
	// (and event type) before the spam filter holds it to QPS. 0 means
	// DefaultBurstSize (25); a negative value ([Disable]) turns the spam
	// filter off.
	BurstSize int
	// QPS is the rate, in events per second, at which the spam filter lets
	// a source+object's events through once its burst is spent. 0 means
	// DefaultQPS (one per 5 minutes); math.Inf(1) means no limit once the
	// burst is spent, that is, every event passes; a negative value or NaN
	// panics.
	QPS float64

	// KeyFunc groups events for aggregation: events with the same
	// aggregateKey are similar, and localKey tells them apart within the
	// group. nil means the default: similar events share source, object
	// (kind, namespace, name, UID, API version), type, reason and reporting
	// controller and instance, and differ by message. The default key
	// encodes each field with its length, not a joined string, so distinct
	// events never collide.
	KeyFunc func(*Event) (aggregateKey, localKey string)
	// MessageFunc is the message of an aggregate event, given the newest
	// event of the group. nil means AggregatePrefix + the event's message.
	MessageFunc func(*Event) string
	// MaxEvents is the number of distinct localKeys, within MaxInterval,
	// whose last one starts aggregation: that event and every similar event
	// after it, repeats of earlier messages included, are recorded as one
	// aggregate event until MaxInterval passes with no similar event. 0 means
	// DefaultMaxEvents (10); a negative value ([Disable]) turns aggregation
	// off. Distinct messages count toward MaxEvents as long as no two
	// similar events are more than MaxInterval apart; a gap of exactly
	// MaxInterval keeps the group.
	MaxEvents int
	// MaxInterval is how long a group must see no similar event before it
	// starts over. 0 means DefaultMaxInterval (10 minutes); a negative value
	// panics.
	MaxInterval time.Duration

	// SpamKeyFunc, if not nil, returns the spam filter's bucket for an event
	// (after de-duplication, so it sees the event as it would be written).
	// nil means one bucket per source, object and type. It runs under the
	// Correlator's lock, and so does MessageFunc when it is set (see
	// [Correlator.Correlate]): neither may call the Correlator.
	SpamKeyFunc func(*Event) string

	// Now returns the current time; nil means time.Now (read more cheaply:
	// from the monotonic clock, resynchronized with the wall clock every
	// second). Simulations and
	// tests set it to replay a stream at its own pace. A [Broadcaster] also
	// stamps recorded events with it, and its sinks' correlators judge each
	// event at the time it was stamped rather than read the clock again.
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
	// [CorrelatorOptions.MaxEvents]). A new aggregate event is named
	// "<object name>.<hex unix nanos>" with the nanoseconds of Now, or one
	// more than those of the Correlator's previous aggregate name if Now
	// has not moved past them, so that no two aggregate events of one
	// Correlator share a name, even with a coarse or fixed clock. (A
	// [Broadcaster]'s sink names it instead after the recorded event that
	// it replaces, whose name the Broadcaster made unique.)
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
	agg  *lru[string, aggRecord]  // nil when aggregation is off
	seen *lru[string, logRecord]  // observed events, for de-duplication
	spam *lru[string, spamRecord] // nil when the spam filter is off
	// lastSeen is the slot of seen that the latest Correlate or UpdateState
	// touched, 0 before the first; when lastPlain, its key is that of an
	// event with the key fields lastKey (see UpdateState).
	lastSeen  int32
	lastPlain bool
	lastKey   keyFields
	// lastNanos is the nanoseconds of the latest aggregate name that
	// Correlate made (see nextNanos).
	lastNanos int64
}

// keyFields are the fields of an event that its plain event key encodes
// (see appendEventKey).
type keyFields struct {
	source                                                    Source
	kind, namespace, name, uid, apiVersion, typ, reason, path string
	message                                                   string
}

func keyFieldsOf(e *Event) keyFields {
	o := &e.InvolvedObject
	return keyFields{
		source: e.Source, kind: o.Kind, namespace: o.Namespace, name: o.Name, uid: o.UID,
		apiVersion: o.APIVersion, typ: e.Type, reason: e.Reason, path: o.FieldPath, message: e.Message,
	}
}

// of reports whether e's key fields are f, comparing them in place (no copy
// of eleven strings on the stack). The usual caller passes the event that
// Correlate returned, whose strings share their bytes with those f holds:
// same reports that without a call to memequal per field.
func (f *keyFields) of(e *Event) bool {
	o := &e.InvolvedObject
	return same(f.message, e.Message) && same(f.name, o.Name) && same(f.reason, e.Reason) &&
		same(f.namespace, o.Namespace) && same(f.uid, o.UID) && same(f.kind, o.Kind) &&
		same(f.typ, e.Type) && same(f.path, o.FieldPath) && same(f.apiVersion, o.APIVersion) &&
		same(f.source.Component, e.Source.Component) && same(f.source.Host, e.Source.Host)
}

// same is a == b, answered inline when a and b share their bytes.
func same(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

type aggRecord struct {
	last        time.Time
	aggregating bool
	// While the group is not aggregating, it has seen n distinct local keys,
	// fewer than maxEvents: first, then more. Most groups never see a second
	// message, and first needs no allocation of its own.
	n     int32
	first string
	more  []string
}

// reset forgets r's local keys, keeping more's array.
func (r *aggRecord) reset() {
	r.n, r.first = 0, ""
	clear(r.more)
	r.more = r.more[:0]
}

// add records local, and returns the number of distinct local keys.
func (r *aggRecord) add(local string, maxEvents int) int {
	switch {
	case r.n == 0:
		r.first = local
	case r.first == local || slices.Contains(r.more, local):
		return int(r.n)
	case r.more == nil:
		r.more = make([]string, 1, min(maxEvents-1, 16))
		r.more[0] = local
	default:
		r.more = append(r.more, local)
	}
	r.n++
	return int(r.n)
}

type logRecord struct {
	count int32
	first time.Time
	name  string
	rv    string
	// For a plain event's entry, with the default keys: the slots that
	// held its group and its spam bucket when it was last written, with
	// their gens (see lruLink.gen). While both still hold them, the next
	// occurrence of the event finds its group and bucket through them:
	// no hashing, probing or comparing of their keys, which were two of
	// the three cache lookups of every repeated event.
	group, spam       int32
	groupGen, spamGen uint32
}

// set records an observation, keeping the links.
func (r *logRecord) set(count int32, first time.Time, name, rv string) {
	r.count, r.first, r.name, r.rv = count, first, name, rv
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
// It panics on a negative LRUCacheSize, QPS or MaxInterval and on a NaN QPS
// (which would let every event through: a mistake, not a setting). The zero
// Correlator is not usable: its methods panic.
func NewCorrelator(o CorrelatorOptions) *Correlator {
	switch {
	case o.LRUCacheSize < 0:
		panic("events: CorrelatorOptions.LRUCacheSize must not be negative")
	case o.QPS < 0:
		panic("events: CorrelatorOptions.QPS must not be negative")
	case math.IsNaN(o.QPS):
		panic("events: CorrelatorOptions.QPS must not be NaN")
	case o.MaxInterval < 0:
		panic("events: CorrelatorOptions.MaxInterval must not be negative")
	}
	if math.IsInf(o.QPS, 1) {
		o.QPS = math.MaxFloat64 // rate.Inf: bucket.allow lets everything through
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
		seen:        newLRU[string, logRecord](size),
		seed:        maphash.MakeSeed(),
	}
	if c.now == nil {
		c.now = now
	}
	if c.maxEvents > 0 {
		c.agg = newLRU[string, aggRecord](size)
	}
	if c.burst > 0 {
		c.spam = newLRU[string, spamRecord](size)
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
// An event whose Count is 0 is not counted as an observation: its repeats
// are created again. (client-go does the same; a Recorder's events have
// Count 1.)
//
// KeyFunc runs before the correlator's lock is taken and MessageFunc after
// it is released; Now and SpamKeyFunc run under it and must not call the
// Correlator. With a SpamKeyFunc, MessageFunc runs under the lock too, and
// must not call the Correlator either: SpamKeyFunc is given the event as it
// will be written, an aggregate event's message included, as client-go's
// filter is.
func (c *Correlator) Correlate(e *Event) (CorrelateResult, error) {
	c.mustBeMade("Correlate")
	if e == nil {
		return CorrelateResult{Skip: true}, errNilEvent
	}
	return c.correlate(e, nil, 0, time.Time{}), nil
}

// mustBeMade panics if c was not made by NewCorrelator.
func (c *Correlator) mustBeMade(method string) {
	if c == nil || c.seen == nil {
		panic("events: Correlator." + method + ": use NewCorrelator; the zero Correlator is not usable")
	}
}

// nextNanos returns now's unix nanoseconds, or one more than the last value
// it returned if that is not larger. Caller holds c.mu.
func (c *Correlator) nextNanos(now time.Time) int64 {
	n := max(now.UnixNano(), c.lastNanos+1)
	c.lastNanos = n
	return n
}

// inPlace is what a sink worker that is the only consumer of a recorded
// event gives correlate (see recorded).
type inPlace struct {
	patch Patch // the result's Patch
}

// correlate is Correlate for an event that is not nil, at the time at, or
// Now's if at is zero. With own not nil, e is the caller's to change: a
// result that is not an aggregate is e itself, updated, and its Patch is
// own.patch, so that nothing is allocated or copied.
//
// nanos, if not 0, is what a Broadcaster reserved for e's name, unique
// among the names it made (see recorded): a new aggregate event is named
// with it, as the recorded event it replaces would have been, and, with
// own not nil, so is a new plain event, which has no name yet (a patch uses
// an earlier occurrence's name, so the name is made only for an event to
// create). With nanos 0 (Correlate), a new aggregate event's name comes from
// nextNanos.
func (c *Correlator) correlate(e *Event, own *inPlace, nanos int64, at time.Time) CorrelateResult {
	// buf stays on the stack: it never flows into k, which the caches keep
	// parts of.
	var stack [keyBufSize]byte
	k := eventKeys{local: e.Message}
	buf := c.appendKeys(stack[:0], e, &k)
	k.eventHash = maphash.Bytes(c.seed, k.event.of(buf))
	d, out, p := c.decide(e, &k, buf, own, nanos, at)
	if d.skip {
		return CorrelateResult{Skip: true, Aggregated: d.aggregated}
	}
	if out == nil {
		out, p = c.build(e, d, own)
	}
	res := CorrelateResult{Event: out, Aggregated: d.aggregated}
	if d.patch {
		*p = Patch{Count: out.Count, LastTimestamp: out.LastTimestamp, Message: out.Message}
		res.Patch = p
	}
	return res
}

// keyBufSize is the room on Correlate's stack for an event's encoded keys;
// longer keys spill to the heap.
const keyBufSize = 384

// eventKeys are an event's cache keys, encoded before the lock is taken into
// one buffer:
//
//	'a' reporting controller, reporting instance, 'p' spam fields, reason, field path, message
//
// where the spam fields are source component and host, object kind,
// namespace, name, UID and API version, and type, and each field is its
// length (uvarint) then its bytes, so that no two distinct events share a
// key (client-go joins the fields with no separator). The keys are spans of
// it: the group key, which is also the key of the group's aggregate event in
// the observed-event cache, runs from 'a' to the reason; a plain event's key
// from 'p' to the end; the spam key is the spam fields. So the spam fields
// and the reason are encoded once for all three keys, and the tags keep an
// aggregate event's key apart from every plain one. With a KeyFunc the
// buffer is 'a' and its aggregateKey (the group key), then the plain event
// key; with aggregation off, the plain event key alone.
//
// A cache stores a key as a string: one pointer per entry, where a struct of
// a dozen strings had a dozen, each scanned by the garbage collector, and a
// key in place of twelve fields compares with one memequal. Lookups compare
// the buffer in place; the first insert of an event copies the buffer from
// that key on to the heap once (stable), and each cache keeps a substring of
// that copy.
type eventKeys struct {
	all                string // buf[allLo:] on the heap, made at the first insert
	allLo              int
	spam, group, event span
	eventHash          uint64 // computed before the lock is taken
	// The group key's hash, computed when a lookup needs it (a repeated
	// event reaches its group through a link, see logRecord), at most
	// once: the aggregated path looks the group key up twice.
	groupHash   uint64
	groupHashed bool
	local       string // the aggregation's localKey
}

// span is a key's place in the buffer of encoded keys.
type span struct{ lo, hi int }

func (s span) of(buf []byte) []byte { return buf[s.lo:s.hi] }

// groupH returns the hash of the group key.
func (k *eventKeys) groupH(seed maphash.Seed, buf []byte) uint64 {
	if !k.groupHashed {
		k.groupHash, k.groupHashed = maphash.Bytes(seed, k.group.of(buf)), true
	}
	return k.groupHash
}

// touchSlot is lru.touch for the key at s in buf, k's buffer, returning
// the key's slot. The first insert copies buf from s on to k.all, and the
// caches keep substrings of that copy: the caches are touched in the order
// group, event, spam, whose spans start in that order, so a new group
// copies the whole buffer once (all three keys overlap in it), a new
// message in a known group its event and spam keys (the spam key is inside
// the event key). buf is a parameter of its own, never stored in k, so that
// escape analysis keeps Correlate's buffer on its stack.
func touchSlot[V any](c *lru[string, V], k *eventKeys, buf []byte, s span, h uint64) (slot int32, found bool) {
	if i := lookupBytes(c, s.of(buf), h); i != 0 {
		return i, true
	}
	return insertKey(c, k, buf, s, h), false
}

// insertKey inserts the key at s in buf, which is absent, copying it as
// touchSlot describes, and returns its slot.
func insertKey[V any](c *lru[string, V], k *eventKeys, buf []byte, s span, h uint64) int32 {
	var key string
	switch {
	case k.all == "":
		k.all, k.allLo = string(buf[s.lo:]), s.lo
		key = k.all[:s.hi-s.lo]
	case s.lo >= k.allLo:
		key = k.all[s.lo-k.allLo : s.hi-k.allLo]
	default: // not reached by the default keys, whose spans start in the order touched
		key = string(s.of(buf))
	}
	return c.insert(key, h)
}

// appendKeys appends e's encoded keys to buf (see eventKeys), sets their
// spans in k, and k.local when a KeyFunc gives it, and returns buf.
func (c *Correlator) appendKeys(buf []byte, e *Event, k *eventKeys) []byte {
	if c.agg != nil {
		buf = append(buf, 'a')
		if c.keyFunc != nil {
			var group string
			group, k.local = c.keyFunc(e)
			buf = append(buf, group...)
			k.group = span{0, len(buf)}
		} else {
			// The group key ends with the plain event key's first part:
			// one encoding of the spam fields and the reason serves both.
			buf = appendField(buf, e.ReportingController)
			buf = appendField(buf, e.ReportingInstance)
			lo := len(buf)
			buf = append(buf, 'p')
			buf = appendSpamFields(buf, e)
			k.spam = span{lo + 1, len(buf)}
			buf = appendField(buf, e.Reason)
			k.group = span{0, len(buf)}
			buf = appendField(buf, e.InvolvedObject.FieldPath)
			buf = appendField(buf, e.Message)
			k.event = span{lo, len(buf)}
			return buf
		}
	}
	lo := len(buf)
	buf = append(buf, 'p')
	buf = appendSpamFields(buf, e)
	k.spam = span{lo + 1, len(buf)}
	buf = appendField(buf, e.Reason)
	buf = appendField(buf, e.InvolvedObject.FieldPath)
	buf = appendField(buf, e.Message)
	k.event = span{lo, len(buf)}
	return buf
}

// appendEventKey appends e's plain event key (see eventKeys).
func appendEventKey(buf []byte, e *Event) []byte {
	buf = append(buf, 'p')
	buf = appendSpamFields(buf, e)
	buf = appendField(buf, e.Reason)
	buf = appendField(buf, e.InvolvedObject.FieldPath)
	return appendField(buf, e.Message)
}

func appendSpamFields(buf []byte, e *Event) []byte {
	o := &e.InvolvedObject
	buf = appendField(buf, e.Source.Component)
	buf = appendField(buf, e.Source.Host)
	buf = appendField(buf, o.Kind)
	buf = appendField(buf, o.Namespace)
	buf = appendField(buf, o.Name)
	buf = appendField(buf, o.UID)
	buf = appendField(buf, o.APIVersion)
	return appendField(buf, e.Type)
}

// appendField appends s's length, as a uvarint, then s.
func appendField(buf []byte, s string) []byte {
	if len(s) < 0x80 {
		buf = append(buf, byte(len(s)))
	} else {
		buf = binary.AppendUvarint(buf, uint64(len(s)))
	}
	return append(buf, s...)
}

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

// decide runs the three stages under c.mu. It returns the built event (see
// build) too when SpamKeyFunc needed it.
func (c *Correlator) decide(e *Event, k *eventKeys, buf []byte, own *inPlace, nanos int64, now time.Time) (d decision, out *Event, p *Patch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if now.IsZero() {
		now = c.now()
	}
	d.now = now

	// The plain event's entry, found without making it the most recent
	// (client-go does not touch it for an event it aggregates), and
	// through it the event's group and spam bucket.
	var ev, group, spam int32
	linking := c.keyFunc == nil
	if linking {
		if ev = findBytes(c.seen, k.event.of(buf), k.eventHash); ev != 0 {
			group, spam = c.linked(c.seen.val(ev), k, buf)
		}
	}

	// 1. Aggregation.
	if c.agg != nil {
		d.aggregated, group = c.aggregate(k, buf, now, group)
	}

	// 2. De-duplication.
	var slot int32
	var found bool
	switch {
	case d.aggregated:
		slot, found = touchSlot(c.seen, k, buf, k.group, k.groupH(c.seed, buf))
		d.count, d.first = 1, now
	case ev != 0:
		c.seen.moveToFront(ev)
		slot, found = ev, true
	case linking: // absent, as findBytes said
		slot = insertKey(c.seen, k, buf, k.event, k.eventHash)
	default:
		slot, found = touchSlot(c.seen, k, buf, k.event, k.eventHash)
	}
	if !d.aggregated {
		d.count, d.first, d.name, d.rv = e.Count, e.FirstTimestamp, e.Name, e.ResourceVersion
	}
	// The memo for UpdateState is for callers of Correlate, which call it
	// after each write; a sink worker calls it only when the sink changed
	// the event, and would pay for copying eleven strings, with write
	// barriers while the GC runs, for nothing.
	c.lastSeen, c.lastPlain = slot, !d.aggregated && own == nil
	if c.lastPlain {
		c.lastKey = keyFieldsOf(e)
	}
	rec := c.seen.val(slot) // stays valid: slots never move (see lru.chunks)
	if !found {
		rec.group, rec.spam = 0, 0 // a reused slot's links are another key's
	}
	if found && rec.count > 0 {
		d.patch = true
		d.count, d.first, d.name, d.rv = rec.count+1, rec.first, rec.name, rec.rv
	} else if d.aggregated {
		// A new aggregate event. client-go names it after the clock alone,
		// so two aggregates of one object within one clock tick, or an
		// aggregate and the plain event recorded at that tick, shared a
		// name, and the sink stored one of them.
		if nanos == 0 {
			nanos = c.nextNanos(now)
		}
		d.name = eventName(e.InvolvedObject.Name, nanos)
	} else if own != nil && nanos != 0 {
		d.name = eventName(e.InvolvedObject.Name, nanos)
	}
	rec.set(d.count, d.first, d.name, d.rv)

	// 3. Spam filter.
	if c.spam != nil {
		var r *spamRecord
		var found bool
		switch {
		case c.spamKeyFunc != nil:
			out, p = c.build(e, d, own)
			sk := c.spamKeyFunc(out)
			r, found = c.spam.touch(sk, maphash.String(c.seed, sk))
		case spam != 0:
			c.spam.moveToFront(spam)
			r, found = c.spam.val(spam), true
		default:
			spam, found = touchSlot(c.spam, k, buf, k.spam, maphash.Bytes(c.seed, k.spam.of(buf)))
			r = c.spam.val(spam)
		}
		if !found {
			r.bucket.reset(c.burst)
		}
		d.skip = !r.bucket.allow(now, c.limit, c.burst)
	}
	if linking && !d.aggregated {
		if group != 0 {
			rec.group, rec.groupGen = group, c.agg.links[group].gen
		}
		if spam != 0 { // 0 with a SpamKeyFunc, whose keys are not the event's
			rec.spam, rec.spamGen = spam, c.spam.links[spam].gen
		}
	}
	return d, out, p
}

// linked returns the slots of the group and spam bucket that r, the entry
// of the event whose keys are k, links to, each 0 unless the slot still
// holds the key it held when the link was made. A group's key is the
// reporting fields, then the start of the event key (see eventKeys): the
// event key matched, so the group key matches when the reporting fields
// do, which their encoding lets one comparison of bytes tell. The spam
// key is part of the event key. Caller holds c.mu.
func (c *Correlator) linked(r *logRecord, k *eventKeys, buf []byte) (group, spam int32) {
	if r.group != 0 {
		if key := c.agg.entry(r.group).key; c.agg.links[r.group].gen == r.groupGen && len(key) == k.group.hi &&
			key[:k.event.lo] == string(buf[:k.event.lo]) {
			group = r.group
		}
	}
	if r.spam != 0 && c.spam.links[r.spam].gen == r.spamGen {
		spam = r.spam
	}
	return group, spam
}

// build makes the event to write, and the place for its patch: a copy of
// e, or an aggregate event, with the observation's identity and count; with
// own not nil (see correlate), e itself and own unless it is an aggregate.
func (c *Correlator) build(e *Event, d decision, own *inPlace) (*Event, *Patch) {
	if own != nil && !d.aggregated {
		e.Name, e.ResourceVersion, e.FirstTimestamp, e.Count = d.name, d.rv, d.first, d.count
		return e, &own.patch
	}
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
	return out, &box.p
}

// aggregate records local in the event's group, found at slot group if
// that is not 0, and reports whether the event is to be aggregated, and the
// group's slot. Caller holds c.mu.
func (c *Correlator) aggregate(k *eventKeys, buf []byte, now time.Time, group int32) (bool, int32) {
	local := k.local
	found := group != 0
	if found {
		c.agg.moveToFront(group)
	} else {
		group, found = touchSlot(c.agg, k, buf, k.group, k.groupH(c.seed, buf))
	}
	r := c.agg.val(group)
	if !found || now.Sub(r.last) > c.maxInterval {
		r.reset()
		r.aggregating = false
	}
	r.last = now
	if r.aggregating {
		return true, group
	}
	if r.add(local, c.maxEvents) < c.maxEvents {
		return false, group
	}
	// From here on every similar event is aggregated, so the set of
	// messages is no longer needed.
	r.reset()
	r.aggregating = true
	return true, group
}

// UpdateState records e, as a sink returned it, as the latest observation of
// its event, so that the next occurrence patches e's Name and
// ResourceVersion with e.Count+1. A nil e is ignored.
func (c *Correlator) UpdateState(e *Event) {
	c.mustBeMade("UpdateState")
	if e == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// The usual caller passes the event that the latest Correlate returned,
	// as the sink stored it: its key is then in the slot that Correlate
	// touched, and comparing its key fields with those Correlate saw
	// (strings that share their bytes compare without reading them) saves
	// encoding, hashing and looking up the key.
	var rec *logRecord
	if i := c.lastSeen; i != 0 && c.lastPlain && c.lastKey.of(e) {
		c.seen.moveToFront(i)
		rec = c.seen.val(i)
	} else {
		var stack [keyBufSize]byte
		buf := appendEventKey(stack[:0], e)
		var k eventKeys
		var found bool
		i, found = touchSlot(c.seen, &k, buf, span{0, len(buf)}, maphash.Bytes(c.seed, buf))
		c.lastSeen, c.lastPlain, c.lastKey = i, true, keyFieldsOf(e)
		rec = c.seen.val(i)
		if !found {
			rec.group, rec.spam = 0, 0
		}
	}
	rec.set(e.Count, e.FirstTimestamp, e.Name, e.ResourceVersion)
}
