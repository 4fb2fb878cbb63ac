// Package k8stest has a recorder for the tests of a controller: a
// [Recorder] keeps in memory every event the code under test records,
// through client-go's tools/record API ([Recorder.CoreV1], a
// record.EventRecorderLogger) or its tools/events API ([Recorder.EventsV1],
// an events.EventRecorderLogger and AnnotatedEventRecorder, which is also
// controller-runtime's recorder.EventRecorder), and lets the test read
// them as a slice of [Event]s.
//
// client-go's record.FakeRecorder sends each event to a buffered channel
// and blocks the controller once the buffer is full; a Recorder never
// blocks (it appends to a slice), starts no goroutine, and is safe for
// concurrent use:
//
//	var rec k8stest.Recorder
//	r := &MyReconciler{Recorder: rec.EventsV1()} // or rec.CoreV1() for tools/record
//	r.Reconcile(ctx, req)
//	for _, e := range rec.Events() { ... } // e.Type, e.Reason, e.Action, e.Message, e.Regarding, ...
//
// A test whose controller records from other goroutines waits with
// [Recorder.Wait].
//
// It is a fake, not a pipeline: there is no correlation, series,
// validation or rate limit; each call is one Event, as the code under test
// made it.
package k8stest
