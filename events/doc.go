// Package events records Kubernetes-style events about objects and delivers
// them, correlated, to sinks, logs and handlers: client-go's
// tools/record pipeline (record → correlate → write with retries) with no
// Kubernetes dependency, on top of package
// [github.com/heraldgo/herald/broadcast].
//
// # Usage
//
// A [Broadcaster] owns the pipeline. Start what should receive events, hand
// out a [Recorder] per reporting component, and shut down before exiting:
//
//	b := events.NewBroadcaster(events.WithLogger(logger))
//	b.StartRecordingToSink(apiServerSink)          // correlated, retried
//	b.StartStructuredLogging(logger, slog.LevelDebug)
//	rec := b.NewRecorder(events.Source{Component: "my-controller", Host: host})
//
//	rec.Eventf(ref, events.Warning, "BackOff", "restarting container %s", name)
//
//	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
//	defer cancel()
//	b.Flush(ctx)    // waits until what was recorded is written; stops nothing
//	b.Shutdown(ctx) // writes what was recorded, then stops
//
// Against a real API server, whose calls take milliseconds, give the sink
// [WithSinkConcurrency] and a [WithQueueLength] that holds a storm: one
// call at a time writes a few hundred events per second.
//
// Each [Broadcaster.StartRecordingToSink] gets its own [Correlator], which
// decides per event, with client-go's defaults (see [CorrelatorOptions]):
//
//   - de-duplication: an event seen before is written as a [Patch] of the
//     first occurrence, with Count 2, 3, …, the first's Name and
//     FirstTimestamp, and the newest LastTimestamp;
//   - aggregation: events that differ only in message are similar; the
//     MaxEvents-th (10th) distinct message within MaxInterval (10 minutes),
//     and every similar event after it until the group is quiet for
//     MaxInterval, become one aggregate event whose message starts with
//     [AggregatePrefix] and whose count grows;
//   - spam filter: a token bucket per source, object and type lets
//     BurstSize (25) events through, then one per 1/QPS (5 minutes).
//
// Set [CorrelatorOptions.BurstSize] or [CorrelatorOptions.MaxEvents] to
// [Disable] to turn a stage off, and KeyFunc, MessageFunc or SpamKeyFunc to
// change how events are grouped. The default keys encode each field with
// its length, so distinct events never share a key (client-go joins the
// fields with no separator). Package [github.com/heraldgo/herald/events/eventstest] has a
// FakeRecorder and a FakeSink for tests. DESIGN.md, beside this file, records
// the design choices and their measurements.
//
// # Guarantees
//
//  1. The same event recorded again reaches the sink as a Patch with Count
//     2, 3, …, the first event's Name and FirstTimestamp, and the newest
//     LastTimestamp.
//  2. Aggregation is deterministic: after the MaxEvents-th distinct message
//     every similar event is aggregated, repeats included, until MaxInterval
//     passes with no similar event. (client-go forgets a random message at
//     that point and lets some repeats through as plain events.)
//  3. The spam filter lets BurstSize events per source+object through, then
//     one per 1/QPS.
//  4. [ErrNotFound] from Patch falls back to Create; [ErrAlreadyExists] and
//     [ErrRejected] are not retried; other errors are retried up to the
//     [WithRetry] tries, the first sleep jittered.
//  5. A Recorder never blocks its caller and never panics, also after
//     Shutdown; Start methods after Shutdown return an error wrapping
//     [broadcast.ErrClosed]; an invalid event (see [Event.Validate]: a
//     Type other than [Normal] or [Warning], or what no API server
//     stores) is not recorded, and is counted and
//     reported.
//  6. Every watcher and sink gets its own copy: a handler that changes an
//     Event, Annotations included, changes nothing others see.
//  7. Shutdown flushes (see below).
//  8. With [WithSinkConcurrency](n), events about one involved object
//     (Kind, Namespace, Name, UID, APIVersion) are correlated and written
//     one at a time, in recording order, each after the previous one's sink
//     call, retries included, returned; events about different objects
//     overlap, up to n calls in flight per sink. A retrying event holds up
//     its own object only. Events waiting for their turn count against
//     [WithQueueLength]. The stored result is the same as with n = 1 as
//     long as the correlator's caches hold every key.
//  9. [Broadcaster.Flush] returns once every event recorded before it was
//     written, skipped or given up by every started sink and handled by
//     every watcher (ctx.Err() if ctx ends first); it stops nothing, and
//     returns at once after Shutdown.
//  10. Quiet by default: routine decisions (aggregation, spam filtering,
//     retries) are never logged above Debug; losses are reported at Warn or
//     above (see Reports).
//
// Nothing is lost silently: events dropped at a full queue or after
// Shutdown, invalid events, events the spam filter skipped or aggregated,
// events a sink did not store and events discarded by Stop are counted in
// [Broadcaster.Stats] (per sink and watcher in [Broadcaster.StatsOf]) and
// reported to the [WithLogger] logger (slog.Default() otherwise), and the
// losses among them make Flush and Shutdown return a [LostError].
//
// Every name a Broadcaster gives an event, an aggregate event's included, is
// unique among the names it gave, even when the clock does not move between
// events (see [CorrelatorOptions.Now]); a Correlator used on its own gives
// its aggregate events names unique among them.
//
// # Reports
//
// Reports of one kind are logged at once, then at most once per 10 seconds
// with the count since the last one (the attribute "count"), and what is
// left at Shutdown, so that a flood of drops does not become a flood of log
// lines. A string field of a report (an event's message, reason, type,
// object name, an error's text) longer than 1 KiB is cut there and ends
// "…(truncated, N bytes)" with its length, so no report is an unbounded
// line. Their levels:
//
//   - Warn: events lost to load or to the lifecycle: a full queue
//     ([WithQueueLength]), an event recorded after Shutdown began, events
//     still queued for a watcher or sink when its [Stopper.Stop] was
//     called; and a sink that has failed every try for 30 seconds (with
//     its error), long before the default retries give its event up.
//   - Error: events lost to a bug or to a failing sink: an invalid event
//     (see [Event.Validate]), a Recorder of a Broadcaster not made by
//     NewBroadcaster, an event the sink rejected, retries exhausted or cut
//     short by Stop or Shutdown, events abandoned when Shutdown's ctx ended,
//     a [CorrelatorOptions].Now that panicked in a Recorder (the event is
//     stamped with time.Now instead). Two Error reports are logged every
//     time, because each is rare and carries its own information: a
//     handler, sink or function of a sink's CorrelatorOptions (KeyFunc,
//     MessageFunc, SpamKeyFunc) that panicked or called runtime.Goexit
//     (with the panic value and stack), and Shutdown giving up.
//   - Debug: the pipeline's routine decisions, which lose nothing a user
//     must act on: events the spam filter skipped (a policy that [Disable]
//     turns off), events written as part of an aggregate event (their
//     occurrences are counted in it), and each retry of a sink write (at
//     most one per retry sleep). A Broadcaster is quiet by default: with
//     the default logger (slog.Default, at Info) it logs nothing unless an
//     event is lost.
//
// # Concurrency
//
// Recorders, the Broadcaster's methods and a Correlator are safe for
// concurrent use. A Recorder call that returns has either queued the event
// for every started watcher and sink that had room (and the event happens
// before its delivery to them), or dropped, counted and reported it; it
// never waits for a watcher or sink. Each watcher and sink has its own queue
// ([WithQueueLength], 1000 by default) and one goroutine, so a slow sink
// delays only itself: when its queue is full, events are dropped for it
// alone.
//
// A sink is called from its goroutine one event at a time, in recording
// order (a Patch must follow the Create it patches), never while a lock is
// held, with retries sleeping on that goroutine: no goroutine is started per
// event. With [WithSinkConcurrency](n > 1), the sink's goroutine hands each
// event to a goroutine per involved object being written, at most n (none
// when the sink is idle), which writes that object's events in recording
// order; a sink must then be safe for concurrent use. A handler is called the same way; it may call Stop on its own
// [Stopper]. A handler or sink call that panics or calls runtime.Goexit (as
// t.Fatal does), or a function of the sink's CorrelatorOptions that panics,
// fails that event only: it is counted in Stats().Failed and reported, and
// the next events are handled (after a Goexit or a CorrelatorOptions panic,
// by a new goroutine). Reports are logged synchronously, also from Recorder calls,
// so the [WithLogger] logger must not block.
//
// # Shutdown
//
// [Broadcaster.Shutdown](ctx) stops recording: from its start, Recorders
// drop (count and report) what they are given and the Start methods fail.
// Every event recorded before Shutdown began reaches every started sink,
// with its retries, and every watcher; then every goroutine of the
// broadcaster has exited and Shutdown returns nil, or, if events were lost
// since the last [LostError] that Flush or Shutdown returned (a full queue,
// invalid events, a sink that rejected or never stored an event), a
// LostError with their counts, which wraps [ErrLost]. A short-lived process
// that calls Shutdown before exiting loses none of its last events, and
// learns from the error if some were lost before.
//
// If ctx ends first, Shutdown returns ctx.Err() at once, even if a sink
// ignores its context: the sinks' contexts are canceled, retry sleeps end,
// the events not written are counted in Stats().Abandoned and reported, and
// a worker still inside a sink call exits as soon as that call returns.
// [Stopper.Stop] ends one watcher or sink the same way, discarding what was
// still queued for it (counted in Stats().Failed and reported).
package events
