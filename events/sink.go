package events

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"
)

// Sink stores events (a Kubernetes API server, a database, a test fake).
//
// A [Broadcaster] calls a sink from one goroutine per
// [Broadcaster.StartRecordingToSink], one event at a time, in order, and never
// while holding a lock; with [WithSinkConcurrency](n > 1), from up to n
// goroutines at once, the events about one involved object one at a time,
// in order, so the sink must be safe for concurrent use. The ctx it passes is canceled when that recording is
// stopped or when [Broadcaster.Shutdown] gives up waiting; a sink should
// return soon after.
//
// The error decides what happens next: nil or [ErrAlreadyExists] means the
// event is recorded; [ErrNotFound] from Patch means the event is gone and is
// created anew; [ErrRejected] means it never will be stored; any other error
// is retried (see [WithRetry]). Errors are matched with errors.Is, so a sink
// wraps them: fmt.Errorf("%w: %v", events.ErrRejected, err).
type Sink interface {
	// Create stores a new event and returns it as stored (with the
	// ResourceVersion the store gave it, say). e is the sink's own copy.
	Create(ctx context.Context, e *Event) (*Event, error)
	// Patch applies p to the stored event named old.Name in old.Namespace and
	// returns it as stored. old is the sink's own copy, with p applied.
	Patch(ctx context.Context, old *Event, p Patch) (*Event, error)
}

// Patch is the update of an event that occurred again.
type Patch struct {
	Count         int32
	LastTimestamp time.Time
	Message       string
}

// Sink errors, matched with errors.Is.
var (
	// ErrNotFound, from Patch: the event is gone; the broadcaster falls back
	// to Create.
	ErrNotFound = errors.New("events: event not found")
	// ErrAlreadyExists, from Create: the event is stored already; treated as
	// recorded, not retried.
	ErrAlreadyExists = errors.New("events: event already exists")
	// ErrRejected is permanent: the event is never retried. Any other sink
	// error is retried.
	ErrRejected = errors.New("events: event rejected")
	// ErrRejectedExpected wraps ErrRejected: a rejection the sink expects
	// in normal operation and that no one must act on (a Kubernetes API
	// server refusing events in a namespace being deleted, say). The event
	// is not retried and is counted in [Stats].Failed as any rejection, but
	// logged at Debug only and left out of every Warn or Error report and
	// of Shutdown's summary.
	ErrRejectedExpected = fmt.Errorf("%w as expected", ErrRejected)
)

// recordToSink correlates r and writes the result to sink, trying up to
// maxTries times. It returns when the event is stored, given up, or the
// worker's context ends; no lock is held meanwhile.
//
// It reports whether r's event was handed to the sink (which owns it then).
func (wk *worker) recordToSink(g *routine, sink Sink, corr *Correlator, r *recorded) (handedOut bool) {
	b := wk.b
	e := &r.Event
	// The correlator judges the event at the time it was recorded, from
	// the same clock (CorrelatorOptions.Now): that is one clock reading
	// less per event, and a decision that does not depend on how far
	// behind this worker is.
	// r.nanos, unique in the Broadcaster, names the event if it is created,
	// or the aggregate event that it starts.
	var res CorrelateResult
	if r.shared {
		res = corr.correlate(e, nil, r.nanos, e.LastTimestamp)
	} else {
		// This worker is r's only consumer: the result is r's event
		// itself (a copy of nothing, 384 bytes not allocated).
		res = corr.correlate(e, &g.place, r.nanos, e.LastTimestamp)
	}
	if res.Skip {
		wk.counts.skipped.Add(1)
		b.rep.add(causeSkipped, 1, e, nil, slog.String("by", wk.name))
		return false
	}
	ev := res.Event
	handedOut = ev == e
	// What the correlator holds as this event's latest observation. The
	// sink may change ev, its own copy, in place (a store that names
	// events itself sets the name on it), so the result is compared with
	// these, not with ev.
	name, rv, count, first := ev.Name, ev.ResourceVersion, ev.Count, ev.FirstTimestamp
	for try := 1; ; try++ {
		out, err := wk.write(g, sink, ev, res.Patch)
		switch {
		case err == errPanicked:
			return handedOut // reported and counted by call
		case err == nil:
			wk.healthy()
			wk.stored(res.Aggregated, e)
			// The correlator already holds name, rv, count and first as
			// the latest observation (and this worker is its only user),
			// so UpdateState matters only when the sink's result differs. An
			// aggregate event is observed under its group, where client-go's
			// UpdateState would not find it either: it would only add an
			// entry no event looks up.
			if out != nil && !res.Aggregated && (out.Name != name || out.ResourceVersion != rv ||
				out.Count != count || !out.FirstTimestamp.Equal(first)) {
				corr.UpdateState(out)
			}
			return handedOut
		case errors.Is(err, ErrAlreadyExists):
			wk.healthy()
			wk.stored(res.Aggregated, e)
			return handedOut
		case errors.Is(err, ErrRejectedExpected):
			wk.counts.failed.Add(1)
			b.rep.logAttrs(wk.ctx, slog.LevelDebug, "events: sink rejected event as expected, will not retry",
				slog.String("by", wk.name), slog.Any("err", err), eventAttr(ev))
			return handedOut
		case errors.Is(err, ErrRejected):
			wk.counts.failed.Add(1)
			b.rep.add(causeRejected, 1, ev, err, slog.String("by", wk.name))
			return handedOut
		}
		if wk.ctx.Err() != nil {
			wk.giveUp(ev, err)
			return handedOut
		}
		wk.sinkFailed(ev, err)
		if try >= b.cfg.maxTries {
			wk.counts.failed.Add(1)
			b.rep.add(causeRetriesExhausted, 1, ev, err, slog.String("by", wk.name), slog.Int("tries", try))
			return handedOut
		}
		delay := b.cfg.sleep
		if try == 1 {
			// Jittered, so that processes whose sink failed together do not
			// retry in step.
			delay = time.Duration(rand.Float64() * float64(delay))
		}
		b.rep.logAttrs(wk.ctx, slog.LevelDebug, "events: unable to write event, will retry",
			slog.String("by", wk.name), slog.Int("try", try), slog.Duration("sleep", delay),
			slog.Any("err", err), eventAttr(ev))
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-wk.ctx.Done():
			t.Stop()
			wk.giveUp(ev, err)
			return handedOut
		}
	}
}

