package broadcast

import (
	"context"
	"fmt"
	"time"
)

// DefaultQueueLength is the per-watcher queue capacity when no
// [WithQueueLength] option is given.
const DefaultQueueLength = 1000

// MaxQueueLength is the largest queue length [WithQueueLength] accepts.
// Queues grow lazily, but a watcher read through [Watcher.C] needs a channel
// able to hold its whole queue (see [Watcher.C]), so the bound keeps one
// configuration typo from asking for gigabytes.
const MaxQueueLength = 1 << 24

type policyKind uint8

const (
	kindInvalid policyKind = iota
	kindDrop
	kindDropOldest
	kindBlock
	kindBlockFor
	kindEvict
)

// Policy says what happens to a value published while a watcher's queue is
// full. The only valid values are [Drop], [DropOldest], [Block], [Evict]
// and those returned by [BlockFor]; the zero Policy is invalid and
// [WithPolicy] panics on it.
type Policy struct {
	kind policyKind
	wait time.Duration // BlockFor only
}

var (
	// Drop does not queue the new value for a full watcher. The loss is
	// counted in [Watcher.Dropped] and [Stats].Dropped. A full Drop watcher
	// never slows the publisher or other watchers down.
	Drop = Policy{kind: kindDrop}

	// DropOldest discards the watcher's oldest queued value (never a prefix
	// value, see [Broadcaster.WatchWithPrefix]) to make room for the new one,
	// so a watcher that falls behind keeps the most recent values. Counted
	// like Drop.
	DropOldest = Policy{kind: kindDropOldest}

	// Block makes delivery wait until the watcher has room or is stopped:
	// nothing is lost, and a publisher may wait. Other watchers are not held
	// up by a full Drop or DropOldest watcher, but every publisher waits for
	// a full Block watcher, because every value must reach it in order.
	Block = Policy{kind: kindBlock}

	// Evict ends a full watcher instead of losing values silently: the value
	// that found its queue full is counted as dropped, and the watcher ends.
	// It keeps what it holds (readable, in order), then C() closes and All()
	// ends, and [Watcher.Err] returns [ErrEvicted]. No publisher and no
	// other watcher waits for it; it no longer counts in [Stats].Watchers.
	Evict = Policy{kind: kindEvict}
)

// BlockFor returns a policy that waits at most d, measured from the Publish
// call, for a full watcher to make room, and then drops the value for that
// watcher only, as [Drop] does (counted). d must be positive.
func BlockFor(d time.Duration) Policy {
	if d <= 0 {
		panic(fmt.Sprintf("broadcast: BlockFor: d must be positive, got %v", d))
	}
	return Policy{kind: kindBlockFor, wait: d}
}

// String returns the policy's name, such as "Drop" or "BlockFor(1s)".
func (p Policy) String() string {
	switch p.kind {
	case kindDrop:
		return "Drop"
	case kindDropOldest:
		return "DropOldest"
	case kindBlock:
		return "Block"
	case kindBlockFor:
		return "BlockFor(" + p.wait.String() + ")"
	case kindEvict:
		return "Evict"
	}
	return "Policy(invalid)"
}

// Waits reports whether the policy makes a publisher wait for a full
// watcher: [Block] and [BlockFor].
func (p Policy) Waits() bool { return p.waits() }

func (p Policy) waits() bool { return p.kind == kindBlock || p.kind == kindBlockFor }

// An Option configures a [Broadcaster] (in [New]: the default for every
// watcher) or a single watcher (in [Broadcaster.Watch] and the other Watch
// methods: it overrides that default). Options are created only by the
// With functions of this package; nil Options are ignored.
type Option interface {
	apply(*config)
}

type config struct {
	queueLen int
	policy   Policy
	ctx      context.Context // WithContext; Watch only
	history  int             // WithHistory; New only
	inNew    bool            // being applied by New
}

func defaultConfig() config { return config{queueLen: DefaultQueueLength, policy: Drop} }

func (c *config) apply(opts []Option) {
	for _, o := range opts {
		if o != nil {
			o.apply(c)
		}
	}
}

type queueLengthOption int

func (o queueLengthOption) apply(c *config) { c.queueLen = int(o) }

type policyOption Policy

func (o policyOption) apply(c *config) { c.policy = Policy(o) }

// WithQueueLength sets the per-watcher queue capacity: how many values a
// watcher holds before its [Policy] applies. The default is
// [DefaultQueueLength]. It panics if n < 1 or n > [MaxQueueLength]. Queues
// are not allocated up front: an idle watcher costs a few hundred bytes
// whatever its queue length, until [Watcher.C] is called.
func WithQueueLength(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("broadcast: WithQueueLength: n must be at least 1, got %d", n))
	}
	if n > MaxQueueLength {
		panic(fmt.Sprintf("broadcast: WithQueueLength: n must be at most MaxQueueLength (%d), got %d", MaxQueueLength, n))
	}
	return queueLengthOption(n)
}

// WithPolicy sets what happens when a watcher's queue is full. The default
// is [Drop]. It panics on the zero Policy.
func WithPolicy(p Policy) Option {
	if p.kind == kindInvalid {
		panic("broadcast: WithPolicy: invalid Policy (use Drop, DropOldest, Block, BlockFor or Evict)")
	}
	return policyOption(p)
}

type contextOption struct{ ctx context.Context }

func (o contextOption) apply(c *config) {
	if c.inNew {
		panic("broadcast: WithContext is a Watch option; given to New")
	}
	c.ctx = o.ctx
}

// WithContext binds a watcher to ctx: when ctx ends, the watcher stops as
// by [Watcher.Stop], and [Watcher.Err] returns context.Cause(ctx). No
// goroutine waits for ctx meanwhile (context.AfterFunc). If ctx is already
// done, Watch returns context.Cause(ctx) and registers nothing. It is an
// option of [Broadcaster.Watch] and [Broadcaster.WatchWithPrefix]: given
// to [New] it panics, and so does a nil ctx.
func WithContext(ctx context.Context) Option {
	if ctx == nil {
		panic("broadcast: WithContext: nil ctx")
	}
	return contextOption{ctx}
}

type historyOption int

func (o historyOption) apply(c *config) {
	if !c.inNew {
		panic("broadcast: WithHistory is a New option; given to a Watch method")
	}
	c.history = int(o)
}

// WithHistory makes the broadcaster keep the last n published values, also
// while no watcher exists, for [Broadcaster.WatchFrom]; the default is 0
// (none). It is an option of [New] only: given to a Watch method it panics,
// as does n < 0. The values live in the broadcaster's shared ring, which
// then has at least n+1 slots: a kept value costs one slot of T (plus
// rounding up to a power of two), and Publish still allocates nothing.
func WithHistory(n int) Option {
	if n < 0 {
		panic(fmt.Sprintf("broadcast: WithHistory: n must not be negative, got %d", n))
	}
	return historyOption(n)
}
