package events

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// Defaults of the [Broadcaster]'s options, those of client-go.
const (
	DefaultMaxTries    = 12
	DefaultRetrySleep  = 10 * time.Second
	DefaultQueueLength = 1000
	// DefaultSinkConcurrency is the default of WithSinkConcurrency: one
	// call in flight per sink, client-go's behaviour, and the cheapest for
	// a sink that answers at once (DESIGN.md, "Sink concurrency").
	DefaultSinkConcurrency = 1
)

// Option configures a [Broadcaster]; see [NewBroadcaster].
type Option interface{ apply(*config) }

type config struct {
	corr     CorrelatorOptions
	maxTries int
	sleep    time.Duration
	queueLen int
	logger   *slog.Logger
	sinkConc int
	// sinkConcSet: WithSinkConcurrency was given (see SinkConcurrency).
	sinkConcSet bool
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithCorrelatorOptions sets the options of the [Correlator] that each
// [Broadcaster.StartRecordingToSink] makes for its sink. Invalid options
// panic in NewBroadcaster, as in [NewCorrelator].
func WithCorrelatorOptions(o CorrelatorOptions) Option {
	return optionFunc(func(c *config) { c.corr = o })
}

// WithRetry sets how often a sink write is tried (maxTries, default 12) and
// how long the worker sleeps between tries (default 10s). The first sleep is
// a random fraction of sleep, so that many processes whose sink went down
// together do not retry in step. maxTries < 1 or sleep < 0 panics.
func WithRetry(maxTries int, sleep time.Duration) Option {
	if maxTries < 1 {
		panic("events: WithRetry: maxTries must be at least 1")
	}
	if sleep < 0 {
		panic("events: WithRetry: sleep must not be negative")
	}
	return optionFunc(func(c *config) { c.maxTries, c.sleep = maxTries, sleep })
}

// WithQueueLength sets how many events may wait for each watcher or sink
// (default 1000). When a watcher's queue is full, a Recorder drops the event
// for that watcher, counts it in [Stats].Dropped and reports it. For a sink
// with [WithSinkConcurrency], the events waiting for their object's turn
// count too. n < 1 or
// n > [broadcast.MaxQueueLength] panics.
func WithQueueLength(n int) Option {
	if n < 1 {
		panic("events: WithQueueLength: n must be at least 1")
	}
	if n > broadcast.MaxQueueLength {
		panic(fmt.Sprintf("events: WithQueueLength: n must be at most broadcast.MaxQueueLength (%d), got %d",
			broadcast.MaxQueueLength, n))
	}
	return optionFunc(func(c *config) { c.queueLen = n })
}

// WithSinkConcurrency sets how many calls each sink started with
// [Broadcaster.StartRecordingToSink] may have in flight (default 1). Events
// about one involved object (the same Kind, Namespace, Name, UID and
// APIVersion) are still correlated and written one at a time, in recording
// order, each after the previous one's sink call, retries included, has
// returned; events about different objects overlap, up to n calls at
// once. A retrying event holds up its own object, and one of the n calls,
// only. Events waiting for their object's turn count against
// [WithQueueLength] with those waiting in the sink's queue.
//
// The stored result is the same as with n = 1 as long as the correlator's
// caches hold every key ([CorrelatorOptions].LRUCacheSize): its keys are
// per object (the default KeyFunc and SpamKeyFunc include the object), and
// each object's events reach it in order; what differs is which key the
// caches forget first once they are full, and, with a KeyFunc or
// SpamKeyFunc that groups events of several objects, the order in which
// such a group sees them.
//
// A sink with n > 1 runs a goroutine per object being written, at most n,
// started when an event arrives for an object with none and ended when
// that object has nothing more to write: none at rest, n in a storm, each
// with a stack of a few KiB. n < 1 panics.
func WithSinkConcurrency(n int) Option {
	if n < 1 {
		panic(fmt.Sprintf("events: WithSinkConcurrency: n must be at least 1, got %d", n))
	}
	return optionFunc(func(c *config) { c.sinkConc, c.sinkConcSet = n, true })
}

// WithLogger sets where the broadcaster reports its own failures: dropped,
// invalid, skipped, aggregated and unwritten events, sink errors. nil, a
// zero slog.Logger (which has no handler), and the default mean
// slog.Default() at the time of each report. The logger is called
// synchronously, also from Recorder calls (at most once per 10 seconds per
// kind of report), so it must not block. A logger whose handler panics
// loses its reports and nothing else: each lost report is one line on
// standard error.
func WithLogger(l *slog.Logger) Option {
	return optionFunc(func(c *config) { c.logger = usableLogger(l) })
}

// usableLogger returns l, or nil (the default) for a logger that would
// panic when called: a zero slog.Logger has a nil handler.
func usableLogger(l *slog.Logger) *slog.Logger {
	if l == nil || l.Handler() == nil {
		return nil
	}
	return l
}

// Stopper stops one watcher or sink started on a [Broadcaster]. Stop is
// idempotent and returns at once, also when called from inside the handler:
// nothing more is queued for it, what is still queued is discarded (counted
// in [Stats].Failed and reported), a retry in progress gives up (counted in
// [Stats].Failed) and the sink's context is canceled. Its goroutine exits
// when the call in progress returns; [Broadcaster.Shutdown] waits for that.
// To deliver what is queued, call Shutdown instead, which stops everything
// after delivering it.
type Stopper interface{ Stop() }

// Stats is a snapshot of a [Broadcaster]'s counters. Counts for sinks and
// watchers are summed over all of them, stopped ones included.
type Stats struct {
	// Recorded is the number of events Recorders accepted.
	Recorded uint64
	// Invalid is the number of events not recorded because they were
	// invalid (see [Event.Validate]): a Type other than Normal or Warning,
	// a namespace or annotations no API server stores.
	Invalid uint64
	// Dropped is the number of events lost before a watcher or sink saw
	// them: one per full queue an event did not fit in (for a sink with
	// WithSinkConcurrency, the events waiting for their object's turn
	// included), plus the events recorded once Shutdown had begun.
	Dropped uint64
	// Skipped is the number of events the spam filter kept from a sink.
	Skipped uint64
	// Aggregated is the number of events written as part of an aggregate
	// event.
	Aggregated uint64
	// Written is the number of events a sink stored (ErrAlreadyExists
	// included).
	Written uint64
	// Failed is the number of events a sink did not store: rejected, out of
	// tries, or given up when their recording was stopped; the events whose
	// handler or sink call panicked or called runtime.Goexit, or on which a
	// function of the sink's CorrelatorOptions panicked; and the events
	// still queued for a watcher or sink when its Stop was called, which
	// were discarded. So each event published to a sink ends up counted,
	// for that sink, in exactly one of Dropped, Written, Skipped, Failed
	// and Abandoned, and each one published to a watcher in exactly one of
	// Dropped, Handled, Failed and Abandoned, by the time the sink's or
	// watcher's goroutine has exited (when Shutdown returns nil, say).
	Failed uint64
	// Abandoned is the number of events still queued, or being retried,
	// when Shutdown's ctx ended.
	Abandoned uint64
	// Handled is the number of events given to the handlers of
	// StartEventWatcher, StartLogging and StartStructuredLogging.
	Handled uint64
}

// Broadcaster receives events from its Recorders and fans them out, through
// a [broadcast.Broadcaster], to the watchers and sinks started on it, each
// with its own queue and goroutine. Create one with [NewBroadcaster]; all
// methods are safe for concurrent use. See the package documentation for its
// guarantees. The zero Broadcaster is not usable: its Start methods and
// Shutdown panic, and the Recorders it hands out drop (and report) every
// event.
type Broadcaster struct {
	cfg config
	now func() time.Time
	bc  *broadcast.Broadcaster[*recorded]

	// ctx is the parent of every worker's context; cancel is called when
	// Shutdown gives up waiting, and when it is done.
	ctx    context.Context
	cancel context.CancelFunc

	closed atomic.Bool // Shutdown began; set under mu

	// mu guards the fields below. It is never held while calling a sink, a
	// handler or the broadcast package's Shutdown.
	mu      sync.Mutex
	workers []*worker // every worker started, but stopped ones whose goroutine exited
	// gone is the sum of the counts of the stopped workers forgotten (see
	// workerExited), for Stats.
	gone    Stats
	active  int           // workers whose goroutine has not exited
	allDone chan struct{} // closed when closed is set and active is 0

	// pubMu orders registrations against publications: a Recorder holds
	// it for reading while it counts the consumers and publishes, a Start
	// for writing while it registers one, a Stop while it unregisters one.
	// So a consumer that sees an event with shared false is the only one
	// that ever will (see recorded). A Recorder also counts a published
	// event in recorded under it, so that the difference of the counts at
	// a watcher's Start and Stop is the number of events published to it
	// (see worker.Stop). Nothing blocks while it is held.
	pubMu     sync.RWMutex
	consumers int // watchers registered and not stopped; guarded by pubMu

	// live is a copy-on-write snapshot of the workers not stopped, which
	// Recorders read without locking to notice drops.
	live atomic.Pointer[[]*worker]

	shutOnce sync.Once
	shutDone chan struct{} // closed when the first Shutdown returns

	// The counters, on cache lines of their own: Recorders write the
	// first group for every event, workers the reports' counts (and their
	// own counters, in worker.counts), and a line both write would pass
	// from core to core twice per event.
	_                      padLine
	recorded               atomic.Uint64
	lastNanos              atomic.Int64 // see uniqueNanos
	invalid, droppedClosed atomic.Uint64
	dropsSeen              atomic.Uint64 // b.bc.Dropped() when noticeDrops last looked
	_                      padLine
	nextN                  atomic.Uint64
	// rep is written by workers for every skipped and aggregated event.
	rep reporter
	// losses are those already returned in a LostError.
	losses lossReport
	// free holds recorded events for Recorders to reuse (see freeList).
	free freeList
	_    padLine
}

// padLine keeps the fields before it and after it on different cache lines
// (64 bytes on amd64 and arm64): two fields at least this far apart never
// share one, wherever the allocation starts.
type padLine [64]byte

// NewBroadcaster returns a Broadcaster with the given options. It starts no
// goroutine; each Start method starts one, which Shutdown ends.
func NewBroadcaster(opts ...Option) *Broadcaster {
	cfg := config{maxTries: DefaultMaxTries, sleep: DefaultRetrySleep, queueLen: DefaultQueueLength, sinkConc: DefaultSinkConcurrency}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	_ = NewCorrelator(cfg.corr) // panics now, not in StartRecordingToSink
	b := &Broadcaster{
		cfg:      cfg,
		now:      cfg.corr.Now,
		allDone:  make(chan struct{}),
		shutDone: make(chan struct{}),
		bc: broadcast.New[*recorded](
			broadcast.WithQueueLength(cfg.queueLen),
			broadcast.WithPolicy(broadcast.Drop),
		),
	}
	if b.now == nil {
		b.now = now
	}
	b.rep.logger = cfg.logger
	b.ctx, b.cancel = context.WithCancel(context.Background())
	b.live.Store(new([]*worker))
	return b
}

// NewRecorder returns a Recorder that records events from source on b. It
// sets each event's ReportingController and ReportingInstance to source's
// Component and Host.
func (b *Broadcaster) NewRecorder(source Source) Recorder {
	return &recorder{b: b, source: source}
}

// StartEventWatcher calls handler, from one goroutine, with a copy of every
// event recorded from now on, in order. The copy is handler's own: it may
// keep or change it. A handler that panics, or calls runtime.Goexit (as
// t.Fatal does), is reported and counted in [Stats].Failed, and the watcher
// goes on with the next event (after a Goexit, on a new goroutine, which
// Shutdown waits for). After Shutdown has begun it
// returns an error wrapping [broadcast.ErrClosed]. A nil handler panics.
func (b *Broadcaster) StartEventWatcher(handler func(*Event)) (Stopper, error) {
	if handler == nil {
		panic("events: StartEventWatcher: nil handler")
	}
	return b.start("StartEventWatcher", "event watcher", 1, func(wk *worker, g *routine, r *recorded) {
		e := &r.Event
		if r.shared {
			e = e.Clone()
		} else {
			r.name()
		}
		wk.handle(g, func() { handler(e) })
	})
}

// StartLogging writes every event recorded from now on to logf, from one
// goroutine, in client-go's format. After Shutdown has begun it returns an
// error wrapping [broadcast.ErrClosed]. A nil logf panics.
func (b *Broadcaster) StartLogging(logf func(format string, args ...any)) (Stopper, error) {
	if logf == nil {
		panic("events: StartLogging: nil logf")
	}
	return b.start("StartLogging", "log", 1, func(wk *worker, g *routine, r *recorded) {
		e := &r.Event
		wk.handle(g, func() {
			logf("Event(%#v): type: '%v' reason: '%v' %v", e.InvolvedObject, e.Type, e.Reason, e.Message)
		})
	})
}

// StartStructuredLogging writes every event recorded from now on to logger
// at level, from one goroutine, as the record "Event occurred" with the
// attributes object ("namespace/name"), fieldPath, kind, apiVersion, type,
// reason and message. A nil or zero logger means the broadcaster's (see
// [WithLogger]). After Shutdown has begun it returns an error wrapping
// [broadcast.ErrClosed].
func (b *Broadcaster) StartStructuredLogging(logger *slog.Logger, level slog.Level) (Stopper, error) {
	return b.start("StartStructuredLogging", "structured log", 1, func(wk *worker, g *routine, r *recorded) {
		e := &r.Event
		l := usableLogger(logger)
		if l == nil {
			l = b.rep.log()
		}
		wk.handle(g, func() {
			if !l.Enabled(wk.ctx, level) {
				return
			}
			o := &e.InvolvedObject
			l.LogAttrs(wk.ctx, level, "Event occurred",
				slog.String("object", objectName(o)),
				slog.String("fieldPath", o.FieldPath),
				slog.String("kind", o.Kind),
				slog.String("apiVersion", o.APIVersion),
				slog.String("type", e.Type),
				slog.String("reason", e.Reason),
				slog.String("message", e.Message))
		})
	})
}

// StartRecordingToSink writes every event recorded from now on to sink,
// after a [Correlator] of its own (see [WithCorrelatorOptions]) has
// de-duplicated, aggregated and spam-filtered them. One goroutine writes, in
// order, with retries (see [WithRetry] and [Sink] for which errors are
// retried); with [WithSinkConcurrency](n), up to n goroutines do, each
// event about one object after the previous one. [Broadcaster.StatsOf]
// gives the returned Stopper's own counts. After Shutdown has begun it returns an error wrapping
// [broadcast.ErrClosed]. A nil sink panics.
func (b *Broadcaster) StartRecordingToSink(sink Sink) (Stopper, error) {
	if sink == nil {
		panic("events: StartRecordingToSink: nil sink")
	}
	return b.startRecording("StartRecordingToSink", sink, b.cfg.sinkConc)
}

// StartRecordingToSinkWithConcurrency is [Broadcaster.StartRecordingToSink]
// with n calls in flight for this sink, whatever [WithSinkConcurrency]
// says: a broadcaster whose sinks differ (one a user's sink that is not
// safe for concurrent use, one a client known to be) sets each its own.
// Events about one object are still written one at a time, in order. A
// nil sink or n < 1 panics.
func (b *Broadcaster) StartRecordingToSinkWithConcurrency(sink Sink, n int) (Stopper, error) {
	if sink == nil {
		panic("events: StartRecordingToSinkWithConcurrency: nil sink")
	}
	if n < 1 {
		panic(fmt.Sprintf("events: StartRecordingToSinkWithConcurrency: n must be at least 1, got %d", n))
	}
	return b.startRecording("StartRecordingToSinkWithConcurrency", sink, n)
}

// SinkConcurrency returns the calls in flight per sink that
// [WithSinkConcurrency] set for b (or the default, 1), and whether it was
// given: a wrapper that picks each sink's concurrency itself
// ([Broadcaster.StartRecordingToSinkWithConcurrency]) leaves the choice to
// its user when set is true.
func (b *Broadcaster) SinkConcurrency() (n int, set bool) {
	b.mustBeMade("SinkConcurrency")
	return b.cfg.sinkConc, b.cfg.sinkConcSet
}

func (b *Broadcaster) startRecording(method string, sink Sink, conc int) (Stopper, error) {
	corr := NewCorrelator(b.cfg.corr)
	// The options' functions are given the recorded event itself; one
	// that kept it would see it change if it were reused.
	// A concurrent sink's goroutines come and go, each with its own
	// batch: not worth it (see freeList).
	reuse := b.cfg.corr.KeyFunc == nil && b.cfg.corr.MessageFunc == nil && b.cfg.corr.SpamKeyFunc == nil &&
		conc == 1
	return b.start(method, fmt.Sprintf("sink %T", sink), conc, func(wk *worker, g *routine, r *recorded) {
		if !wk.recordToSink(g, sink, corr, r) && !r.shared && reuse {
			wk.recycle(g, r)
		}
	})
}

// nopStopper is what a failed Start returns, so that a caller who ignores
// the error can still call Stop.
type nopStopper struct{}

func (nopStopper) Stop() {}

func (b *Broadcaster) start(method, kind string, conc int, process func(*worker, *routine, *recorded)) (Stopper, error) {
	b.mustBeMade(method)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed.Load() {
		return nopStopper{}, fmt.Errorf("events: %s: %w", method, broadcast.ErrClosed)
	}
	wk := &worker{b: b, process: process}
	wk.flush.want.Store(math.MaxUint64)
	if conc > 1 {
		wk.conc = newDispatch(wk, conc)
	}
	b.pubMu.Lock()
	w, err := b.bc.Watch()
	if err == nil {
		b.consumers++
		wk.w, wk.recordedAtStart = w, b.recorded.Load()
		wk.name = fmt.Sprintf("%s #%d", kind, b.nextN.Add(1))
		b.workers = append(b.workers, wk)
		b.active++
		// Live before any event can be published to it: a Recorder that
		// makes its watcher drop one must find it there (see noticeDrops).
		b.publishLive()
	}
	b.pubMu.Unlock()
	if err != nil {
		return nopStopper{}, fmt.Errorf("events: %s: %w", method, err)
	}
	wk.ctx, wk.cancel = context.WithCancel(b.ctx)
	go wk.run()
	return wk, nil
}

// mustBeMade panics if b was not made by NewBroadcaster.
func (b *Broadcaster) mustBeMade(method string) {
	if b == nil || b.bc == nil {
		panic("events: Broadcaster." + method + ": use NewBroadcaster; the zero Broadcaster is not usable")
	}
}

// publishLive stores the snapshot of the workers not stopped. Caller holds
// b.mu.
func (b *Broadcaster) publishLive() {
	live := make([]*worker, 0, len(b.workers))
	for _, wk := range b.workers {
		if !wk.stopped.Load() {
			live = append(live, wk)
		}
	}
	b.live.Store(&live)
}

// workerExited is called by each worker's goroutine as it returns. A
// stopped worker is forgotten then, so that a process that starts and stops
// sinks does not keep every sink and correlator it ever had: its watcher is
// unregistered, so its drop count is final, and Stats keeps it in
// droppedGone.
func (b *Broadcaster) workerExited(wk *worker) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if wk.stopped.Load() {
		if i := slices.Index(b.workers, wk); i >= 0 {
			b.gone.add(wk.stats())
			b.workers = slices.Delete(b.workers, i, i+1)
		}
	}
	b.active--
	if b.active == 0 && b.closed.Load() {
		close(b.allDone)
	}
}

