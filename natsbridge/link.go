package natsbridge

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// A Link is one bridge between a broadcaster and NATS, made by [Out], [In],
// [OutStream] or [InStream]. It runs until [Link.Close]; its methods are
// safe for concurrent use.
type Link struct {
	kind    string // "Out", "In", "OutStream", "InStream"
	subject string

	sent, received, failed atomic.Uint64
	lost                   atomic.Uint64 // In: gaps in an origin's sequence numbers
	lastSeq                atomic.Uint64
	pending                func() uint64               // Out: values handed to NATS, not yet confirmed; nil: 0
	dropped                func() uint64               // the link's view of slow-consumer drops
	setLimits              func(msgs, bytes int) error // In only

	warn    *warner
	release func() // forgets the link in the loop registry

	// shut sends what the link holds within ctx and stops it; called once.
	shut func(ctx context.Context) error

	closeMu   sync.Mutex
	closing   bool
	closeDone chan struct{} // closed when the first Close has finished

	done     chan struct{} // closed when the link has stopped, by Close or for good
	doneOnce sync.Once
	errMu    sync.Mutex
	err      error // why the link stopped for good; nil while it runs and after Close
}

// LinkStats is a snapshot of a link's counters.
//
// Every value an [Out] took from its broadcaster is in exactly one of
// Sent, Failed and Pending, and Pending is 0 once Close has returned (the
// values its watcher lost to the watcher's policy are in Dropped, never
// taken). Every message an incoming link took from NATS ends up in
// Received or Failed. For an [In], every value of an origin from its
// baseline on (see [InWith]) is in Received, Failed or Lost.
type LinkStats struct {
	// Sent: Out: values the server confirmed (a PING sent after them was
	// answered); OutStream: values acknowledged by the stream.
	Sent uint64
	// Received: messages received and published on b (In, InStream).
	Received uint64
	// Failed: values lost to encode, decode or transport errors, values
	// Close gave up on, and, for In, messages refused for want of the
	// bridge's headers.
	Failed uint64
	// Dropped: In: messages the client dropped as a slow consumer (they are
	// in Lost too, as gaps); Out, OutStream: values the link's watcher lost
	// to its policy.
	Dropped uint64
	// Lost: In: values of an origin that never arrived (gaps in its
	// sequence numbers, seen from the next message or heartbeat); 0 for an
	// In in a queue group.
	Lost uint64
	// Pending: outgoing links: values handed on and not yet confirmed
	// (Out: by the server's answer to a PING; OutStream: see [OutStream]).
	Pending uint64
}

func newLink(kind, subject string) *Link {
	return &Link{
		kind:      kind,
		subject:   subject,
		warn:      newWarner(kind, subject),
		closeDone: make(chan struct{}),
		done:      make(chan struct{}),
		dropped:   func() uint64 { return 0 },
	}
}

// Stats returns the link's counters. For In, Dropped is what the NATS client
// discarded because the subscription's pending limits were reached while
// the broadcaster's publish waited (a Block watcher); for Out and OutStream
// it is what the link's watcher of the broadcaster lost to its policy
// because the link fell behind; for InStream it is zero (the consumer pulls
// only what it can take).
func (l *Link) Stats() LinkStats {
	s := LinkStats{
		Sent:     l.sent.Load(),
		Received: l.received.Load(),
		Failed:   l.failed.Load(),
	}
	if l.dropped != nil {
		s.Dropped = l.dropped()
	}
	s.Lost = l.lost.Load()
	if l.pending != nil {
		s.Pending = l.pending()
	}
	return s
}

