package natsbridge

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
)

// A Node is the outbox/inbox pattern in one value: what the process
// publishes goes into an outbox broadcaster bridged out to a subject, and
// its watchers watch an inbox broadcaster fed from that subject, so they
// see every process's values, this one's included, each origin's in its
// order, and nothing twice. Make one with [NewNode] (core NATS) or
// [NewStreamNode] (JetStream); it owns both broadcasters and both links.
type Node[T any] struct {
	outbox, inbox *broadcast.Broadcaster[T]
	out, in       *Link
}

// NewNode builds a [Node] on core NATS: [Out] from the outbox to subject
// through a [broadcast.Block] watcher (a Publish waits rather than lose a
// value when NATS is slower than the publishers), and [In] from subject to
// the inbox. opts are the inbox watchers' defaults, as in [broadcast.New].
// The inbox receives values from the moment NewNode returns.
func NewNode[T any](nc *nats.Conn, subject string, c Codec[T], opts ...broadcast.Option) (*Node[T], error) {
	n := &Node[T]{outbox: broadcast.New[T](), inbox: broadcast.New[T](opts...)}
	var err error
	if n.in, err = In(nc, subject, c, n.inbox); err != nil {
		return nil, err
	}
	if n.out, err = Out(n.outbox, nc, subject, c, broadcast.WithPolicy(broadcast.Block)); err != nil {
		_ = n.in.Close(context.Background())
		return nil, err
	}
	return n, nil
}

// NewStreamNode builds a [Node] on a JetStream stream: [OutStream] and
// [InStream] (from is InStream's first stream sequence; 0: only new
// messages). Otherwise as [NewNode].
func NewStreamNode[T any](js jetstream.JetStream, stream, subject string, from uint64, c Codec[T], opts ...broadcast.Option) (*Node[T], error) {
	n := &Node[T]{outbox: broadcast.New[T](), inbox: broadcast.New[T](opts...)}
	var err error
	if n.in, err = InStream(js, stream, subject, from, c, n.inbox); err != nil {
		return nil, err
	}
	if n.out, err = OutStream(n.outbox, js, stream, subject, c, broadcast.WithPolicy(broadcast.Block)); err != nil {
		_ = n.in.Close(context.Background())
		return nil, err
	}
	return n, nil
}

// Publish sends v to every node's watchers, this node's included: it
// publishes v on the outbox (see [broadcast.Broadcaster.Publish]).
func (n *Node[T]) Publish(v T) error { return n.outbox.Publish(v) }

// PublishContext is Publish whose wait for the outgoing link ends with ctx.
func (n *Node[T]) PublishContext(ctx context.Context, v T) error {
	return n.outbox.PublishContext(ctx, v)
}

// Watch registers a watcher of the inbox: every node's values.
func (n *Node[T]) Watch(opts ...broadcast.Option) (*broadcast.Watcher[T], error) {
	return n.inbox.Watch(opts...)
}

// Outbox is the broadcaster Publish feeds; Inbox the one watchers watch.
func (n *Node[T]) Outbox() *broadcast.Broadcaster[T] { return n.outbox }

// Inbox is the broadcaster fed from NATS; see [Node.Outbox].
func (n *Node[T]) Inbox() *broadcast.Broadcaster[T] { return n.inbox }

// Out is the outgoing link (its Stats); In the incoming one.
func (n *Node[T]) Out() *Link { return n.out }

// In is the incoming link; see [Node.Out].
func (n *Node[T]) In() *Link { return n.in }

// Close sends what was published before it (the outgoing link's Close),
// shuts the outbox down, stops the incoming link after publishing what it
// holds on the inbox, and shuts the inbox down (its watchers end after
// their queued values), all within ctx. Values still on their way back
// from NATS when the incoming link stops do not reach this node's
// watchers. It returns nil, or the errors joined.
func (n *Node[T]) Close(ctx context.Context) error {
	return errors.Join(
		n.out.Close(ctx),
		n.outbox.Shutdown(ctx),
		n.in.Close(ctx),
		n.inbox.Shutdown(ctx),
	)
}
