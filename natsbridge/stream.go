package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/heraldgo/herald/broadcast"
)

// Tuning of OutStream.
const (
	// streamWindow is how many values OutStream has published and not yet
	// seen acknowledged; the sender waits when it is reached. Acks come
	// back in order, so a window keeps the stream busy where one publish
	// at a time would wait a round trip per value.
	streamWindow = 256
	// retryMax bounds the pause before a republish.
	retryMax = 2 * time.Second
	// lookupTimeout bounds the stream look-up of OutStream and InStream.
	lookupTimeout = 10 * time.Second
)

// Variables only so that a test can make republishing frequent.
var (
	// ackWait is how long OutStream waits for a value's ack before it
	// publishes the unacknowledged values again (same message IDs).
	ackWait = 5 * time.Second
	// ackWaitMax bounds the wait for an ack after timeouts (see ack).
	ackWaitMax = 5 * time.Second
	// retryMin is the first pause before a republish.
	retryMin = 50 * time.Millisecond
)

// OutStream and InStream do the same through an existing JetStream stream
// (the link does not create it): durable; InStream starts at stream sequence
// from, inclusive (0: only messages stored after it starts).
//
// OutStream publishes each value of b to subject, which must be one of the
// stream's subjects, with a message ID (the Nats-Msg-Id header: the link's
// own unique prefix and the value's number), and counts it in Sent when the
// stream acknowledges it. Up to 256 values are in flight at once. When a
// publish fails for a reason that may pass (a disconnect, a server
// restart, no ack within 5 s), the link publishes every unacknowledged
// value again, in order, with the same IDs, until it is acknowledged or
// Close's ctx ends: the stream stores each value once (within its
// duplicate window, 2 minutes by default) and in b's order. A value the
// stream rejects for good (too large, the codec fails) is counted in
// Failed. Like [Out], the link is a watcher of b with opts; while the
// stream cannot be reached the watcher fills and its policy applies.
// OutStream returns an error at once if the stream does not exist or does
// not take subject, and an error wrapping [ErrLoop] as Out does.
func OutStream[T any](b *broadcast.Broadcaster[T], js jetstream.JetStream, stream, subject string, c Codec[T], opts ...broadcast.Option) (*Link, error) {
	mustArgs("OutStream", b == nil, js == nil, c == nil)
	if !validSubject(subject, true) {
		return nil, fmt.Errorf("natsbridge: OutStream: %w: %q (a subject to publish to has no wildcards)", nats.ErrBadSubject, subject)
	}
	if err := checkStream(js, stream, subject, true); err != nil {
		return nil, fmt.Errorf("natsbridge: OutStream: %w", err)
	}
	release, err := register(b, subject, dirOut)
	if err != nil {
		return nil, err
	}
	w, base, err := watchExact(b, opts)
	if err != nil {
		release()
		return nil, fmt.Errorf("natsbridge: OutStream: %w", err)
	}
	l := newLink("OutStream", subject)
	l.release = release
	l.dropped = w.Dropped
	o := &outStream[T]{
		l:       l,
		js:      js,
		nc:      js.Conn(),
		stream:  stream,
		subject: subject,
		codec:   c,
		idBase:  nuid.Next() + "-",
		slots:   make(chan struct{}, streamWindow),
		more:    make(chan struct{}, 1),
		abort:   make(chan struct{}),
		sent:    make(chan struct{}),
		acked:   make(chan struct{}),
		feed:    &outFeed[T]{w: w, b: b, base: base},
	}
	go o.send()
	go o.ack()
	l.shut = o.shut
	return l, nil
}

// checkStream looks stream up and checks that subject is one of its
// subjects (literal) or overlaps them (a filter).
func checkStream(js jetstream.JetStream, stream, subject string, literal bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("stream %q: %w", stream, err)
	}
	for _, p := range s.CachedInfo().Config.Subjects {
		if subjectsOverlap(p, subject) && (!literal || subjectMatches(p, subject)) {
			return nil
		}
	}
	return fmt.Errorf("stream %q does not take subject %q (its subjects: %v)", stream, subject, s.CachedInfo().Config.Subjects)
}

// outStream is OutStream's state. Two goroutines: send takes values from
// the watcher and publishes them; ack waits for their acks in order and
// republishes on a transient failure.
type outStream[T any] struct {
	l               *Link
	js              jetstream.JetStream
	stream, subject string
	codec           Codec[T]
	idBase          string
	feed            *outFeed[T]
	n               uint64        // values numbered so far; send only
	slots           chan struct{} // one token per value in flight
	more            chan struct{} // cap 1: pending grew
	abort           chan struct{} // closed when Close's ctx ends
	sent, acked     chan struct{} // closed when send, ack exit
	abortOnce       sync.Once
	nc              *nats.Conn
	lastAck         uint64 // stream sequence of the last value acknowledged; ack only

	// mu guards pending, stale and every publish, so that publishes go out
	// in order and a republish is not overtaken by a new value.
	mu      sync.Mutex
	pending []*streamEntry // published, not acknowledged, in order
	stale   bool           // a republish is due: send waits
}

