package events

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/heraldgo/herald/broadcast"
)

// worker is the goroutine behind one Start call: it reads its watcher, in
// order, and processes each event (a handler call, or a sink write with its
// retries). No lock is held while it processes.
type worker struct {
	b       *Broadcaster
	w       *broadcast.Watcher[*recorded]
	name    string
	process func(*worker, *routine, *recorded)
	// main is the state of the goroutine that reads the watcher; each
	// goroutine of a concurrent sink has its own (see routine).
	main routine
	// conc is set for a sink with WithSinkConcurrency(n > 1): run hands
	// the events to it instead of processing them (see dispatch).
	conc *dispatch

	// ctx is canceled by Stop and when Shutdown gives up; sink calls get it.
	ctx    context.Context
	cancel context.CancelFunc

	stopOnce sync.Once
	// stopping is set by Stop before it cancels ctx, so that whoever sees
	// ctx end because of Stop counts what it gives up as discarded by Stop
	// (Failed), not as abandoned by Shutdown; stopped, later, once the
	// watcher is unregistered and recordedAtStop is set.
	stopping, stopped atomic.Bool
	// exited is set when the worker's goroutines have all returned.
	exited atomic.Bool
	// seenDropped is w.Dropped() when last reported (see claimDrops).
	seenDropped atomic.Uint64

	// recordedAtStart and recordedAtStop are b.recorded when the watcher
	// was registered and unregistered, under pubMu held for writing: the
	// difference is the number of events published to it. Written before
	// the goroutine starts and before stopped is set, respectively.
	recordedAtStart, recordedAtStop uint64
	// taken is the number of events the worker's loop has taken from the
	// watcher. Only the goroutine that reads the watcher uses it (a
	// goroutine that replaces one that called runtime.Goexit included).
	taken uint64

	// counts are this worker's share of Stats (see Broadcaster.StatsOf).
	counts workerCounts

	// finished is the number of events taken from the watcher that are
	// done with (written, skipped, given up, handled, discarded), for
	// Flush: a worker without conc finishes them in the order it takes
	// them. flush holds the Flush calls waiting for it.
	finished atomic.Uint64
	flush    flushWaiters
	// failingSince is when the sink's current run of failed tries began,
	// in unix nanos (0: the last try succeeded); see sinkFailed.
	failingSince atomic.Int64
}

// workerCounts are the counters of one worker. Their goroutines write
// them; Stats and StatsOf read them.
type workerCounts struct {
	skipped, aggregated, written atomic.Uint64
	failed, abandoned, handled   atomic.Uint64
	// dropped counts the events a concurrent sink dropped at its full
	// queue (see dispatch.take); its watcher counts the others.
	dropped atomic.Uint64
}

// routine is the state of one goroutine that processes events.
type routine struct {
	// place is for the Correlator of a sink that is r's only consumer.
	place inPlace
	// goexitCounted is set by call when it has counted a runtime.Goexit
	// of a handler or sink, for the goroutine's recovery, which counts any
	// other.
	goexitCounted bool
	// spare gathers the recorded events the worker gives back for reuse,
	// freeBatch at a time (see freeList).
	spare []*recorded
}

// Stop implements Stopper: nothing more is queued for the worker, the
// events still queued for it are discarded (counted in Stats.Failed and
// reported), a retry in progress gives up (counted in Stats.Failed), and the
// sink's context is canceled. It returns at once, also from inside a
// handler; the goroutine exits when the call in progress returns, and
// Shutdown waits for that.
func (wk *worker) Stop() {
	wk.stopOnce.Do(func() {
		wk.stopping.Store(true)
		wk.cancel()
		b := wk.b
		// Unregister under pubMu, so that no event is published between
		// the count of those published to the watcher and its end: run
		// counts the ones it did not take as discarded.
		b.pubMu.Lock()
		wk.recordedAtStop = b.recorded.Load()
		wk.stopped.Store(true)
		wk.w.Stop()
		b.consumers--
		b.pubMu.Unlock()
		b.mu.Lock()
		b.publishLive()
		b.mu.Unlock()
		wk.releaseFlushes() // Flush waits for started workers only
	})
}

