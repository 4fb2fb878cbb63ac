package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
)

// OutStream and InStream do the same through an existing JetStream stream
// (the link does not create it): durable; InStream starts at stream sequence
// from, inclusive (0: only messages stored after it starts).
//
// OutStream is [OutStreamWith] with Options{Watch: opts}: see there.
func OutStream[T any](b *broadcast.Broadcaster[T], js jetstream.JetStream, stream, subject string, c Codec[T], opts ...broadcast.Option) (*Link, error) {
	return OutStreamWith(b, js, stream, subject, c, Options[T]{Watch: opts})
}

// OutStreamWith publishes each value of b to subject, which must be one of
// stream's subjects, and counts it in Sent when the stream acknowledges it.
// It reads o.Watch, o.Headers, o.MsgID, o.AckWait, o.Window and o.Logger.
//
// Each message carries the bridge's header (HeaderSeq: the link's own
// random origin and the value's number, 1 for the first value the link
// took from b, then one more per value taken), then what o.Headers
// adds, and a message ID (Nats-Msg-Id): o.MsgID(v), or by default the
// origin and the number. The stream stores a message once per ID within
// its duplicate window (2 minutes by default), so a value published again,
// by this link or, with o.MsgID, by a restarted process, is stored once
// (and acknowledged, so counted in Sent, each time).
//
// Up to o.Window values (default 256) are in flight: published, not yet
// acknowledged; [LinkStats].Pending counts them. The window opens only
// once a value has been acknowledged on the current connection; before
// that one value is in flight at a time. After a failure that may pass (a
// disconnect, a server restart, JetStream not ready, no ack within
// o.AckWait, default 5 s, which doubles after each timeout up to the
// larger of 5 s and o.AckWait), the link publishes the unacknowledged
// values again, in order, with their IDs, one at a time (each after the
// previous one is acknowledged), pausing 50 ms, doubling to 2 s, before
// each retry and while the connection is down, until each is acknowledged
// or Close's ctx ends; new values wait meanwhile. So the stream stores each
// value once and in b's order, with one exception: when the connection
// breaks in the instant a value is being published (typically just as the
// acks of the values before it arrive), nats.go keeps that value in its
// reconnect buffer and sends it first after reconnecting, before the
// earlier values the broken connection lost are published again. That
// value, at most one per disconnect, is then stored ahead of them (still
// once); the link reports it at Warn when its ack arrives. [InStream]
// delivers in stream order.
//
// A value the stream refuses is never retried forever:
//   - too large (over the server's max_payload or the stream's
//     max_msg_size), refused for another lasting reason, or one c cannot
//     encode: counted in Failed and logged at Warn; the link goes on;
//   - the stream full (its limits with DiscardNew): if the link's watcher
//     makes b's publishers wait (its policy is broadcast.Block or
//     BlockFor, from o.Watch or b's default), the link holds the value, counted in Pending with the
//     values in flight after it, logs at Warn, and publishes it again with
//     the pause above until the stream takes it or Close's ctx ends; the
//     watcher fills meanwhile and its policy applies. With any other
//     policy, each refused value is counted in Failed and logged at Warn, and
//     the link goes on with the next.
//
// When the stream is deleted (seen at once through the server's advisory
// if the connection may subscribe to $JS.EVENT.ADVISORY.STREAM.DELETED.<stream>,
// else at the next publish) or no longer takes subject, or the connection
// closes for good (seen at once, even while idle), the link
// stops for good: it logs at Error, [Link.Err] says why, [Link.Done] is
// closed, the values it held and those queued in its watcher are counted
// in Failed, and the watcher stops, so no publisher of b waits for it.
// A later Close returns nil.
//
// Like [Out], the link is a watcher of b with o.Watch; while the stream
// cannot be reached the watcher fills and its policy applies (Dropped).
// [Link.LastSeq] is the highest stream sequence acknowledged.
// OutStreamWith returns an error at once if the stream does not exist or
// does not take subject, and an error wrapping [ErrLoop] as Out does. A
// nil b, js or c, or a negative o.AckWait or o.Window, panics.
func OutStreamWith[T any](b *broadcast.Broadcaster[T], js jetstream.JetStream, stream, subject string, c Codec[T], o Options[T]) (*Link, error) {
	mustArgs("OutStream", b == nil, js == nil, c == nil)
	if o.AckWait < 0 || o.Window < 0 {
		panic(fmt.Sprintf("natsbridge: OutStreamWith: negative AckWait (%v) or Window (%d)", o.AckWait, o.Window))
	}
	if !validSubject(subject, true) {
		return nil, fmt.Errorf("natsbridge: OutStream: %w: %q (a subject to publish to has no wildcards)", nats.ErrBadSubject, subject)
	}
	if _, err := checkStream(context.Background(), js, stream, subject, true); err != nil {
		return nil, fmt.Errorf("natsbridge: OutStream: %w", err)
	}
	release, err := register(b, subject, dirOut)
	if err != nil {
		return nil, err
	}
	w, base, err := watchExact(b, o.Watch)
	if err != nil {
		release()
		return nil, fmt.Errorf("natsbridge: OutStream: %w", err)
	}
	l := newLink("OutStream", subject)
	l.warn.lg = o.Logger
	l.release = release
	l.dropped = w.Dropped
	window := o.Window
	if window == 0 {
		window = defaultWindow
	}
	wait := o.AckWait
	if wait == 0 {
		wait = ackWait
	}
	s := &outStream[T]{
		l:        l,
		js:       js,
		nc:       js.Conn(),
		stream:   stream,
		subject:  subject,
		codec:    c,
		origin:   newOrigin(),
		msgID:    o.MsgID,
		headers:  o.Headers,
		ackWait:  wait,
		waits:    w.Policy().Waits(),
		slots:    make(chan struct{}, window),
		more:     make(chan struct{}, 1),
		abort:    make(chan struct{}),
		sent:     make(chan struct{}),
		acked:    make(chan struct{}),
		connDone: make(chan struct{}),
		feed:     &outFeed[T]{w: w, b: b, base: base},
		ackEpoch: ^uint64(0),
		pubOpts:  []jetstream.PublishOpt{jetstream.WithExpectStream(stream), jetstream.WithRetryAttempts(0)},
	}
	l.pending = func() uint64 { return uint64(s.npending.Load()) }
	closed := s.nc.StatusChanged(nats.CLOSED)
	// The server's advisory of the stream's deletion, so that an idle link
	// sees it too. Without the permission to subscribe, the next publish
	// sees it.
	gone := make(chan struct{}, 1)
	adv, _ := s.nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.DELETED."+stream, func(*nats.Msg) {
		select {
		case gone <- struct{}{}:
		default:
		}
	})
	go s.send()
	go s.ack()
	go s.watchConn(closed, gone, adv)
	l.shut = s.shut
	return l, nil
}

