package broadcast_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// One broadcaster, two policies: an audit log that must see everything
// (Block: a slow audit reader holds publishers up rather than lose a value)
// and a UI that only needs the latest values (DropOldest: it never holds
// anyone up, and counts what it skipped).
func Example_policies() {
	b := broadcast.New[int]()
	audit, _ := b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
	ui, _ := b.Watch(broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(2))

	logged := make(chan []int)
	go func() {
		var got []int
		for v := range audit.All() {
			got = append(got, v)
		}
		logged <- got
	}()

	for v := 1; v <= 5; v++ {
		b.Publish(v) // may wait for the audit reader, never for the UI
	}
	b.Shutdown(context.Background())

	fmt.Println("audit:", <-logged)
	var shown []int
	for v := range ui.C() { // the UI was too busy to read until now
		shown = append(shown, v)
	}
	fmt.Println("ui:", shown, "skipped:", ui.Dropped())
	// Output:
	// audit: [1 2 3 4 5]
	// ui: [4 5] skipped: 3
}

// The registration barrier: a watcher gets every value published after its
// Watch returned, and none published before Watch was called.
func Example_registrationBarrier() {
	b := broadcast.New[string]()
	b.Publish("before") // no watcher yet: nobody receives it
	w, _ := b.Watch()
	b.Publish("after") // published after Watch returned: w receives it
	b.Shutdown(context.Background())

	for v := range w.All() {
		fmt.Println(v)
	}
	// Output:
	// after
}

// A watcher that needs the current state and then every change: the prefix
// (the state) comes first and is never dropped, then the live values, with
// nothing missed or repeated between them.
func ExampleBroadcaster_WatchWithPrefix() {
	b := broadcast.New[string]()
	b.Publish("a=1")
	b.Publish("b=2")
	state := []string{"a=1", "b=2"} // what a new watcher must know first

	w, _ := b.WatchWithPrefix(state, broadcast.WithQueueLength(1))
	b.Publish("a=3")
	b.Publish("c=4") // queue length 1 (the prefix does not count): dropped
	b.Shutdown(context.Background())

	for v := range w.C() {
		fmt.Println(v)
	}
	fmt.Println("dropped:", w.Dropped())
	// Output:
	// a=1
	// b=2
	// a=3
	// dropped: 1
}

// Shutdown with a deadline, as a process does on exit: what was published is
// delivered, then every watcher ends; values still queued stay readable.
// Had a Block watcher kept a Publish waiting past the deadline, Shutdown would
// have returned ctx.Err() and counted the undelivered values as dropped.
func ExampleBroadcaster_Shutdown() {
	b := broadcast.New[string]()
	w, _ := b.Watch()
	b.Publish("started")
	b.Publish("stopping")

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Println("Shutdown:", b.Shutdown(ctx))
	fmt.Println("Publish after Shutdown is ErrClosed:", errors.Is(b.Publish("late"), broadcast.ErrClosed))

	for v := range w.C() { // queued values first, then the channel is closed
		fmt.Println(v)
	}
	// Output:
	// Shutdown: <nil>
	// Publish after Shutdown is ErrClosed: true
	// started
	// stopping
}

// Reading with All: a range loop that ends when the watcher ends. Breaking
// out of it leaves the watcher registered; the next loop goes on from there.
func ExampleWatcher_All() {
	b := broadcast.New[string]()
	w, _ := b.Watch()
	for _, v := range []string{"a", "b", "c"} {
		b.Publish(v)
	}

	for v := range w.All() {
		fmt.Println(v)
		if v == "b" {
			break // w is still registered: "c" stays queued
		}
	}
	b.Publish("d")
	b.Shutdown(context.Background())

	for v := range w.All() { // the rest, then the loop ends
		fmt.Println(v)
	}
	// Output:
	// a
	// b
	// c
	// d
}
