// Package natsbridge carries herald's fan-out across processes on NATS:
// a value published on one replica of a service reaches the watchers on
// all of them. It adds no protocol of its own: core NATS subjects for
// live fan-out, JetStream streams where values must survive a restart.
//
// # Usage
//
// The pattern: each process publishes into an outbox broadcaster bridged
// [Out] to a subject, and its watchers watch an inbox broadcaster fed [In]
// from that subject. Every process, the sender included, sees the values
// through NATS, so every watcher everywhere sees the same values, each
// origin's in its order.
//
//	nc, _ := nats.Connect(url)
//	outbox := broadcast.New[Event]()
//	inbox := broadcast.New[Event]()
//	out, _ := natsbridge.Out(outbox, nc, "events", natsbridge.JSON[Event](),
//		broadcast.WithPolicy(broadcast.Block)) // publishers wait rather than lose values
//	in, _ := natsbridge.In(nc, "events", natsbridge.JSON[Event](), inbox)
//	w, _ := inbox.Watch()
//	outbox.Publish(Event{...}) // reaches w here and the inbox watchers of every process
//
// [NewNode] does the same in one call and owns the four parts;
// [NewStreamNode] does it through a JetStream stream with [OutStream] and
// [InStream]. [OutWith] and [InWith] are Out and In with [Options] (a
// logger, message headers to and from the values, foreign messages, a
// queue group).
//
// # Guarantees
//
// Per subject, every In's broadcaster receives the values of every Out, its
// own process's included, and one Out's values arrive in the order they
// were published on its broadcaster: Out reads its broadcaster through one
// watcher in one goroutine and publishes on one connection; NATS keeps one
// connection's messages in order, and In publishes them on its broadcaster
// one at a time. NATS does not order different connections' messages
// against each other, so the interleaving of origins may differ between
// processes.
//
// An outgoing link ([Out], [OutStream]) and an incoming one ([In],
// [InStream]) on one broadcaster and overlapping subjects would feed each
// other forever: the second is refused with an error wrapping [ErrLoop] and
// registers nothing; [Link.Close] frees the pair.
//
// # Core NATS and JetStream
//
// Core NATS delivers at most once. While a connection is down, nats.go
// keeps what Out publishes in its reconnect buffer (8 MiB by default) and
// sends it once reconnected; values beyond the buffer, or every value with
// the buffer disabled (nats.ReconnectBufSize(-1)), are counted in Failed.
// A message in flight to a server that stops, or for a subscriber that has
// not resubscribed yet, is lost, but not silently: see Loss detection. Use
// core links for live state where the latest value matters (a watcher that
// misses some catches up with the next), and streams where every value
// does.
//
// # Loss detection on core NATS
//
// Every [Out] is an origin (a random ID) and numbers the values it takes
// from its broadcaster 1, 2, 3, ..., a value it fails to encode or publish
// included; each message carries the origin and the number in one
// header, [HeaderSeq] ("<origin> <number>"). Once it has taken a value, an
// Out sends a heartbeat every second (header [HeaderBeat] instead, with
// the origin and the last number used, no data), and one at Close. Every [In] keeps, per origin, the
// last number it saw: a gap adds the missing values to its Lost and is
// logged at Warn. So at every In, every value of an Out from the first one
// the In saw on is in Received, Failed (arrived, not decoded or not
// published) or Lost, within 2 s of its sending while both connections are
// up (1 s between heartbeats, plus their way), within 2 s of both being up
// again for a value sent during an outage. What the In does not count: the
// values of an origin before the first message of it the In saw (it had
// not subscribed yet, say), and, for an origin not heard of for 60 to 65 s
// of the In's connected time (the In forgets it), what it lost in that
// time. A member of a queue group (Options.QueueGroup) sees part of each
// origin's numbers and does not count losses.
//
// An Out counts a value Sent once the server answered a PING the Out sent
// after it; until then it is Pending. Close waits for that within its ctx:
// what is unconfirmed when ctx ends is counted Failed and Close returns
// ctx.Err(). By default an In refuses messages without the bridge's
// headers (counted in Failed, logged at Warn); Options.AcceptForeign lets
// a foreign publisher's messages in, decoded by the codec.
//
// When a core link's connection closes for good (nc.Close, or the
// reconnect attempts are used up), the link stops: it logs it at Error,
// [Link.Err] says why, [Link.Done] is closed; an Out counts what was
// Pending and what its watcher still held in Failed, and stops its
// watcher, so no publisher waits for it under broadcast.Block.
//
// [OutStream] publishes into an existing stream with a message ID per value
// and counts a value Sent when the stream acknowledges it; on a transient
// failure (a disconnect, a restart, no ack in 5 s) it publishes every
// unacknowledged value again, in order, with the same IDs, so the stream
// stores each once (within its duplicate window) and in the broadcaster's
// order. Nothing acknowledged is lost. [InStream] reads through an ordered
// consumer, which the client recreates after a reconnect or a gap from
// the next sequence, so each stored message reaches its broadcaster once,
// in stream order.
//
// # Failures
//
// A value that cannot be encoded or decoded, that is over the server's
// max_payload, or that the transport loses in a way the link can see, is
// counted in [LinkStats].Failed, values an In finds missing in Lost, and
// each is reported at Warn through the link's logger (Options.Logger,
// slog.Default by default):
// per link, the first at once, then at most one line per 10 s that sums up
// the ones in between, and a last summary at Close; each line's "values"
// attribute is the number of values it is about (a gap of 40 is 40), and a
// summary's "reports" how many reports it sums. Never a panic; the link
// goes on with the next value. Messages the NATS client discards because a
// slow broadcaster made In fall behind its pending limits are counted in
// Dropped (and, as gaps, in Lost) and reported the same way. The JSON
// codec refuses an empty or null payload rather than publish a zero
// value. Configuration mistakes (a nil
// broadcaster, connection or codec) panic with a "natsbridge: " message.
//
// # Close
//
// [Link.Close](ctx) sends what the link holds (for an outgoing link, every
// value published on its broadcaster before Close, confirmed by the server
// for Out and acknowledged by the stream for OutStream; for an incoming
// link, what the client has received), then stops it and waits until its
// goroutines have exited. If ctx ends first, what is left is counted in
// Failed and Close returns ctx.Err() at once, during an outage too. Close
// leaves the connection and the broadcaster to their owner.
//
// # Resuming from a stream
//
// Two sequences meet here. The stream numbers what it stores; the inbox
// broadcaster numbers what is published on it (broadcast's sequence
// numbers: 1, 2, 3, ... from its creation). They serve two kinds of
// resume:
//
//   - A process that restarts catches up from the stream: InStream starts
//     at a stream sequence, inclusive. Record [Link.LastSeq] (the stream
//     sequence of the last message InStream published on the inbox) where
//     the process keeps its state, and start the next InStream at
//     LastSeq()+1; 0 takes only what is stored after it starts.
//   - A watcher inside a running process resumes from the inbox, without
//     going back to NATS: give the inbox history (broadcast.WithHistory,
//     from the release that adds it) and a watcher that was evicted or
//     restarted calls WatchFrom(its last inbox sequence + 1), missing
//     nothing still kept and repeating nothing.
//
// To tie the two, InStream publishes each stored message once, in stream
// order, and is the inbox's only publisher in the pattern: the k-th value
// on an inbox fed by InStream from stream sequence f is the k-th message
// of the stream at or after f on the link's subject. When a watcher must
// know the stream sequence of what it got (to persist a position that
// survives the process), carry it in the value, or record the pair
// (inbox sequence, [Link.LastSeq]) at the moments the process saves its
// state.
package natsbridge