// noticeDrops reports the drops of full queues that happened since the last
// look. Recorders call it after each publish (a drop happens inside it),
// with the fields of the event they published, which they no longer read.
func (b *Broadcaster) noticeDrops(object ObjectReference, eventtype, reason, message string) {
	// The broadcast's total, which every drop raises (after the
	// watcher's own count), says cheaply whether there is anything to look
	// at: the watchers' counts sit next to what their readers write for
	// each event, and reading them for every event would pull those lines
	// away from the readers.
	for {
		total, seen := b.bc.Dropped(), b.dropsSeen.Load()
		if total <= seen {
			return // nothing new
		}
		if b.dropsSeen.CompareAndSwap(seen, total) {
			break
		}
	}
	for _, wk := range *b.live.Load() {
		if n := wk.claimDrops(); n > 0 {
			if testHookDropsClaimed != nil {
				testHookDropsClaimed()
			}
			wk.reportDrops(n, &Event{InvolvedObject: object, Type: eventtype, Reason: reason, Message: message, Count: 1})
			if b.closed.Load() {
				// Shutdown may have flushed the reports between the claim
				// and the add, and the add held the count back: either
				// that flush saw it, or this one does.
				b.rep.flush()
			}
		}
	}
}

// testHookDropsClaimed, if set by a test, runs in noticeDrops between
// claiming drops and reporting them.
var testHookDropsClaimed func()