// outStream is OutStream's state. Two goroutines: send takes values from
// the watcher and publishes them; ack waits for their acks in order and
// publishes again, one at a time, after a failure.
type outStream[T any] struct {
	l               *Link
	js              jetstream.JetStream
	nc              *nats.Conn
	stream, subject string
	codec           Codec[T]
	origin          string
	msgID           func(T) string
	headers         func(T, nats.Header)
	pubOpts         []jetstream.PublishOpt // every publish's: made once
	ackWait         time.Duration
	waits           bool // the watcher makes publishers wait: hold a value refused as full
	feed            *outFeed[T]
	n               uint64        // values numbered so far; send only
	slots           chan struct{} // one token per value in flight
	more            chan struct{} // cap 1: pending grew
	abort           chan struct{} // closed when Close's ctx ends, or the link dies
	sent, acked     chan struct{} // closed when send, ack exit
	connDone        chan struct{} // closed when watchConn exits
	abortOnce       sync.Once
	dieOnce         sync.Once
	dead            atomic.Bool  // the link died: Close counts nothing more
	deathErr        error        // why it died; o.mu
	npending        atomic.Int64 // len(pending), for Stats
	lastAck         uint64       // stream sequence of the last value acknowledged; ack only

	// mu guards pending, stale, ackEpoch and every publish, so that
	// publishes go out in order and a republish is not overtaken by a new
	// value.
	mu       sync.Mutex
	pending  []*streamEntry // published, not acknowledged, in order
	stale    bool           // publishing one at a time after a failure: send waits
	ackEpoch uint64         // the connection epoch of the last ack; ^0: none yet
}

type streamEntry struct {
	msg    *nats.Msg              // as first published; nats.go's from then on
	n      uint64                 // its HeaderSeq number
	fut    jetstream.PubAckFuture // nil when the publish failed at once
	err    error                  // that failure
	epoch  uint64                 // the connection's reconnect count when published
	resent bool                   // published again in the current one-at-a-time round
}

