package k8s

import (
	"context"
	"log/slog"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/events"
)

// Option configures [NewBroadcaster], [NewEventBroadcaster] and
// [NewEventBroadcasterAdapter]. It is sealed: the values come from this
// package's With functions. Each mirrors client-go's option of the same name
// (record.WithContext, record.WithSleepDuration,
// record.WithCorrelatorOptions), so that a call
// record.NewBroadcaster(record.WithContext(ctx)) swaps by changing its
// package qualifier.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config is what the options set; the zero value of each field means "not
// given" and leaves the constructor's default.
type config struct {
	ctx             context.Context           // WithContext; nil: none
	sleep           time.Duration             // WithSleepDuration; 0 with sleepSet false: default
	sleepSet        bool                      // WithSleepDuration was given
	correlator      *record.CorrelatorOptions // WithCorrelatorOptions; nil: defaults
	shutdownTimeout time.Duration             // WithShutdownTimeout; 0: DefaultShutdownTimeout
	events          []events.Option           // WithEventsOptions, in the order given
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		if o == nil {
			panic("k8s: nil Option")
		}
		o.apply(&c)
	}
	return c
}

// WithContext is record.WithContext: when ctx ends, the broadcaster shuts
// down as by its Shutdown, and klog.FromContext(ctx) is the logger of its
// own reports. A nil ctx panics.
func WithContext(ctx context.Context) Option {
	if ctx == nil {
		panic("k8s: WithContext: nil ctx")
	}
	return optionFunc(func(c *config) { c.ctx = ctx })
}

// WithSleepDuration is record.WithSleepDuration: the sleep between two tries
// of one sink write (the first one jittered, as client-go's). d < 0 panics.
func WithSleepDuration(d time.Duration) Option {
	if d < 0 {
		panic("k8s: WithSleepDuration: d must not be negative")
	}
	return optionFunc(func(c *config) { c.sleep, c.sleepSet = d, true })
}

// WithCorrelatorOptions is record.WithCorrelatorOptions: client-go's own
// type, with its fields and defaults (a zero field takes client-go's
// default). KeyFunc, MessageFunc and SpamKeyFunc receive *corev1.Event as in
// client-go, and Clock is honoured.
func WithCorrelatorOptions(o record.CorrelatorOptions) Option {
	return optionFunc(func(c *config) { c.correlator = &o })
}

// WithShutdownTimeout sets how long Shutdown (client-go's interface gives it
// no context) may take to write what was recorded before it;
// [DefaultShutdownTimeout] by default. Once it has passed, the events not yet
// written are abandoned, counted and reported. d <= 0 panics.
func WithShutdownTimeout(d time.Duration) Option {
	if d <= 0 {
		panic("k8s: WithShutdownTimeout: d must be positive")
	}
	return optionFunc(func(c *config) { c.shutdownTimeout = d })
}

// WithEventsOptions passes herald's own events options (events.WithQueueLength,
// events.WithSinkConcurrency, events.WithLogger, events.WithRetry, ...) to the
// events.Broadcaster underneath. They are applied after this package's
// defaults, so they override them.
func WithEventsOptions(opts ...events.Option) Option {
	opts = append([]events.Option(nil), opts...)
	return optionFunc(func(c *config) { c.events = append(c.events, opts...) })
}

// logger is the broadcaster's klog logger: klog.FromContext of
// WithContext's ctx, as client-go's, or klog.Background() without one.
func (c *config) logger() klog.Logger {
	if c.ctx != nil {
		return klog.FromContext(c.ctx)
	}
	return klog.Background()
}

// eventsOptions turns c into the options of the events.Broadcaster
// underneath, in this order: the logger of c (klog, see logger), the
// retries of WithSleepDuration (client-go's 12 tries, the sleep given),
// WithCorrelatorOptions mapped by CorrelatorOptions, then WithEventsOptions'
// options, which so override the others.
func (c *config) eventsOptions() []events.Option {
	opts := make([]events.Option, 0, len(c.events)+3)
	var h slog.Handler = klogHandler{}
	if c.ctx != nil {
		h = logrHandler(klog.FromContext(c.ctx))
	}
	opts = append(opts, events.WithLogger(slog.New(h)))
	if c.sleepSet {
		opts = append(opts, events.WithRetry(events.DefaultMaxTries, c.sleep))
	}
	if c.correlator != nil {
		opts = append(opts, events.WithCorrelatorOptions(CorrelatorOptions(*c.correlator)))
	}
	return append(opts, c.events...)
}

// logrHandler is the slog.Handler of herald's reports to l: Warn and Error
// at l's verbosity, Info at V(2), Debug at V(6) (see NewBroadcaster).
func logrHandler(l klog.Logger) slog.Handler { return logr.ToSlogHandler(l.V(2)) }

// CorrelatorOptions returns client-go's correlator options o as herald's,
// with the same meaning: every field of o is honoured, a zero field takes
// client-go's default (which is herald's default too: LRUCacheSize 4096,
// BurstSize 25, QPS 1/300, MaxEvents 10, MaxIntervalInSeconds 600, the
// aggregation key and message of EventAggregatorByReasonFunc and
// EventAggregatorByReasonMessageFunc, one spam bucket per source, object
// and type, the real clock). KeyFunc, MessageFunc and SpamKeyFunc are
// given the event as a *corev1.Event (ToCoreV1, its name made valid by
// ValidEventName); Clock's Now is the correlator's clock.
//
// One difference: herald's Recorders stamp events with the correlator's
// clock too (events.CorrelatorOptions.Now), where client-go's recorder
// stamps them with the real clock and only its correlator reads Clock. So
// with a fake Clock the events' timestamps are the fake clock's, and the
// aggregation and spam filter judge each event at the time it was stamped,
// as client-go's do when the two clocks agree.
func CorrelatorOptions(o record.CorrelatorOptions) events.CorrelatorOptions {
	out := events.CorrelatorOptions{
		LRUCacheSize: o.LRUCacheSize,
		BurstSize:    o.BurstSize,
		QPS:          float64(o.QPS),
		MaxEvents:    o.MaxEvents,
		MaxInterval:  time.Duration(o.MaxIntervalInSeconds) * time.Second,
	}
	if f := o.KeyFunc; f != nil {
		out.KeyFunc = func(e *events.Event) (string, string) { return f(coreEvent(e)) }
	}
	if f := o.MessageFunc; f != nil {
		out.MessageFunc = func(e *events.Event) string { return f(coreEvent(e)) }
	}
	if f := o.SpamKeyFunc; f != nil {
		out.SpamKeyFunc = func(e *events.Event) string { return f(coreEvent(e)) }
	}
	if c := o.Clock; c != nil {
		out.Now = c.Now
	}
	return out
}

// coreEvent is e as client-go's correlator functions see it.
func coreEvent(e *events.Event) *corev1.Event {
	ev := ToCoreV1(e)
	ev.Name = ValidEventName(ev.Name)
	return ev
}
