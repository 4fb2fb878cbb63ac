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
	process func(*worker, *recorded)
	place   inPlace // for the Correlator of a sink that is r's only consumer

	// ctx is canceled by Stop and when Shutdown gives up; sink calls get it.
	ctx    context.Context
	cancel context.CancelFunc

	stopOnce sync.Once
	// stopping is set by Stop before it cancels ctx, so that whoever sees
	// ctx end because of Stop counts what it gives up as discarded by Stop
	// (Failed), not as abandoned by Shutdown; stopped, later, once the
	// watcher is unregistered and recordedAtStop is set.
	stopping, stopped atomic.Bool
	// seenDropped is w.Dropped() when last reported (see claimDrops).
	seenDropped atomic.Uint64

	// recordedAtStart and recordedAtStop are b.recorded when the watcher
	// was registered and unregistered, under pubMu held for writing: the
	// difference is the number of events published to it. Written before
	// the goroutine starts and before stopped is set, respectively.
	recordedAtStart, recordedAtStop uint64
	// goexitCounted is set by call when it has counted a runtime.Goexit
	// of a handler or sink, for run's recovery, which counts any other.
	// Only the worker's goroutine uses it.
	goexitCounted bool
	// taken is the number of events the worker's loop has taken from the
	// watcher. Only the worker's goroutine uses it (a goroutine that
	// replaces one that called runtime.Goexit included).
	taken uint64
	// spare gathers the recorded events the worker gives back for reuse,
	// freeBatch at a time (see freeList). Only the worker's goroutine
	// uses it.
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
			switch r := recover(); {
			case r != nil:
				wk.failure("events: a CorrelatorOptions function (or an error's method) panicked; the event is not written, the next ones are", r)
			case !wk.goexitCounted:
				wk.failure("events: a CorrelatorOptions function (or an error's method) called runtime.Goexit (t.Fatal or t.FailNow?); the event is not written, the next ones are", nil)
			}
			wk.goexitCounted = false
			go wk.run()
			return
		}
		wk.process = nil // the sink and its correlator, for a Stopper kept after its end
		wk.b.workerExited(wk)
	}()
	abandoned, discarded := uint64(0), uint64(0)
	for e := range wk.w.All() {
		wk.taken++
		if wk.ctx.Err() != nil {
			// Stopped (All ends at once) or Shutdown gave up: count what
			// is left.
			if wk.stopping.Load() {
				discarded++
			} else {
				abandoned++
				wk.b.abandoned.Add(1)
			}
			continue
		}
		wk.process(wk, e)
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
		discarded += wk.recordedAtStop - wk.recordedAtStart - wk.w.Dropped() - wk.taken
	}
	if discarded > 0 {
		wk.b.failed.Add(discarded)
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

// handle runs a handler call, turning a panic into a report.
func (wk *worker) handle(f func()) {
	if wk.call(f) {
		wk.b.handled.Add(1)
	}
}

// call runs f and reports whether it returned normally; a panic is reported
// and counted in Stats.Failed.
func (wk *worker) call(f func()) (ok bool) {
	// A panic(nil) recovered below looks like a Goexit under
	// GODEBUG=panicnil=1, and does not end the goroutine: the flag is about
	// this call only.
	wk.goexitCounted = false
	defer func() {
		if !ok {
			r := recover()
			msg := "events: handler or sink panicked"
			if r == nil {
				// Not a panic (panic(nil) recovers a *runtime.PanicNilError):
				// runtime.Goexit, which run survives.
				msg = "events: handler or sink called runtime.Goexit (t.Fatal or t.FailNow?); the next events are still handled"
				wk.goexitCounted = true
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
	wk.b.failed.Add(1)
	wk.b.rep.logAttrs(context.Background(), slog.LevelError, msg,
		slog.String("by", wk.name), slog.String("panic", fmt.Sprint(r)),
		slog.String("stack", string(debug.Stack())))
}
