// Command quickstart shows herald in one minute: one broadcaster with a
// lossless and a lossy watcher, the registration barrier and a shutdown with
// a deadline; then an event recorder feeding a console sink, with counts
// growing and an aggregated event. Run it with `make demo`.
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/events"
)

func main() {
	fanout()
	fmt.Println()
	record()
}

func fanout() {
	fmt.Println("== broadcast: one publisher, a lossless and a lossy watcher")
	b := broadcast.New[int]()

	// Published before anyone watches: nobody will see these.
	for i := range 3 {
		_ = b.Publish(-1 - i)
	}

	// A lossless audit watcher (Block) and a lossy UI watcher that keeps only
	// the latest 5 values (DropOldest) and is slow to read.
	audit, _ := b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(8))
	ui, _ := b.Watch(broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(5))

	var wg sync.WaitGroup
	var audited []int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := range audit.All() {
			audited = append(audited, v)
		}
	}()

	// Everything published after Watch returned reaches the audit watcher.
	for i := range 100 {
		_ = b.Publish(i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := b.Shutdown(ctx) // delivers what was published, then closes watchers
	wg.Wait()

	var shown []int
	for v := range ui.C() { // queued values stay readable after Shutdown
		shown = append(shown, v)
	}
	fmt.Printf("shutdown: %v\n", err)
	fmt.Printf("audit (Block):     got %d values, first %d, last %d, dropped %d\n",
		len(audited), audited[0], audited[len(audited)-1], audit.Dropped())
	fmt.Printf("ui (DropOldest/5): got %v, dropped %d\n", shown, ui.Dropped())
	st := b.Stats()
	fmt.Printf("stats: published %d, dropped %d, watchers %d\n", st.Published, st.Dropped, st.Watchers)
}

// consoleSink prints what an API server would store.
type consoleSink struct{}

func (consoleSink) Create(_ context.Context, e *events.Event) (*events.Event, error) {
	fmt.Printf("create %-7s %-9s count=%d  %s\n", e.Type, e.Reason, e.Count, e.Message)
	return e, nil
}

func (consoleSink) Patch(_ context.Context, e *events.Event, p events.Patch) (*events.Event, error) {
	fmt.Printf("patch  %-7s %-9s count=%d  %s\n", e.Type, e.Reason, p.Count, p.Message)
	return e, nil
}

func record() {
	fmt.Println("== events: a recorder, the correlator, a console sink")
	b := events.NewBroadcaster()
	if _, err := b.StartRecordingToSink(consoleSink{}); err != nil {
		panic(err)
	}
	rec := b.NewRecorder(events.Source{Component: "quickstart"})
	pod := events.ObjectReference{Kind: "Pod", Namespace: "default", Name: "web-0"}
	for range 3 { // the same event again: one create, then patches counting up
		rec.Event(pod, events.Normal, "Pulled", "image pulled")
	}
	for i := 1; i <= 12; i++ { // near-duplicates: nine creates, then one aggregate event
		rec.Eventf(pod, events.Warning, "Unhealthy", "probe failed: %d", i)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil { // flushes what was recorded
		fmt.Println("shutdown:", err)
	}
	fmt.Printf("stats: %+v\n", b.Stats())
}