func (wk *worker) run() {
	exited := false
	defer func() {
		if !exited {
			// The goroutine is ending early. Either a handler or sink
			// call called runtime.Goexit (t.Fatal, t.FailNow), and call
			// counted that event in Failed; or user code outside call
			// panicked or called runtime.Goexit on the event being
			// processed, which is then lost: a function of the sink's
			// CorrelatorOptions (KeyFunc, MessageFunc, SpamKeyFunc), or a
			// method of an error the sink returned (errors.Is calls Is).
			// Count and report that (a panic must not take the process
			// down), and go on serving the rest from a new goroutine;
			// Shutdown keeps waiting for it (active is unchanged).
			wk.recoverEvent(&wk.main, recover())
			wk.finish()
			go wk.run()
			return
		}
		wk.process = nil // the sink and its correlator, for a Stopper kept after its end
		wk.exited.Store(true)
		wk.releaseFlushes()
		wk.b.workerExited(wk)
	}()
	abandoned, discarded := uint64(0), uint64(0)
	for e := range wk.w.All() {
		wk.taken++
		if wk.ctx.Err() != nil {
			// Stopped (All ends at once) or Shutdown gave up: count what
			// is left.
			if wk.giveUpQueued() {
				discarded++
			} else {
				abandoned++
			}
			wk.finishTaken()
			continue
		}
		if wk.conc != nil {
			wk.conc.take(e)
			continue
		}
		wk.process(wk, &wk.main, e)
		wk.finish()
	}
	if wk.conc != nil {
		// The goroutines still writing end once their objects' queues are
		// written (or given up, if ctx ended); their counts must be final
		// before the worker is gone.
		wk.conc.wg.Wait()
	}
	exited = true
	// Drops no Recorder reported: one that made the watcher drop may have
	// looked at the live workers after Stop took this one out. The
	// watcher is unregistered now, so the count is final.
	if n := wk.claimDrops(); n > 0 {
		wk.reportDrops(n, nil)
	}
	if wk.stopped.Load() {
		// The events published to the watcher that it neither dropped
		// nor yielded were still queued when Stop ended it.
		n := wk.recordedAtStop - wk.recordedAtStart - wk.w.Dropped() - wk.taken
		wk.counts.failed.Add(n)
		discarded += n
	}
	if discarded > 0 {
		wk.b.rep.add(causeStopped, discarded, nil, nil, slog.String("by", wk.name))
	}
	if abandoned > 0 {
		wk.b.rep.logAttrs(context.Background(), slog.LevelError,
			"events: events abandoned at Shutdown",
			slog.String("by", wk.name), slog.Uint64("abandoned", abandoned))
	}
	if wk.b.closed.Load() {
		// After a Shutdown that gave up, this worker may be the last to
		// count something: report what the rate limit held back.
		wk.b.rep.flush()
	}
}

// releaseFlushes ends the Flush calls waiting for wk, now and from now on.
func (wk *worker) releaseFlushes() {
	wk.flush.releaseAll()
	if wk.conc != nil {
		wk.conc.releaseAll()
	}
}

// giveUpQueued counts a queued event that the worker will not process
// because its ctx ended: discarded by Stop (Failed, true) or abandoned at
// Shutdown (Abandoned, false).
func (wk *worker) giveUpQueued() (byStop bool) {
	if wk.stopping.Load() {
		wk.counts.failed.Add(1)
		return true
	}
	wk.counts.abandoned.Add(1)
	return false
}

// recoverEvent counts and reports the event lost when a goroutine of wk
// ended early on it (see run), r being what it recovered.
func (wk *worker) recoverEvent(g *routine, r any) {
	switch {
	case r != nil:
		wk.failure("events: a CorrelatorOptions function (or an error's method) panicked; the event is not written, the next ones are", r)
	case !g.goexitCounted:
		wk.failure("events: a CorrelatorOptions function (or an error's method) called runtime.Goexit (t.Fatal or t.FailNow?); the event is not written, the next ones are", nil)
	}
	g.goexitCounted = false
}

// finish marks the latest event taken as done with, for Flush, when
// events are finished in the order taken (no conc).
func (wk *worker) finish() {
	if f := wk.finished.Add(1); f >= wk.flush.want.Load() {
		wk.flush.release(f)
	}
}

// finishTaken is finish for the event just taken, with or without conc.
func (wk *worker) finishTaken() {
	if wk.conc != nil {
		wk.conc.finishTaken()
		return
	}
	wk.finish()
}

// handle runs a handler call, turning a panic into a report.
func (wk *worker) handle(g *routine, f func()) {
	if wk.call(g, f) {
		wk.counts.handled.Add(1)
	}
}

// call runs f and reports whether it returned normally; a panic is reported
// and counted in Stats.Failed.
func (wk *worker) call(g *routine, f func()) (ok bool) {
	// A panic(nil) recovered below looks like a Goexit under
	// GODEBUG=panicnil=1, and does not end the goroutine: the flag is about
	// this call only.
	g.goexitCounted = false
	defer func() {
		if !ok {
			r := recover()
			msg := "events: handler or sink panicked"
			if r == nil {
				// Not a panic (panic(nil) recovers a *runtime.PanicNilError):
				// runtime.Goexit, which run survives.
				msg = "events: handler or sink called runtime.Goexit (t.Fatal or t.FailNow?); the next events are still handled"
				g.goexitCounted = true
			}
			wk.failure(msg, r)
		}
	}()
	f()
	return true
}

// failure counts an event lost to a panic (r) or a runtime.Goexit (r nil)
// in Stats.Failed and reports it with the stack, which, called from a
// deferred function, still holds the frames that panicked.
func (wk *worker) failure(msg string, r any) {
	wk.counts.failed.Add(1)
	wk.b.rep.logAttrs(context.Background(), slog.LevelError, msg,
		slog.String("by", wk.name), slog.String("panic", fmt.Sprint(r)),
		slog.String("stack", string(debug.Stack())))
}
