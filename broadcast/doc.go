// Package broadcast is generic in-process fan-out: every value published on
// a [Broadcaster] reaches every registered [Watcher], in one total order,
// under a per-watcher [Policy] for a full queue.
//
// # Usage
//
//	b := broadcast.New[Event]()                       // default: queue 1000, Drop
//	audit, _ := b.Watch(broadcast.WithPolicy(broadcast.Block)) // lossless
//	ui, _ := b.Watch(broadcast.WithQueueLength(16),
//		broadcast.WithPolicy(broadcast.DropOldest))         // keeps the latest 16
//	go func() { for e := range audit.All() { store(e) } }()
//	go func() { for e := range ui.C() { render(e) } }()
//	b.Publish(Event{...})
//	...
//	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
//	defer cancel()
//	b.Shutdown(ctx) // deliver what was published, close every watcher
//
// The zero Broadcaster is ready to use, as New() with no options; a
// [Watcher] comes only from a Watch method (every method of a zero Watcher
// panics).
//
// [Broadcaster.WatchWithPrefix] gives a watcher a prefix (say, the current
// state) before the live values, with nothing missed or repeated between.
//
// # Policies
//
// A watcher's queue holds up to its queue length ([WithQueueLength], default
// [DefaultQueueLength]) of values it has not read. When it is full:
//
//   - [Drop]: the new value is not queued for it (counted in
//     [Watcher.Dropped]); a watcher that never reads keeps the first values.
//   - [DropOldest]: its oldest value is discarded (counted); it keeps the
//     latest values.
//   - [Block]: the publisher waits until it has room or is stopped; nothing is
//     lost.
//   - [BlockFor](d): the publisher waits at most d, then drops as Drop.
//   - [Evict]: the value is dropped (counted) and the watcher ends: it keeps
//     what it holds, then its loop ends or its channel closes, and
//     [Watcher.Err] returns [ErrEvicted]. Nobody waits for it.
//
// The policy is set per broadcaster in [New] and overridden per watcher in
// [Broadcaster.Watch]. A full Drop or DropOldest watcher never slows the
// publisher or another watcher down; a full Block watcher makes every
// publisher wait, since every value must reach it in order.
//
// # Resume
//
// Every accepted value has a sequence number: the n-th has n, and
// [Stats].Published is the last one. [Watcher.Seq] yields each value with
// its number, so a reader sees where it lost values (s2-s1-1 of them
// between s1 and s2). With [WithHistory](n) the broadcaster keeps the last n
// values, also while nobody watches, and [Broadcaster.WatchFrom](seq)
// replays the kept values from seq and goes on live, as one atomic step:
// nothing is missed or repeated between (Server-Sent Events' Last-Event-ID,
// a watch's resourceVersion). Replayed values, like prefix values, never
// count against the queue length and are never dropped or evicted. A seq
// no longer kept, or beyond the next one, is an error wrapping
// [ErrOutOfRange]. examples/sse serves a stream to HTTP clients that resume
// this way.
//
// # Ending a watcher
//
// A watcher ends by [Watcher.Stop], by [Broadcaster.Shutdown], by [Evict],
// or when the ctx given to [WithContext] ends (a watcher per HTTP request,
// say: no goroutine waits for ctx meanwhile). [Watcher.Err] says why: nil
// while it runs and after Stop, [ErrClosed], [ErrEvicted] or
// context.Cause(ctx); the first cause that ends a watcher is the one it
// keeps. After Shutdown and eviction the values it holds stay readable.
// [Watcher.Len] counts the values queued for it and not yet received.
//
// # Concurrency
//
// All methods are safe for concurrent use. The registration barrier: a
// Watch that returns happens before every value whose Publish is called
// after it, and the watcher receives all of them; it receives no value whose
// Publish returned before Watch was called (values published concurrently
// with Watch may or may not arrive). All watchers observe the values they
// receive in the same relative order, and values published by one goroutine
// arrive in that goroutine's order. A Publish that returns nil happens
// before the value is received.
//
// A Publish under Block from the goroutine that reads a full Block watcher,
// inside its All loop or its range over C, waits for itself: it returns
// only when that watcher is stopped from another goroutine, when
// PublishContext's ctx ends, or at Shutdown's deadline; publish from there
// with TryPublish or PublishContext. Likewise, Shutdown called from that
// goroutine while a Publish waits for its watcher returns when its ctx ends.
//
// Read a watcher through [Watcher.All] (an iterator, the fastest path: it
// reads the broadcaster's shared ring in batches) or [Watcher.C] (a channel,
// for select). Each value goes to exactly one reader. [Watcher.Stop] may be
// called from any goroutine, also from inside the reading loop and while a
// Publish waits for that watcher, which it releases at once.
//
// The broadcaster starts no goroutines for publishing or for All:
// publishers write into a shared ring, readers take from it. A watcher read
// through C has its channel filled by the publishers themselves while the
// reader keeps up (the channel is empty when a value arrives); only when
// the reader lags does the watcher get a goroutine, started the first time
// and parked when idle, that forwards its queue in batches. It exits when
// the watcher is stopped or, after Shutdown, once its queue is handed over.
// docs/design.md describes the data path and its costs.
//
// # Values in flight after C
//
// A watcher read through C holds its queue (its queue length of values,
// under its policy, as through All) plus the values in flight toward its
// reader: those in the channel, which holds fewer than [ChannelBuffer]
// values, and the one its goroutine may be handing over: up to
// min(ChannelBuffer, queue length) values beyond its queue length. They are
// the oldest values it holds, they are never dropped or evicted, and
// [Watcher.Len] and the counts (received + Dropped == published to it)
// include them. So a watcher that never reads holds, through C, its
// in-flight values and then its queue length of values: under Drop the
// first ones published after it registered, under DropOldest the last
// ones; through All, exactly its queue length.
//
// # Shutdown
//
// [Broadcaster.Shutdown] makes Publish, TryPublish and Watch return
// [ErrClosed] from its start. Every value whose Publish returned nil stays
// queued; a Publish still waiting for a full Block watcher may complete
// until Shutdown's ctx ends, and is then given up (counted as dropped).
// Then every watcher ends. All() ends after the queued values, which stay
// readable after Shutdown returns. C() is closed after its queued values,
// and since no goroutine may outlive Shutdown, Shutdown waits, until its ctx
// ends, for C readers to take what does not fit in the channel; if ctx ends
// first, the channel keeps what it holds and the rest is dropped (counted).
// So read C channels from their own goroutines while Shutdown runs, or give
// it a deadline. Nothing can panic with "send on closed channel": a channel
// is closed only by the goroutine that sends to it, or when no send is in
// flight. Shutdown returns nil, or ctx.Err() if ctx ended first.
package broadcast