// stored counts an event the sink stored: in Written, and in Aggregated
// (reported too) if it was written as part of an aggregate event, e being
// the recorded one.
func (wk *worker) stored(aggregated bool, e *Event) {
	wk.counts.written.Add(1)
	if aggregated {
		wk.counts.aggregated.Add(1)
		wk.b.rep.add(causeAggregated, 1, e, nil, slog.String("by", wk.name))
	}
}

// giveUp counts an event whose retries were cut short by Stop (Failed) or by
// Shutdown's deadline (Abandoned).
func (wk *worker) giveUp(ev *Event, err error) {
	wk.giveUpQueued()
	wk.b.rep.add(causeGaveUp, 1, ev, err, slog.String("by", wk.name))
}

// write makes one try: Patch if p is set, falling back to Create when the
// event is gone.
func (wk *worker) write(g *routine, sink Sink, ev *Event, p *Patch) (out *Event, err error) {
	ok := wk.call(g, func() {
		if p != nil {
			out, err = sink.Patch(wk.ctx, ev, *p)
			if !errors.Is(err, ErrNotFound) {
				return
			}
		}
		ev.ResourceVersion = "" // a new event has none
		out, err = sink.Create(wk.ctx, ev)
	})
	if !ok {
		return nil, errPanicked
	}
	return out, err
}

// sinkFailingAfter is how long a sink must have failed every try before
// its failure is reported at Warn (a retry alone is routine, reported at
// Debug): with the default retries, an event is given up, and reported at
// Error, only after about two minutes.
const sinkFailingAfter = 30 * time.Second

// sinkFailed notes a failed try of a sink write that will be retried, and
// reports the sink as failing (at Warn, rate-limited, with err) once every
// try for sinkFailingAfter has failed.
func (wk *worker) sinkFailed(ev *Event, err error) {
	t := now().UnixNano()
	since := wk.failingSince.Load()
	if since == 0 {
		wk.failingSince.CompareAndSwap(0, t)
		return
	}
	if d := time.Duration(t - since); d >= sinkFailingAfter {
		wk.b.rep.add(causeSinkFailing, 1, ev, err, slog.String("by", wk.name), slog.Duration("failingFor", d))
	}
}

// healthy notes a successful try: the sink is not failing. It writes only
// when the sink was failing, not for every event.
func (wk *worker) healthy() {
	if wk.failingSince.Load() != 0 {
		wk.failingSince.Store(0)
	}
}

// errPanicked stands for a sink call that panicked; never returned to users.
var errPanicked = errors.New("events: sink panicked")
