package natsbridge_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// Event is what the examples share between processes.
type Event struct {
	Replica string
	Msg     string
}

// exampleServer starts an embedded nats-server for an example; stop it
// with the function returned.
func exampleServer() (*natstest.Server, func()) {
	dir, err := os.MkdirTemp("", "natsbridge-example")
	if err != nil {
		panic(err)
	}
	srv, err := natstest.Start(natstest.Config{StoreDir: dir})
	if err != nil {
		panic(err)
	}
	return srv, func() { srv.Stop(); os.RemoveAll(dir) }
}

// The outbox/inbox pattern by hand: values published on the outbox go out
// to a subject; the inbox is fed from it, so its watchers see every
// replica's values, this one's included.
func Example() {
	srv, stop := exampleServer()
	defer stop()
	nc, _ := nats.Connect(srv.URL())
	defer nc.Close()

	codec := natsbridge.JSON[Event]()
	outbox := broadcast.New[Event]()
	inbox := broadcast.New[Event]()
	out, err := natsbridge.Out(outbox, nc, "events", codec, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		panic(err)
	}
	in, err := natsbridge.In(nc, "events", codec, inbox)
	if err != nil {
		panic(err)
	}
	w, _ := inbox.Watch()

	outbox.Publish(Event{Replica: "a", Msg: "started"})
	outbox.Publish(Event{Replica: "a", Msg: "ready"})
	for range 2 {
		e := <-w.C()
		fmt.Println(e.Replica, e.Msg)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out.Close(ctx)
	in.Close(ctx)
	outbox.Shutdown(ctx)
	inbox.Shutdown(ctx)
	fmt.Printf("%+v\n", out.Stats())
	// Output:
	// a started
	// a ready
	// {Sent:2 Received:0 Failed:0 Dropped:0 Lost:0 Pending:0}
}

// Two replicas, each a Node on its own connection: what either publishes
// reaches both.
func ExampleNewNode() {
	srv, stop := exampleServer()
	defer stop()
	codec := natsbridge.JSON[Event]()
	var nodes []*natsbridge.Node[Event]
	var watchers []*broadcast.Watcher[Event]
	for range 2 {
		nc, _ := nats.Connect(srv.URL())
		defer nc.Close()
		n, err := natsbridge.NewNode(nc, "events", codec)
		if err != nil {
			panic(err)
		}
		w, _ := n.Watch()
		nodes, watchers = append(nodes, n), append(watchers, w)
	}

	nodes[0].Publish(Event{Replica: "a", Msg: "hello"})
	for i, w := range watchers {
		e := <-w.C()
		fmt.Printf("replica %d got %s from %s\n", i, e.Msg, e.Replica)
	}
	nodes[1].Publish(Event{Replica: "b", Msg: "hi"})
	for i, w := range watchers {
		e := <-w.C()
		fmt.Printf("replica %d got %s from %s\n", i, e.Msg, e.Replica)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, n := range nodes {
		n.Close(ctx)
	}
	// Output:
	// replica 0 got hello from a
	// replica 1 got hello from a
	// replica 0 got hi from b
	// replica 1 got hi from b
}

// ErrLoop: an outgoing and an incoming link on one broadcaster and one
// subject would relay every value forever; the second is refused.
func ExampleErrLoop() {
	srv, stop := exampleServer()
	defer stop()
	nc, _ := nats.Connect(srv.URL())
	defer nc.Close()
	codec := natsbridge.JSON[Event]()
	b := broadcast.New[Event]()
	defer b.Shutdown(context.Background())

	out, _ := natsbridge.Out(b, nc, "events", codec)
	_, err := natsbridge.In(nc, "events", codec, b)
	fmt.Println(errors.Is(err, natsbridge.ErrLoop))

	out.Close(context.Background()) // frees the pair
	in, err := natsbridge.In(nc, "events", codec, b)
	fmt.Println(err)
	in.Close(context.Background())
	// Output:
	// true
	// <nil>
}

// A restarted replica catches up from a stream: InStream from a stream
// sequence replays what was stored from there, then goes on live.
// LastSeq is where to resume next time.
func ExampleInStream() {
	srv, stop := exampleServer()
	defer stop()
	nc, _ := nats.Connect(srv.URL())
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js.CreateStream(ctx, jetstream.StreamConfig{Name: "EVENTS", Subjects: []string{"events.>"}})
	codec := natsbridge.JSON[Event]()

	// Before the "restart": three values stored.
	outbox := broadcast.New[Event]()
	out, _ := natsbridge.OutStream(outbox, js, "EVENTS", "events.a", codec, broadcast.WithPolicy(broadcast.Block))
	for _, m := range []string{"one", "two", "three"} {
		outbox.Publish(Event{Replica: "a", Msg: m})
	}
	out.Close(ctx) // returns once the stream acknowledged all three
	fmt.Println("stored up to", out.LastSeq())

	// After: this replica had seen sequence 1; it resumes from 2.
	inbox := broadcast.New[Event]()
	w, _ := inbox.Watch()
	in, err := natsbridge.InStream(js, "EVENTS", "events.a", 2, codec, inbox)
	if err != nil {
		panic(err)
	}
	for range 2 {
		fmt.Println((<-w.C()).Msg)
	}
	in.Close(ctx)
	fmt.Println("resume next time from", in.LastSeq()+1)
	outbox.Shutdown(ctx)
	inbox.Shutdown(ctx)
	// Output:
	// stored up to 3
	// two
	// three
	// resume next time from 4
}