// reportDrops reports n drops of wk's watcher that it claimed, the latest
// of them e (nil if unknown).
func (wk *worker) reportDrops(n uint64, e *Event) {
	wk.b.rep.add(causeQueueFull, n, e, nil, slog.String("to", wk.name), slog.Int("queueLength", wk.b.cfg.queueLen))
}

// claimDrops returns the drops of wk's watcher that nobody has reported
// yet, and marks them reported: each drop is claimed once, by a Recorder
// (noticeDrops) or by the worker as it exits (run).
func (wk *worker) claimDrops() uint64 {
	d := wk.w.Dropped()
	for {
		seen := wk.seenDropped.Load()
		if d <= seen {
			return 0
		}
		if wk.seenDropped.CompareAndSwap(seen, d) {
			return d - seen
		}
	}
}

// Stats returns a snapshot of b's counters.
func (b *Broadcaster) Stats() Stats {
	s := Stats{
		Recorded: b.recorded.Load(),
		Invalid:  b.invalid.Load(),
		Dropped:  b.droppedClosed.Load(),
	}
	b.mu.Lock()
	s.add(b.gone)
	for _, wk := range b.workers {
		s.add(wk.stats())
	}
	b.mu.Unlock()
	return s
}

// StatsOf returns the counters of the watcher or sink that s stops, s being
// what one of b's Start methods returned, and true; for anything else, a
// zero Stats and false. It may be called after s was stopped, and after
// Shutdown. Recorded is the number of events published to it (recorded
// while it was started), Invalid is 0, Dropped counts the events lost at
// its full queue, and the other counts are its own: for a sink, each event
// published to it ends up counted in exactly one of Dropped, Written,
// Skipped, Failed and Abandoned once its goroutines have exited, and, for a
// watcher, in one of Dropped, Handled, Failed and Abandoned. [Stats] is the
// sum over all of them, with the Recorders' own counts.
func (b *Broadcaster) StatsOf(s Stopper) (Stats, bool) {
	wk, ok := s.(*worker)
	if !ok || wk == nil || wk.b != b {
		return Stats{}, false
	}
	st := wk.stats()
	end := b.recorded.Load()
	if wk.stopped.Load() {
		end = wk.recordedAtStop
	}
	st.Recorded = end - wk.recordedAtStart
	return st, true
}

