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

	stopOnce    sync.Once
	stopped     atomic.Bool
	seenDropped atomic.Uint64 // w.Dropped() when last reported
}

// Stop implements Stopper: nothing more is queued for the worker, the
// events still queued for it are discarded, a retry in progress gives up
// (counted in Stats.Failed), and the sink's context is canceled. It returns
// at once, also from inside a handler; the goroutine exits when the call in
// progress returns, and Shutdown waits for that.
func (wk *worker) Stop() {
	wk.stopOnce.Do(func() {
		wk.stopped.Store(true)
		wk.cancel()
		wk.w.Stop()
		b := wk.b
		b.pubMu.Lock()
		b.consumers--
		b.pubMu.Unlock()
		b.mu.Lock()
		b.publishLive()
		b.mu.Unlock()
	})
}

func (wk *worker) run() {
	defer wk.b.workerExited()
	abandoned := uint64(0)
	for e := range wk.w.All() {
		if wk.ctx.Err() != nil {
			// Stopped (All ends at once) or Shutdown gave up: count what
			// is left.
			if !wk.stopped.Load() {
				abandoned++
				wk.b.abandoned.Add(1)
			}
			continue
		}
		wk.process(wk, e)
	}
	if abandoned > 0 {
		wk.b.rep.log().LogAttrs(context.Background(), slog.LevelError,
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
	defer func() {
		if !ok {
			r := recover()
			wk.b.failed.Add(1)
			wk.b.rep.log().LogAttrs(context.Background(), slog.LevelError,
				"events: handler or sink panicked",
				slog.String("by", wk.name), slog.String("panic", fmt.Sprint(r)),
				slog.String("stack", string(debug.Stack())))
		}
	}()
	f()
	return true
}