func (o *outStream[T]) send() {
	defer close(o.sent)
	o.feed.run(func(v T) {
		o.n++
		data, err := o.codec.Marshal(v)
		if err != nil {
			o.l.fail("a value could not be encoded", err)
			return
		}
		// The message is made once, with room for the header nats.go adds
		// (Nats-Expected-Stream), and handed to nats.go as it is; only a
		// republish copies it (publishLocked). With the publish options
		// made once (pubOpts), that is 9 allocations and 520 B fewer per
		// value than a header map copied into a fresh message
		// (BenchmarkStreamPubOut -benchmem: 48 and 3.6 kB against 57 and
		// 4.1 kB); crossbench's jetstream over js-bare-id 0.95 and 0.97
		// against 0.91 and 0.93 before, alternating runs (BENCH.md,
		// 2026-12-07).
		m := &nats.Msg{Subject: o.subject, Data: data, Header: make(nats.Header, 4)}
		setOrigin(m.Header, o.origin, o.n)
		if o.msgID != nil {
			m.Header[jetstream.MsgIDHeader] = []string{o.msgID(v)}
		} else {
			m.Header[jetstream.MsgIDHeader] = []string{o.origin + "-" + strconv.FormatUint(o.n, 10)}
		}
		if o.headers != nil {
			o.headers(v, m.Header)
		}
		select {
		case o.slots <- struct{}{}:
		case <-o.abort:
			o.l.failed.Add(1)
			return
		}
		e := &streamEntry{msg: m, n: o.n}
		o.mu.Lock()
		for {
			ok, epoch := o.mayPublishLocked()
			if ok {
				o.publishLocked(e, epoch)
				break
			}
			// Reconnecting, publishing one at a time, or waiting for the
			// first ack on this connection. The slow path: a short poll.
			o.mu.Unlock()
			select {
			case <-time.After(5 * time.Millisecond):
			case <-o.abort:
				<-o.slots
				o.l.failed.Add(1)
				return
			}
			o.mu.Lock()
		}
		o.pending = append(o.pending, e)
		o.npending.Store(int64(len(o.pending)))
		o.mu.Unlock()
		select {
		case o.more <- struct{}{}:
		default:
		}
	})
}

// mayPublishLocked reports whether a new value may go out now without the
// risk of being stored before an earlier one: connected, not publishing
// one at a time, and either nothing unacknowledged or the window open: the
// oldest unacknowledged value was published on this connection and a value
// was acknowledged on it (JetStream answers; right after a restart it may
// refuse a value and take the next). It also returns the connection's
// reconnect count, for publishLocked. o.mu held.
func (o *outStream[T]) mayPublishLocked() (bool, uint64) {
	if o.stale || !o.nc.IsConnected() {
		return false, 0
	}
	epoch := o.nc.Stats().Reconnects
	if len(o.pending) == 0 {
		return true, epoch
	}
	return o.pending[0].epoch == epoch && o.ackEpoch == epoch, epoch
}

// publishLocked publishes e asynchronously on the connection whose
// reconnect count is epoch; o.mu held. No retry inside nats.go
// (WithRetryAttempts(0), in o.pubOpts): its retries after "no responders"
// go out on their own timers, out of order; the link retries, in order.
func (o *outStream[T]) publishLocked(e *streamEntry, epoch uint64) {
	e.epoch = epoch
	m := e.msg
	if e.fut != nil || e.err != nil {
		// Published before: a fresh message and header, since nats.go
		// keeps the one it was given with the future.
		m = &nats.Msg{Subject: e.msg.Subject, Data: e.msg.Data, Header: make(nats.Header, len(e.msg.Header))}
		for k, v := range e.msg.Header {
			m.Header[k] = append([]string(nil), v...)
		}
	}
	e.fut, e.err = o.js.PublishMsgAsync(m, o.pubOpts...)
}

// head returns the oldest unacknowledged entry, waiting for one; nil when
// send has exited and everything is settled, or on abort.
func (o *outStream[T]) head() *streamEntry {
	for {
		o.mu.Lock()
		if len(o.pending) > 0 {
			e := o.pending[0]
			o.mu.Unlock()
			return e
		}
		o.mu.Unlock()
		select {
		case <-o.more:
		case <-o.sent:
			o.mu.Lock()
			empty := len(o.pending) == 0
			o.mu.Unlock()
			if empty {
				return nil
			}
		case <-o.abort:
			return nil
		}
	}
}