// stats returns wk's counts (Recorded and Invalid 0).
func (wk *worker) stats() Stats {
	c := &wk.counts
	return Stats{
		Dropped:    wk.w.Dropped() + c.dropped.Load(),
		Skipped:    c.skipped.Load(),
		Aggregated: c.aggregated.Load(),
		Written:    c.written.Load(),
		Failed:     c.failed.Load(),
		Abandoned:  c.abandoned.Load(),
		Handled:    c.handled.Load(),
	}
}

// add adds o's counts to s's.
func (s *Stats) add(o Stats) {
	s.Recorded += o.Recorded
	s.Invalid += o.Invalid
	s.Dropped += o.Dropped
	s.Skipped += o.Skipped
	s.Aggregated += o.Aggregated
	s.Written += o.Written
	s.Failed += o.Failed
	s.Abandoned += o.Abandoned
	s.Handled += o.Handled
}

// Shutdown stops b. From its start, Recorders drop (count and report) what
// they are given, and the Start methods return an error wrapping
// [broadcast.ErrClosed]. Every event recorded before it is still delivered:
// each started sink writes its queue, with its retries, and each watcher
// handles its queue. Then every goroutine of b has exited and Shutdown
// returns nil, or a [LostError] (wrapping [ErrLost]) with the events lost
// since the last LostError that Flush or Shutdown returned.
//
// If ctx ends first, Shutdown returns ctx.Err() at once, even when a sink
// ignores its context: the sinks' contexts are canceled, retries stop, the
// events not written are counted in [Stats].Abandoned and reported, and a
// worker still inside a sink call or handler exits as soon as that call
// returns. Calls after the first wait for it and return nil (or their own
// ctx.Err()). A call after a first one that gave up returns nil once that
// one has returned, even if a worker is still inside a sink call. A nil ctx
// means context.Background(). Shutdown waits for the handlers and sinks:
// calling it from one of them waits until ctx ends.
func (b *Broadcaster) Shutdown(ctx context.Context) error {
	b.mustBeMade("Shutdown")
	if ctx == nil {
		ctx = context.Background()
	}
	first := false
	b.shutOnce.Do(func() { first = true })
	if !first {
		select {
		case <-b.shutDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	defer close(b.shutDone)

	b.mu.Lock()
	b.closed.Store(true)
	if b.active == 0 {
		close(b.allDone)
	}
	b.mu.Unlock()

	// Every event whose publish returned is now queued for its watchers;
	// the watchers end once their queues are read.
	if err := b.bc.Shutdown(ctx); err == nil {
		select {
		case <-b.allDone: // first: nothing left to write is a success, whatever ctx says
		default:
			select {
			case <-b.allDone:
			case <-ctx.Done():
			}
		}
		if isClosed(b.allDone) {
			b.cancel()
			b.rep.flush()
			return b.lost(b.Stats())
		}
	}
	if ctx.Err() == nil {
		// The broadcast package failed for another reason than ctx (it
		// cannot today); give up as if ctx had ended.
		b.cancel()
		return fmt.Errorf("events: Shutdown: %w", context.Canceled)
	}
	b.cancel()
	b.mu.Lock()
	running := b.active
	b.mu.Unlock()
	b.rep.logAttrs(context.Background(), slog.LevelError,
		"events: Shutdown gave up waiting; events not yet written are abandoned and counted in Stats().Abandoned",
		slog.Any("err", ctx.Err()), slog.Int("workersRunning", running))
	b.rep.flush()
	return ctx.Err()
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// objectName is "namespace/name", or "name" without a namespace.
func objectName(o *ObjectReference) string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}
