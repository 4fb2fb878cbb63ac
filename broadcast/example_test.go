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

// Resume after a reconnect: a client remembers the sequence number of the
// last value it got (as Server-Sent Events' Last-Event-ID does) and asks for
// the values after it. The broadcaster keeps the last 100 values for that.
func ExampleBroadcaster_WatchFrom() {
	b := broadcast.New[string](broadcast.WithHistory(100))
	defer b.Shutdown(context.Background())

	w, _ := b.Watch()
	b.Publish("a")
	b.Publish("b")
	var last uint64
	for seq, v := range w.Seq() {
		fmt.Println(seq, v)
		last = seq
		if v == "b" {
			break
		}
	}
	w.Stop() // the client goes away; meanwhile the stream goes on
	b.Publish("c")
	b.Publish("d")

	w, _ = b.WatchFrom(last + 1) // it comes back
	for seq, v := range w.Seq() {
		fmt.Println(seq, v)
		if v == "d" {
			break
		}
	}
	w.Stop()
	// Output:
	// 1 a
	// 2 b
	// 3 c
	// 4 d
}

// Evict and resume: a reader too slow for its queue is cut off instead of
// losing values silently; it reads what it holds, sees why it ended, and
// resumes from the history where it stopped, missing nothing still kept.
func ExampleEvict() {
	b := broadcast.New[int](broadcast.WithHistory(1000))
	defer b.Shutdown(context.Background())

	w, _ := b.Watch(broadcast.WithPolicy(broadcast.Evict), broadcast.WithQueueLength(2))
	for v := 1; v <= 5; v++ {
		b.Publish(v) // 3 finds the queue full: w is evicted
	}
	var got []int
	var last uint64
	for seq, v := range w.Seq() {
		got, last = append(got, v), seq
	}
	fmt.Println(got, w.Err())

	w, _ = b.WatchFrom(last+1, broadcast.WithPolicy(broadcast.Evict), broadcast.WithQueueLength(2))
	for v := range w.All() {
		got = append(got, v)
		if v == 5 {
			break
		}
	}
	w.Stop()
	fmt.Println(got)
	// Output:
	// [1 2] broadcast: watcher evicted: its queue was full
	// [1 2 3 4 5]
}

// A watcher per request: WithContext ends the watcher with the request's
// context (no goroutine waits for it meanwhile), and Err says why.
func ExampleWithContext() {
	b := broadcast.New[string]()
	defer b.Shutdown(context.Background())

	ctx, cancel := context.WithCancelCause(context.Background()) // a request's context
	defer cancel(nil)
	w, _ := b.Watch(broadcast.WithContext(ctx))
	b.Publish("hello")
	b.Publish("world")
	for v := range w.All() { // the handler streams until the request ends
		fmt.Println(v)
		if v == "world" {
			cancel(errors.New("client disconnected"))
		}
	}
	fmt.Println("ended:", w.Err())
	// Output:
	// hello
	// world
	// ended: client disconnected
}