// pop settles the head entry and reports whether none is left: then a
// one-at-a-time round is over and new values may go again.
func (o *outStream[T]) pop() bool {
	o.mu.Lock()
	if len(o.pending) == 0 { // the link died meanwhile
		o.mu.Unlock()
		return true
	}
	o.pending[0] = nil
	o.pending = o.pending[1:]
	o.npending.Store(int64(len(o.pending)))
	empty := len(o.pending) == 0
	if empty {
		o.stale = false
	}
	o.mu.Unlock()
	<-o.slots
	return empty
}

// sleep pauses d, or until abort; false on abort.
func (o *outStream[T]) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-o.abort:
		return false
	}
}

func (o *outStream[T]) ack() {
	defer close(o.acked)
	timer := time.NewTimer(o.ackWait)
	defer timer.Stop()
	backoff := retryMin
	// wait doubles after each timeout, up to ackWaitMax, so that a stream
	// slower than ackWait to acknowledge is not flooded with republishes
	// that each time out in turn; an ack sets it back.
	wait := o.ackWait
	serial := false // one at a time, after a failure
	heldFull := false
	for {
		e := o.head()
		if e == nil {
			return
		}
		if serial && !e.resent {
			// Take an ack of the first publish if it came meanwhile;
			// otherwise publish again, once connected.
			if e.fut != nil {
				select {
				case pa := <-e.fut.Ok():
					if o.settled(e, pa) {
						serial = false
					}
					backoff, wait = retryMin, o.ackWait
					continue
				default:
				}
			}
			for !o.nc.IsConnected() {
				if o.nc.IsClosed() {
					o.die(fmt.Errorf("natsbridge: OutStream: %w", nats.ErrConnectionClosed))
					return
				}
				if !o.sleep(backoff) {
					return
				}
				backoff = min(2*backoff, retryMax)
			}
			o.mu.Lock()
			o.publishLocked(e, o.nc.Stats().Reconnects)
			e.resent = true
			o.mu.Unlock()
		}
		err := e.err
		if err == nil {
			timer.Reset(wait)
			select {
			case pa := <-e.fut.Ok():
				if o.settled(e, pa) {
					serial = false
				}
				if heldFull {
					heldFull = false
					o.l.warn.logger().Info("natsbridge: the stream took the held value; going on", "link", o.l.kind, "subject", o.subject)
				}
				backoff, wait = retryMin, o.ackWait
				continue
			case err = <-e.fut.Err():
			case <-timer.C:
				err = jetstream.ErrAsyncPublishTimeout
				wait = min(2*wait, max(o.ackWait, ackWaitMax))
			case <-o.abort:
				return
			}
		}
		v := judge(err)
		if v == streamGone {
			var why error
			if v, why = o.lookup(); v == streamGone {
				err = why
			} else if o.aborted() {
				return
			}
		}
		switch v {
		case full:
			if !o.waits {
				o.l.fail("a value was refused: the stream is full", err)
				if o.pop() {
					serial = false
				}
				continue
			}
			heldFull = true
			o.l.warn.warn(1, "the stream is full: holding the value (counted Pending) and publishing it again until the stream takes it", err)
		case tooLarge:
			o.l.fail("a value was refused: too large for the stream", err)
			if o.pop() {
				serial = false
			}
			continue
		case rejected:
			o.l.fail("a value was refused by the stream", err)
			if o.pop() {
				serial = false
			}
			continue
		case streamGone:
			o.die(fmt.Errorf("natsbridge: OutStream: stream %q: %w", o.stream, err))
			return
		case connGone:
			o.die(fmt.Errorf("natsbridge: OutStream: %w", nats.ErrConnectionClosed))
			return
		case retry:
			if !serial {
				o.l.warn.warn(0, "publishing to the stream failed; publishing the unacknowledged values again, one at a time", err)
			}
		}
		// Publish the head again, then each value after it once the one
		// before is acknowledged; new values wait (o.stale).
		serial = true
		o.mu.Lock()
		o.stale = true
		for _, p := range o.pending {
			p.resent = false
		}
		o.mu.Unlock()
		if !o.sleep(backoff) {
			return
		}
		backoff = min(2*backoff, retryMax)
	}
}

