package events

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"
)

// reportInterval is the least time between two reports of one cause. The
// first occurrence is reported at once; later ones are summed into the next
// report, so a flood of drops or skips costs a few log lines, not one per
// event (logging each would add load exactly when the process is
// overloaded). Shutdown reports what is left.
//
// The levels (doc.go, "Reports", tells users): Warn for events lost to load
// or to the broadcaster's lifecycle (a full queue, recording after
// Shutdown, events still queued for a watcher or sink that Stop ended);
// Error for events lost to a bug or a failing sink (an invalid
// type, a Recorder of a zero Broadcaster, a rejected event, retries
// exhausted or cut short, events abandoned at Shutdown) and for a
// CorrelatorOptions.Now that panicked (the event is kept, stamped with
// time.Now); Debug for the
// correlator's routine decisions, which lose no occurrence from the counts
// a user reads (aggregation) or withhold events by a policy the user can
// turn off (the spam filter): a library is quiet by default, and a
// controller in an event storm would otherwise log a line every 10 seconds
// per decision about nothing its operator must act on. Two reports are not rate-limited, because each
// is rare and carries its own information: a panic of a handler, a sink or a
// sink's CorrelatorOptions function
// (Error, with its stack; worker.go) and Shutdown giving up (Error, once).
// A retry is logged at Debug (sink.go), at most once per retry sleep.
const reportInterval = 10 * time.Second

type cause int

const (
	causeQueueFull cause = iota
	causeClosed
	causeInvalid
	causeSkipped
	causeAggregated
	causeRejected
	causeRetriesExhausted
	causeGaveUp
	causeNoBroadcaster
	causeStopped
	causeClockPanicked
	causeSinkFailing
	nCauses
)

var causeInfo = [nCauses]struct {
	level slog.Level
	msg   string
}{
	causeQueueFull:        {slog.LevelWarn, "events: queue full, events dropped (see WithQueueLength)"},
	causeClosed:           {slog.LevelWarn, "events: event recorded after Shutdown, dropped"},
	causeInvalid:          {slog.LevelError, "events: invalid event not recorded (see Event.Validate)"},
	causeSkipped:          {slog.LevelDebug, "events: spam filter skipped events (see CorrelatorOptions.BurstSize and QPS)"},
	causeAggregated:       {slog.LevelDebug, "events: similar events aggregated (see CorrelatorOptions.MaxEvents)"},
	causeRejected:         {slog.LevelError, "events: sink rejected event, will not retry"},
	causeRetriesExhausted: {slog.LevelError, "events: unable to write event, retry limit exceeded"},
	causeGaveUp:           {slog.LevelError, "events: unable to write event, stopped or shut down while retrying"},
	causeNoBroadcaster:    {slog.LevelError, "events: Recorder of a Broadcaster not made by NewBroadcaster, event dropped"},
	causeStopped:          {slog.LevelWarn, "events: watcher or sink stopped, events still queued for it discarded"},
	causeClockPanicked:    {slog.LevelError, "events: CorrelatorOptions.Now panicked; events stamped with time.Now instead"},
	causeSinkFailing:      {slog.LevelWarn, "events: sink failing for a while, events are retried and will be lost if it goes on (see WithRetry)"},
}

// orphanReports reports for the Recorders of a nil or zero Broadcaster,
// which have no reporter of their own.
var orphanReports reporter

// reporter logs counted troubles, at most once per reportInterval per cause.
// It is lock-free: Recorders call it.
type reporter struct {
	logger *slog.Logger // nil: slog.Default()
	c      [nCauses]struct {
		pending atomic.Uint64 // occurrences not reported yet
		next    atomic.Int64  // unix nanos before which no report is due
	}
}

func (r *reporter) log() *slog.Logger {
	if r.logger != nil {
		return r.logger
	}
	return slog.Default()
}

// add counts n occurrences of c, the latest about e (may be nil) with err
// (may be nil), and reports them if one is due.
func (r *reporter) add(c cause, n uint64, e *Event, err error, attrs ...slog.Attr) {
	s := &r.c[c]
	s.pending.Add(n)
	t := now().UnixNano()
	next := s.next.Load()
	if t < next || !s.next.CompareAndSwap(next, t+int64(reportInterval)) {
		return
	}
	r.emit(c, s.pending.Swap(0), e, err, attrs)
}

// flush reports every pending count.
func (r *reporter) flush() {
	for c := range nCauses {
		if n := r.c[c].pending.Swap(0); n > 0 {
			r.emit(c, n, nil, nil, []slog.Attr{slog.Bool("final", true)})
		}
	}
}

func (r *reporter) emit(c cause, n uint64, e *Event, err error, attrs []slog.Attr) {
	if n == 0 {
		return
	}
	info := causeInfo[c]
	r.safely(func(l *slog.Logger) {
		if !l.Enabled(context.Background(), info.level) {
			return
		}
		all := make([]slog.Attr, 0, len(attrs)+3)
		all = append(all, slog.Uint64("count", n))
		if err != nil {
			all = append(all, errAttr(err))
		}
		if e != nil {
			all = append(all, eventAttr(e))
		}
		for _, a := range attrs {
			if a.Value.Kind() == slog.KindString {
				a.Value = slog.StringValue(clip(a.Value.String()))
			}
			all = append(all, a)
		}
		l.LogAttrs(context.Background(), info.level, info.msg, all...)
	})
}

// logAttrs logs one record through the reporter's logger (see safely).
func (r *reporter) logAttrs(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	r.safely(func(l *slog.Logger) { l.LogAttrs(ctx, level, msg, attrs...) })
}

// safely calls f with the reporter's logger. A logger whose handler panics
// must not take its caller with it (a Recorder never panics, a worker goes
// on): the report is lost, and a line on standard error says so, since the
// logger cannot.
func (r *reporter) safely(f func(l *slog.Logger)) {
	defer func() {
		if p := recover(); p != nil {
			fmt.Fprintf(lostReports, "events: the logger panicked (%v); a report was lost\n", p)
		}
	}()
	f(r.log())
}

// lostReports is where safely says that a report was lost: standard
// error, or a buffer in tests.
var lostReports io.Writer = os.Stderr

// maxReportField is the most bytes of one field (an event's message, an
// error's text, ...) that a report writes. A report is one log line; the
// event that caused it may be invalid precisely because a field is huge
// (an 8 MiB message made one 8,388,886-byte line), and a line that size
// hurts the log pipeline more than the lost event hurt the program.
const maxReportField = 1024

// clip returns s if it fits in maxReportField bytes, else its first
// bytes (cut at a rune boundary) followed by how long s was.
func clip(s string) string {
	if len(s) <= maxReportField {
		return s
	}
	n := maxReportField
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…(truncated, " + strconv.Itoa(len(s)) + " bytes)"
}

// errAttr is err in a report: the error itself, or its clipped text when
// that is too long to log whole.
func errAttr(err error) slog.Attr {
	if msg := err.Error(); len(msg) > maxReportField {
		return slog.String("err", clip(msg))
	}
	return slog.Any("err", err)
}

// eventAttr describes e in a report, each string clipped (see clip).
func eventAttr(e *Event) slog.Attr {
	return slog.Group("event",
		slog.String("object", clip(objectName(&e.InvolvedObject))),
		slog.String("kind", clip(e.InvolvedObject.Kind)),
		slog.String("type", clip(e.Type)),
		slog.String("reason", clip(e.Reason)),
		slog.String("message", clip(e.Message)),
		slog.Int("count", int(e.Count)))
}