// Err returns nil while the link runs, and after [Link.Close] if the link
// had not stopped before; otherwise why it stopped for good (for [Out] and
// [In]: nats.ErrConnectionClosed, the connection closed for good).
func (l *Link) Err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// Done returns a channel closed when the link has stopped: by
// [Link.Close], or for good (then [Link.Err] says why).
func (l *Link) Done() <-chan struct{} {
	if l.done == nil { // a zero Link
		return closedChan
	}
	return l.done
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// die records that the link stopped for good, logs it at Error and closes
// Done; a no-op once Close began or the link died already. It reports
// whether it recorded err.
func (l *Link) die(err error) bool {
	// closeMu is held until err is recorded, so that once Close has set
	// closing, Err either says the link died before or stays nil.
	l.closeMu.Lock()
	if l.closing {
		l.closeMu.Unlock()
		return false
	}
	first := false
	l.errMu.Lock()
	if l.err == nil {
		l.err, first = err, true
	}
	l.errMu.Unlock()
	l.closeMu.Unlock()
	if !first {
		return false
	}
	l.warn.logger().Error("natsbridge: link stopped for good", "link", l.kind, "subject", l.subject, "err", err)
	l.doneOnce.Do(func() { close(l.done) })
	return true
}

// LastSeq returns the stream sequence of the last message InStream
// published on its broadcaster, or of the last value OutStream had
// acknowledged; 0 for core NATS links and before the first one. A process
// that records it resumes with InStream(..., LastSeq()+1, ...).
func (l *Link) LastSeq() uint64 { return l.lastSeq.Load() }

// Subject returns the subject (or, for In and InStream, the subject filter)
// the link was made with.
func (l *Link) Subject() string { return l.subject }

// Close stops the link after sending what it holds, within ctx.
//
// An outgoing link ([Out], [OutStream]) first sends every value published
// on its broadcaster before Close was called that its watcher received, and
// waits for the server's confirmation (Out: the answer to a PING; for
// OutStream, the stream's acknowledgements); an incoming link
// ([In], [InStream]) publishes on its broadcaster the messages the client
// has already received. Then every goroutine of the link has exited, the
// link is forgotten by the loop check ([ErrLoop]) and Close returns nil.
// If ctx ends first, what is left is counted in Failed, the link stops at
// once and Close returns ctx.Err(); it returns within a short bound after
// ctx ends even if the connection is down. An Out whose connection closes
// for good during Close counts what is unconfirmed in Failed and returns an
// error wrapping nats.ErrConnectionClosed. Close does not close the NATS
// connection, nor the broadcaster. Further calls wait for the first to
// finish, then return nil.
func (l *Link) Close(ctx context.Context) error {
	if ctx == nil {
		panic("natsbridge: Link.Close: nil Context")
	}
	l.closeMu.Lock()
	if l.closing {
		l.closeMu.Unlock()
		select {
		case <-l.closeDone:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	l.closing = true
	if l.closeDone == nil { // a zero Link: nothing to close
		l.closeDone = make(chan struct{})
		close(l.closeDone)
		l.closeMu.Unlock()
		return nil
	}
	l.closeMu.Unlock()
	err := l.shut(ctx)
	l.release()
	l.warn.close()
	l.doneOnce.Do(func() { close(l.done) })
	close(l.closeDone)
	return err
}

// fail counts one lost value and reports it.
func (l *Link) fail(msg string, err error) {
	l.failed.Add(1)
	l.warn.warn(1, msg, err)
}

// watchExact registers a watcher of b and returns it with the number of
// values b had accepted before it: the watcher receives the values with
// sequence numbers above that, which lets Close know when the watcher has
// taken everything published before it. The count is exact when no value
// was committed between the two reads around Watch; under a publisher that
// never pauses it may be a few too high after several tries, and Close may
// then leave that many of the last values unsent (counted in Failed).
func watchExact[T any](b *broadcast.Broadcaster[T], opts []broadcast.Option) (*broadcast.Watcher[T], uint64, error) {
	for i := 0; ; i++ {
		before := b.Stats().Published
		w, err := b.Watch(opts...)
		if err != nil {
			return nil, 0, err
		}
		after := b.Stats().Published
		if before == after || i == 16 {
			return w, after, nil
		}
		w.Stop()
	}
}

// outFeed is the part of Out and OutStream that reads the broadcaster: a
// watcher read through All in one goroutine, and the bookkeeping that lets
// Close stop it once it has taken every value published before Close.
type outFeed[T any] struct {
	w     *broadcast.Watcher[T]
	b     *broadcast.Broadcaster[T]
	base  uint64        // values b accepted before w registered
	taken atomic.Uint64 // values the loop has taken and handled

	closing atomic.Bool
	target  atomic.Uint64 // taken+dropped at which the loop stops, once closing
}

// reached reports whether the loop has handled every value it must before
// it stops (or b shut down and w ended).
func (f *outFeed[T]) reached() bool {
	return f.taken.Load()+f.w.Dropped() >= f.target.Load()
}

// run hands every value of w to handle, in order, until w ends or Close's
// target is reached.
func (f *outFeed[T]) run(handle func(T)) {
	for v := range f.w.All() {
		handle(v)
		f.taken.Add(1)
		if f.closing.Load() && f.reached() {
			f.w.Stop()
			return
		}
	}
}

// startClose fixes the target: everything b accepted so far. It stops the
// watcher at once if the loop is already there; otherwise the loop will.
func (f *outFeed[T]) startClose() {
	pub := f.b.Stats().Published
	var t uint64
	if pub > f.base {
		t = pub - f.base
	}
	f.target.Store(t)
	f.closing.Store(true)
	if f.reached() {
		f.w.Stop()
	}
}

// left returns how many values the loop was to handle and did not. Call it
// once the loop has exited (after Stop), so that a value in hand is either
// in taken or not yet handled, never both.
func (f *outFeed[T]) left() uint64 {
	done := f.taken.Load() + f.w.Dropped()
	if t := f.target.Load(); t > done {
		return t - done
	}
	return 0
}

// closeGrace bounds how long Close waits, after its ctx ended, for a link's
// goroutines to notice and exit (they do at once unless a NATS call is in
// progress).
const closeGrace = 2 * time.Second

// deliver decodes one received message and publishes it on b, for In and
// InStream: a message that cannot be decoded or published is counted in
// Failed and reported, and the link goes on; ctx is canceled by Close.
func deliver[T any](ctx context.Context, l *Link, c Codec[T], b *broadcast.Broadcaster[T], data []byte) {
	v, err := c.Unmarshal(data)
	if err != nil {
		l.fail("a message could not be decoded", err)
		return
	}
	if err := b.PublishContext(ctx, v); err != nil {
		if ctx.Err() != nil {
			l.fail("a received message was not published: Close's context ended", err)
		} else {
			l.fail("a message could not be published on the broadcaster", err)
		}
		return
	}
	l.received.Add(1)
}