// settled counts the head entry acknowledged; it reports what pop does.
func (o *outStream[T]) settled(e *streamEntry, pa *jetstream.PubAck) bool {
	o.l.sent.Add(1)
	if pa.Sequence < o.lastAck {
		// Not a loss, and at most one per disconnect: logged directly, not
		// summed up with the losses.
		o.l.warn.logger().Warn("natsbridge: a value was stored ahead of earlier values: the connection broke while it was published, and nats.go sent it from its reconnect buffer before they were published again",
			"link", o.l.kind, "subject", o.subject, "seq", e.n, "stream_seq", pa.Sequence, "earlier_up_to", o.lastAck)
	}
	o.lastAck = max(o.lastAck, pa.Sequence)
	o.l.lastSeq.Store(o.lastAck)
	o.mu.Lock()
	o.ackEpoch = e.epoch
	o.mu.Unlock()
	return o.pop()
}

func (o *outStream[T]) aborted() bool {
	select {
	case <-o.abort:
		return true
	default:
		return false
	}
}

// lookup decides, for a publish no stream answered, whether the stream is
// gone (deleted, or no longer taking the subject: then why says which) or
// the failure may pass (JetStream not ready, disconnected).
func (o *outStream[T]) lookup() (v verdict, why error) {
	ctx, cancel := context.WithTimeout(context.Background(), min(o.ackWait, lookupTimeout))
	defer cancel()
	go func() {
		select {
		case <-o.abort:
			cancel()
		case <-ctx.Done():
		}
	}()
	s, lerr := o.js.Stream(ctx, o.stream)
	switch {
	case errors.Is(lerr, jetstream.ErrStreamNotFound):
		return streamGone, lerr
	case lerr != nil:
		return retry, nil
	}
	for _, p := range s.CachedInfo().Config.Subjects {
		if subjectMatches(p, o.subject) {
			return retry, nil
		}
	}
	return streamGone, fmt.Errorf("no longer takes subject %q (its subjects: %v)", o.subject, s.CachedInfo().Config.Subjects)
}

// watchConn makes the link die when its connection closes for good or
// its stream is deleted, even while no value is to be sent.
func (o *outStream[T]) watchConn(ch chan nats.Status, gone <-chan struct{}, adv *nats.Subscription) {
	defer close(o.connDone)
	defer o.nc.RemoveStatusListener(ch)
	if adv != nil {
		defer func() { _ = adv.Unsubscribe() }()
	}
	for {
		select {
		case <-ch:
			o.die(fmt.Errorf("natsbridge: OutStream: %w", nats.ErrConnectionClosed))
			return
		case <-gone:
			if v, why := o.lookup(); v == streamGone {
				o.die(fmt.Errorf("natsbridge: OutStream: stream %q: %w", o.stream, why))
				return
			}
		case <-o.abort:
			return
		case <-o.acked:
			return
		}
	}
}

// die stops the link for good: Err, Done, the log line; the watcher stops
// and what the link held is counted in Failed.
func (o *outStream[T]) die(err error) {
	o.dieOnce.Do(func() { o.dieOnce1(err) })
}

func (o *outStream[T]) dieOnce1(err error) {
	o.l.die(err) // a no-op if Close began: then Close returns err
	o.mu.Lock()
	o.deathErr = err
	o.mu.Unlock()
	o.dead.Store(true)
	o.abortOnce.Do(func() { close(o.abort) })
	n := uint64(o.feed.w.Len())
	o.feed.w.Stop()
	<-o.sent
	o.mu.Lock()
	n += uint64(len(o.pending))
	o.pending = nil
	o.npending.Store(0)
	o.mu.Unlock()
	if n > 0 {
		o.l.failed.Add(n)
		o.l.warn.warn(n, fmt.Sprintf("%d values not stored: the link stopped for good", n), err)
	}
}

func (o *outStream[T]) shut(ctx context.Context) error {
	o.feed.startClose()
	done := make(chan struct{})
	go func() {
		<-o.sent
		<-o.acked
		close(done)
	}()
	select {
	case <-done:
		<-o.connDone
		if o.dead.Load() && o.l.Err() == nil {
			// It died during Close (so Err does not say it): Close does.
			o.mu.Lock()
			defer o.mu.Unlock()
			return o.deathErr
		}
		return nil
	case <-ctx.Done():
	}
	o.abortOnce.Do(func() { close(o.abort) })
	o.feed.w.Stop()
	<-done // both exit at once on abort
	<-o.connDone
	if o.dead.Load() {
		return ctx.Err()
	}
	n := o.feed.left()
	o.mu.Lock()
	n += uint64(len(o.pending))
	o.pending = nil
	o.npending.Store(0)
	o.mu.Unlock()
	if n > 0 {
		o.l.failed.Add(n)
		o.l.warn.warn(n, fmt.Sprintf("%d values not acknowledged: Close's context ended", n), ctx.Err())
	}
	return ctx.Err()
}