type streamEntry struct {
	msg   *nats.Msg
	fut   jetstream.PubAckFuture // nil when the publish failed at once
	err   error                  // that failure
	epoch uint64                 // the connection's reconnect count when published
}

func (o *outStream[T]) send() {
	defer close(o.sent)
	o.feed.run(func(v T) {
		data, err := o.codec.Marshal(v)
		if err != nil {
			o.l.fail("a value could not be encoded", err)
			return
		}
		select {
		case o.slots <- struct{}{}:
		case <-o.abort:
			o.l.failed.Add(1)
			return
		}
		o.n++
		m := nats.NewMsg(o.subject)
		m.Data = data
		m.Header.Set(jetstream.MsgIDHeader, o.idBase+strconv.FormatUint(o.n, 10))
		e := &streamEntry{msg: m}
		o.mu.Lock()
		for !o.mayPublishLocked() {
			// Reconnecting, or values of the last connection are not
			// settled: a new value published now could be stored before
			// them. This is the failure path; a short poll is fine.
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
		o.publishLocked(e)
		o.pending = append(o.pending, e)
		o.mu.Unlock()
		select {
		case o.more <- struct{}{}:
		default:
		}
	})
}

// mayPublishLocked reports whether a new value may go out now without the
// risk of being stored before an earlier one: connected, no republish due,
// and every unacknowledged value published on the current connection (a
// value published on an earlier one may have been lost with it, and is
// republished first). o.mu held.
//
// What this cannot exclude: nats.go notices a broken connection between
// this check and the publish, so that a value goes to its reconnect buffer
// (sent first after reconnecting) while an earlier one was lost in the
// broken connection. The ack sequence numbers show it; ack reports it.
func (o *outStream[T]) mayPublishLocked() bool {
	if o.stale || !o.nc.IsConnected() {
		return false
	}
	return len(o.pending) == 0 || o.pending[0].epoch == o.nc.Stats().Reconnects
}

// publishLocked publishes e asynchronously; o.mu held.
func (o *outStream[T]) publishLocked(e *streamEntry) {
	e.epoch = o.nc.Stats().Reconnects
	// A fresh message each time: nats.go keeps the one it was given with
	// the future, and the header map must not be shared with a retry.
	m := nats.NewMsg(e.msg.Subject)
	m.Data = e.msg.Data
	m.Header.Set(jetstream.MsgIDHeader, e.msg.Header.Get(jetstream.MsgIDHeader))
	e.fut, e.err = o.js.PublishMsgAsync(m, jetstream.WithExpectStream(o.stream))
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

// pop settles the head entry.
func (o *outStream[T]) pop() {
	o.mu.Lock()
	o.pending[0] = nil
	o.pending = o.pending[1:]
	o.mu.Unlock()
	<-o.slots
}

func (o *outStream[T]) ack() {
	defer close(o.acked)
	timer := time.NewTimer(ackWait)
	defer timer.Stop()
	backoff := retryMin
	// wait doubles after each timeout, up to ackWaitMax, so that a stream
	// slower than ackWait to acknowledge is not flooded with republishes
	// that each time out in turn; an ack sets it back.
	wait := ackWait
	for {
		e := o.head()
		if e == nil {
			return
		}
		var err error
		if e.err != nil {
			err = e.err
		} else {
			timer.Reset(wait)
			select {
			case pa := <-e.fut.Ok():
				o.l.sent.Add(1)
				if pa.Sequence < o.lastAck {
					o.l.warn.warn(fmt.Sprintf("a value was stored at stream sequence %d, before the previous value (%d): a connection broke in the instant of a publish", pa.Sequence, o.lastAck), nil)
				}
				o.lastAck = max(o.lastAck, pa.Sequence)
				o.l.lastSeq.Store(o.lastAck)
				o.pop()
				backoff = retryMin
				wait = ackWait
				continue
			case err = <-e.fut.Err():
			case <-timer.C:
				err = jetstream.ErrAsyncPublishTimeout
				wait = min(2*wait, max(ackWait, ackWaitMax))
			case <-o.abort:
				return
			}
		}
		if !transient(err) {
			o.l.fail("a value was rejected by the stream", err)
			o.pop()
			continue
		}
		// Something between here and the stream failed: the value may or
		// may not be stored, and so may the ones after it. Publish them all
		// again in order; the stream drops those it has (same message ID).
		// New values wait meanwhile (o.mu).
		o.l.warn.warn("publishing to the stream failed; retrying the unacknowledged values", err)
		o.mu.Lock()
		o.stale = true
		o.mu.Unlock()
		// Wait while disconnected too: republishing then would only fill
		// the reconnect buffer with copies.
		for first := true; first || !o.js.Conn().IsConnected(); first = false {
			select {
			case <-time.After(backoff):
			case <-o.abort:
				return
			}
			backoff = min(2*backoff, retryMax)
		}
		o.mu.Lock()
		for _, p := range o.pending {
			o.publishLocked(p)
		}
		o.stale = false
		o.mu.Unlock()
	}
}

// transient reports whether a publish that failed with err may succeed
// when retried.
func transient(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrMaxPayload), errors.Is(err, nats.ErrConnectionClosed),
		errors.Is(err, nats.ErrBadSubject), errors.Is(err, nats.ErrInvalidMsg):
		return false
	case errors.As(err, &apiErr):
		// 503: JetStream not ready (after a restart); others are the
		// stream's verdict on this message.
		return apiErr.Code == 503
	default:
		// Disconnected, no responders, ack timeout, reconnect buffer
		// full, too many in flight on the shared JetStream context.
		return true
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
		return nil
	case <-ctx.Done():
	}
	o.abortOnce.Do(func() { close(o.abort) })
	o.feed.w.Stop()
	<-done // both exit at once on abort
	n := o.feed.left()
	o.mu.Lock()
	n += uint64(len(o.pending))
	o.pending = nil
	o.mu.Unlock()
	if n > 0 {
		o.l.failed.Add(n)
		o.l.warn.warn(fmt.Sprintf("%d values not acknowledged: Close's context ended", n), ctx.Err())
	}
	return ctx.Err()
}

