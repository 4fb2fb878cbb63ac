package k8s

import (
	"context"
	"time"

	"k8s.io/client-go/tools/record"

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
