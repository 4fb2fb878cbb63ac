// Package eventstest provides test doubles for package events: a
// [FakeRecorder] that keeps what it is given in memory, a [FakeSink] that
// stores events and fails on demand (the benchmark streams live in the
// repository's internal/eventstream).
//
// A FakeRecorder stands in for an [events.Recorder] in the code under test:
//
//	rec := &eventstest.FakeRecorder{}
//	reconcile(rec)
//	rec.Expect(t, "Warning BackOff restarting container")
//
// A FakeSink stands in for the store behind [events.Broadcaster.StartRecordingToSink]:
//
//	sink := eventstest.NewFakeSink()
//	sink.FailNext(eventstest.OpCreate, 2, errors.New("connection refused"))
//	b := events.NewBroadcaster(events.WithRetry(3, time.Second))
//	b.StartRecordingToSink(sink)
//
// Both are safe for concurrent use.
package eventstest