// InStream: see OutStream.
//
// InStream reads the stream through an ordered consumer filtered on
// subject (which may have wildcards and must overlap the stream's
// subjects): an ephemeral consumer that the client recreates after a
// reconnect, a server restart or a gap, from the sequence after the last
// one it delivered, so each stored message is published on b once, in
// stream order. [Link.LastSeq] is the stream sequence of the last one; a
// process that records it resumes with from = LastSeq()+1. A message the
// codec cannot decode is counted in Failed and skipped. The consumer pulls
// only what the link takes, so nothing is dropped as a slow consumer: a
// Block watcher of b slows the link down instead. InStream returns an
// error at once if the stream does not exist or does not overlap subject,
// and an error wrapping [ErrLoop] as In does.
func InStream[T any](js jetstream.JetStream, stream, subject string, from uint64, c Codec[T], b *broadcast.Broadcaster[T]) (*Link, error) {
	mustArgs("InStream", b == nil, js == nil, c == nil)
	if !validSubject(subject, false) {
		return nil, fmt.Errorf("natsbridge: InStream: %w: %q", nats.ErrBadSubject, subject)
	}
	if err := checkStream(js, stream, subject, false); err != nil {
		return nil, fmt.Errorf("natsbridge: InStream: %w", err)
	}
	release, err := register(b, subject, dirIn)
	if err != nil {
		return nil, err
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverNewPolicy}
	if from > 0 {
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = from
	}
	lctx, lcancel := context.WithTimeout(context.Background(), lookupTimeout)
	cons, err := js.OrderedConsumer(lctx, stream, cfg)
	lcancel()
	if err != nil {
		release()
		return nil, fmt.Errorf("natsbridge: InStream: consumer on stream %q: %w", stream, err)
	}
	l := newLink("InStream", subject)
	l.release = release
	ctx, cancel := context.WithCancel(context.Background())
	handler := func(m jetstream.Msg) {
		if md, err := m.Metadata(); err == nil {
			defer l.lastSeq.Store(md.Sequence.Stream)
		}
		deliver(ctx, l, c, b, m.Data())
	}
	cc, err := cons.Consume(handler)
	if err != nil {
		cancel()
		release()
		return nil, fmt.Errorf("natsbridge: InStream: consume stream %q: %w", stream, err)
	}
	l.shut = func(cctx context.Context) error {
		cc.Drain()
		select {
		case <-cc.Closed():
			cancel()
			return nil
		case <-cctx.Done():
		}
		// Out of time: the messages the consumer still holds are handed
		// over at once, each failing (counted) as b's publish gives up.
		cancel()
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-cc.Closed():
		case <-t.C:
			cc.Stop()
		}
		return cctx.Err()
	}
	return l, nil
}
