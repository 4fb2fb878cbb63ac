package natsbridge

import (
	"log/slog"
	"sync"
	"time"
)

// warnInterval is the least time between two warnings of one link.
const warnInterval = 10 * time.Second

// warner reports a link's losses at Warn through slog.Default: the first
// at once, then at most one line per warnInterval; the losses in between
// are summed up in one line when the interval ends, and at Close.
type warner struct {
	kind, subject string
	lg            *slog.Logger // nil: slog.Default()

	mu         sync.Mutex
	next       time.Time // no line before this
	suppressed uint64    // losses since the last line, not yet reported
	lastMsg    string    // the latest of them
	lastErr    error
	timer      *time.Timer // reports the suppressed ones at next; nil if not armed
	closed     bool
}

func newWarner(kind, subject string) *warner {
	return &warner{kind: kind, subject: subject}
}

// warn reports one loss: msg says what was lost, err why.
func (w *warner) warn(msg string, err error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	now := time.Now()
	if w.suppressed == 0 && !now.Before(w.next) {
		w.next = now.Add(warnInterval)
		w.mu.Unlock()
		w.log(msg, err, 1)
		return
	}
	w.suppressed++
	w.lastMsg, w.lastErr = msg, err
	if w.timer == nil {
		w.timer = time.AfterFunc(w.next.Sub(now), w.flushTimer)
	}
	w.mu.Unlock()
}

func (w *warner) flushTimer() {
	w.mu.Lock()
	w.timer = nil
	if w.closed || w.suppressed == 0 {
		w.mu.Unlock()
		return
	}
	w.next = time.Now().Add(warnInterval)
	msg, n, err := w.takeSuppressed()
	w.mu.Unlock()
	w.log(msg, err, n)
}

// close stops the timer and reports what is still suppressed: the summary.
// Losses after close are counted in the link's Stats but not logged.
func (w *warner) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	msg, n, err := w.takeSuppressed()
	w.mu.Unlock()
	if n > 0 {
		w.log(msg, err, n)
	}
}

// takeSuppressed returns and forgets the losses not yet logged: how many,
// and the latest one's description and cause; w.mu held.
func (w *warner) takeSuppressed() (msg string, n uint64, cause error) {
	msg, n, cause = w.lastMsg, w.suppressed, w.lastErr
	w.suppressed, w.lastMsg, w.lastErr = 0, "", nil
	return msg, n, cause
}

// log writes one line: n losses, the latest described by msg and err.
// Never called with w.mu held: the handler is the user's code.
func (w *warner) log(msg string, err error, n uint64) {
	attrs := []any{"link", w.kind, "subject", w.subject}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	if n > 1 {
		msg += " (latest of several)"
	}
	attrs = append(attrs, "count", n)
	w.logger().Warn("natsbridge: "+msg, attrs...)
}

// logger is the link's logger: WithLogger's, or slog.Default().
func (w *warner) logger() *slog.Logger {
	if w.lg != nil {
		return w.lg
	}
	return slog.Default()
}
