package eventsbench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/events"
)

// pipelineFloor is BenchmarkPipeline/floor: BenchmarkPipeline/herald with the correlator,
// the naming, the counters and the reports taken out: the Recorder's work
// that the events contract requires of any implementation (an Event of its own for the
// sink, guarantee 6, stamped with the time, and one Sprintf for Eventf),
// published through the same broadcast ring to one goroutine that hands it
// to the same no-op sink. Same passes, batches, sentinels and GC as
// BenchmarkPipeline. What herald's pipeline costs above this figure is the
// correlation and the bookkeeping; this figure is the part of the pipeline
// no correlator can save, so client-go's figure over it is the most that any
// implementation of the events contract could reach in the same run.
func pipelineFloor(b *testing.B, stream []events.Event) {
	pipeline(b, func() (func(int), func(int), func(), func() int) {
		bc := broadcast.New[*events.Event](broadcast.WithQueueLength(events.DefaultQueueLength),
			broadcast.WithPolicy(broadcast.Drop))
		w, err := bc.Watch()
		if err != nil {
			b.Fatal(err)
		}
		sink := &heraldSink{sentinel: make(chan struct{}, 1)}
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for e := range w.All() {
				sink.Create(ctx, e) // never fails
			}
		}()
		record := func(src events.Source, o events.ObjectReference, typ, reason, msg string) {
			now := time.Now()
			ns := o.Namespace
			if ns == "" {
				ns = "default"
			}
			e := &events.Event{
				Namespace: ns, InvolvedObject: o, Reason: reason, Message: msg, Type: typ,
				Source: src, FirstTimestamp: now, LastTimestamp: now, Count: 1,
				ReportingController: src.Component, ReportingInstance: src.Host,
			}
			if ok, err := bc.TryPublish(e); !ok || err != nil {
				b.Fatalf("floor: event not published (ok %v, err %v)", ok, err)
			}
		}
		return func(j int) {
				e := &stream[j]
				msg := e.Message
				if j%2 == 1 {
					//lint:ignore S1025 the floor pays for the Sprintf that Eventf("%s", message) makes on half the events
					msg = fmt.Sprintf("%s", e.Message)
				}
				record(e.Source, e.InvolvedObject, e.Type, e.Reason, msg)
			}, func(k int) {
				record(events.Source{Component: "bench"},
					events.ObjectReference{Kind: "Pod", Namespace: "bench", Name: sentinelPrefix + strconv.Itoa(k)},
					events.Normal, "Sentinel", "end of batch")
			}, func() { <-sink.sentinel },
			func() int {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				if err := bc.Shutdown(ctx); err != nil {
					b.Fatal(err)
				}
				wg.Wait()
				return sink.writes
			}
	})
}
