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
// # Guarantees
//
// Tests refer to these numbers.
//
//  1. Registration barrier: a Watch that returns happens before every value
//     whose Publish is called after it, and the watcher receives all of
//     them; it receives no value whose Publish returned before Watch was
//     called. Values published concurrently with Watch may or may not
//     arrive.
//  2. One total order: all watchers observe the values they receive in the
//     same relative order; values published by one goroutine arrive in
//     that goroutine's order. A Publish call happens before its value is
//     received.
//  3. A watcher holds exactly its queue length of values it has not read
//     (plus its prefix or replay), on both read paths: C()'s channel is the
//     watcher's queue, not more (through C(), the room of the prefix values
//     already read goes to live values). A watcher that never reads holds, under
//     Drop, the first values published after it registered, under
//     DropOldest the last ones. Every value it lost is counted: received +
//     [Watcher.Dropped] == published to it. [Watcher.Len] counts exactly
//     what it holds.
//  4. Under Block nothing is lost; a publisher may wait. Stop on a watcher
//     a Publish waits for releases that Publish at once.
//  5. [Broadcaster.WatchWithPrefix] delivers the whole prefix first, then
//     behaves as Watch. The prefix is never dropped: the watcher holds the
//     prefix plus its queue length.
//  6. [Broadcaster.Shutdown]: from its start Publish, TryPublish and the
//     Watch methods return [ErrClosed]. Every value whose Publish returned
//     nil is delivered per policy, then every watcher ends. Shutdown never
//     waits for a reader: everything queued for a watcher stays readable
//     after it, through All (which then ends) or C (which is then closed),
//     whether or not anything read meanwhile. It waits only for a
//     publisher blocked on a full Block watcher; if ctx ends first, that
//     value is dropped (counted) and Shutdown returns ctx.Err(). Nothing
//     ever panics with "send on closed channel".
//  7. When Shutdown returns, no goroutine of the broadcaster remains; it
//     starts none for publishing or reading.
//  8. Sequence numbers: the n-th accepted value has sequence number n, and
//     [Stats].Published is the last one. [Watcher.Seq] yields each value
//     with its number: between s1 and s2 a watcher lost s2-s1-1 values.
//     Prefix values have 0.
//  9. With [WithHistory](n) the last n values are kept, also while nobody
//     watches; [Broadcaster.WatchFrom](seq) replays the kept values from
//     seq and goes on live as one atomic step: nothing missed or repeated
//     between. Replayed values, like prefix values, never count against
//     the queue length and are never dropped or evicted. A seq not kept is
//     an error wrapping [ErrOutOfRange] and registers nothing.
//  10. [Evict]: the value that finds an Evict watcher full is dropped
//     (counted) and the watcher ends: it keeps what it holds, readable in
//     order, then its loop ends or its channel closes; nobody waits for
//     it, and it leaves [Stats].Watchers.
//  11. [Watcher.Err] is nil while the watcher runs and after Stop; once
//     eviction, Shutdown or the ctx of [WithContext] ends it, it is
//     [ErrEvicted], [ErrClosed] or context.Cause(ctx): the first cause is
//     kept. WithContext starts no goroutine while it waits.
//
// # Plainly
//
// Each watcher has a queue of its queue length ([WithQueueLength], default
// [DefaultQueueLength]). When it is full:
//
//   - [Drop]: the new value is not queued for it (counted).
//   - [DropOldest]: its oldest value is discarded (counted): it keeps the
//     latest. Through C(), while an unread prefix or replay sits in front of
//     the channel, the new value is dropped instead (see [Watcher.C]).
//   - [Block]: the publisher waits until it has room or is stopped. Every
//     publisher waits for a full Block watcher, since every value must
//     reach it in order; a full Drop or DropOldest watcher slows nobody.
//   - [BlockFor](d): the publisher waits at most d, then drops as Drop.
//   - [Evict]: the value is dropped and the watcher ends.
//
// The policy is set per broadcaster in [New] and overridden per watcher in
// [Broadcaster.Watch]. Publishers write into a ring shared by every
// watcher read through All, and send into the channel of every watcher
// read through C; readers take from there. No goroutine is started for
// either. docs/design.md describes the data path and its costs.
//
// A watcher ends by [Watcher.Stop], by [Broadcaster.Shutdown], by [Evict],
// or when the ctx given to [WithContext] ends (a watcher per HTTP request,
// say). After Shutdown and eviction the values it holds stay readable;
// Stop discards them.
//
// # How readers are expected to behave
//
// Read a watcher through [Watcher.All] (an iterator; [Watcher.Seq] adds
// sequence numbers) or [Watcher.C] (a channel, for select). Each value goes
// to exactly one reader. Breaking out of an All loop leaves the watcher
// registered: call Stop when done, from any goroutine, also from inside the
// loop. Dropping the last reference is not Stop.
//
// A reader that falls behind costs only itself under Drop, DropOldest,
// BlockFor and Evict; under Block it holds every publisher up, so a Block
// reader must keep reading or be stopped. A Publish under Block from the
// goroutine that reads a full Block watcher, inside its All loop or its
// range over C, waits for itself: it returns only when that watcher is
// stopped from another goroutine, when PublishContext's ctx ends, or at
// Shutdown's deadline; publish from there with TryPublish or
// PublishContext.
//
// After Shutdown, read what each watcher holds, then Stop it (or let it
// go). A reader resuming after eviction uses WatchFrom(last seq + 1) with a
// history (examples/sse serves Server-Sent Events that resume this way).
package broadcast
