package natsbridge

import (
	"log/slog"
	"sync"
	"time"
)

// warnInterval is the least time between two warnings of one link.
const warnInterval = 10 * time.Second

// warner reports a link's losses at Warn through its logger: the first at
// once, then at most one line per warnInterval; the reports in between are
// summed up in one line when the interval ends, and at Close. Each line
// says how many values it is about ("values": a gap of 40 lost values is
// one report of 40 values) and, for a summary, of how many reports.
type warner struct {
	kind, subject string
	lg            *slog.Logger // nil: slog.Default()

	mu         sync.Mutex
	next       time.Time // no line before this
	suppressed uint64    // reports since the last line, not yet logged
	values     uint64    // the values they are about
	lastMsg    string    // the latest of them
	lastErr    error
	timer      *time.Timer // reports the suppressed ones at next; nil if not armed
	closed     bool
}

func newWarner(kind, subject string) *warner {
	return &warner{kind: kind, subject: subject}
}

// warn reports one loss of n values (0: a report about no value in
// particular): msg says what was lost, err why.
func (w *warner) warn(n uint64, msg string, err error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	now := time.Now()
	if w.suppressed == 0 && !now.Before(w.next) {
		w.next = now.Add(warnInterval)
		w.mu.Unlock()
		w.log(msg, err, 1, n)
		return
	}
	w.suppressed++
	w.values += n
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
	msg, reports, values, err := w.takeSuppressed()
	w.mu.Unlock()
	w.log(msg, err, reports, values)
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
	msg, reports, values, err := w.takeSuppressed()
	w.mu.Unlock()
	if reports > 0 {
		w.log(msg, err, reports, values)
	}
}

// takeSuppressed returns and forgets the reports not yet logged: how many,
// the values they are about, and the latest one's description and cause;
// w.mu held.
func (w *warner) takeSuppressed() (msg string, reports, values uint64, cause error) {
	msg, reports, values, cause = w.lastMsg, w.suppressed, w.values, w.lastErr
	w.suppressed, w.values, w.lastMsg, w.lastErr = 0, 0, "", nil
	return msg, reports, values, cause
}

// log writes one line: reports reports about values values, the latest
// described by msg and err. Never called with w.mu held: the handler is
// the user's code.
func (w *warner) log(msg string, err error, reports, values uint64) {
	attrs := []any{"link", w.kind, "subject", w.subject}
	if err != nil {
		attrs = append(attrs, "error", err.Error())
	}
	if reports > 1 {
		msg += " (the latest of several reports)"
		attrs = append(attrs, "reports", reports)
	}
	attrs = append(attrs, "values", values)
	w.logger().Warn("natsbridge: "+msg, attrs...)
}

// logger is the link's logger: WithLogger's, or slog.Default().
func (w *warner) logger() *slog.Logger {
	if w.lg != nil {
		return w.lg
	}
	return slog.Default()
}
