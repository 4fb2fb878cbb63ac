package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
)

// subscribeTimeout bounds how long In waits for the server to confirm its
// subscription.
const subscribeTimeout = 10 * time.Second

// Out sends every value published on b, in order, to subject. It is a watcher
// of b with the given options (policy, queue length).
//
// The values go out through nc as core NATS messages, encoded by c, from one
// goroutine, so they leave in b's order. Sent counts each value nats.go
// accepted (nc.Publish returned nil). Core NATS delivers at most once: while
// nc is disconnected, nats.go keeps what is published in its reconnect
// buffer (nats.ReconnectBufSize, 8 MiB by default) and sends it after
// reconnecting; a value that does not fit, or any value when the buffer is
// disabled (ReconnectBufSize(-1)), fails with nats.ErrReconnectBufExceeded
// and is counted in Failed, as are values over the server's max_payload
// and values c cannot encode. A message that reached a server about to
// stop, or a subscriber not yet resubscribed after a reconnect, is lost
// without a trace: use [OutStream] when that matters.
//
// The watcher's policy decides what happens when NATS is slower than b's
// publishers: [broadcast.Block] makes them wait (nothing lost within the
// process), [broadcast.Drop] (the default) and [broadcast.DropOldest] lose
// values, counted in the link's Dropped. Out returns an error wrapping
// [ErrLoop] if an incoming link joins b to an overlapping subject,
// [broadcast.ErrClosed] if b is shut down, an error wrapping
// nats.ErrBadSubject for a subject that is empty or has wildcards, and
// nats.ErrConnectionClosed if nc is closed. A nil b, nc or c panics.
func Out[T any](b *broadcast.Broadcaster[T], nc *nats.Conn, subject string, c Codec[T], opts ...broadcast.Option) (*Link, error) {
	mustArgs("Out", b == nil, nc == nil, c == nil)
	if !validSubject(subject, true) {
		return nil, fmt.Errorf("natsbridge: Out: %w: %q (a subject to publish to has no wildcards)", nats.ErrBadSubject, subject)
	}
	if nc.IsClosed() {
		return nil, fmt.Errorf("natsbridge: Out: %w", nats.ErrConnectionClosed)
	}
	release, err := register(b, subject, dirOut)
	if err != nil {
		return nil, err
	}
	w, base, err := watchExact(b, opts)
	if err != nil {
		release()
		return nil, fmt.Errorf("natsbridge: Out: %w", err)
	}
	l := newLink("Out", subject)
	l.release = release
	f := &outFeed[T]{w: w, b: b, base: base}
	l.dropped = w.Dropped
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		f.run(func(v T) {
			data, err := c.Marshal(v)
			if err != nil {
				l.fail("a value could not be encoded", err)
				return
			}
			if err := nc.Publish(subject, data); err != nil {
				l.fail("a value could not be published", err)
				if errors.Is(err, nats.ErrConnectionClosed) && l.die(fmt.Errorf("natsbridge: Out: %w", err)) {
					f.w.Stop() // no publisher of b waits for a link that is gone
				}
				return
			}
			l.sent.Add(1)
		})
	}()
	l.shut = func(ctx context.Context) error {
		f.startClose()
		select {
		case <-exited:
		case <-ctx.Done():
			f.w.Stop()
			<-exited // the loop ends after the publish in progress, which does not wait
			if n := f.left(); n > 0 {
				l.failed.Add(n)
				l.warn.warn(fmt.Sprintf("%d values not sent: Close's context ended", n), ctx.Err())
			}
			return ctx.Err()
		}
		// The values are in nats.go's buffer: have them written to the
		// server, as far as ctx allows. While disconnected they stay in
		// the reconnect buffer, sent when the connection is back.
		if nc.IsConnected() {
			if err := nc.FlushWithContext(ctx); err != nil && ctx.Err() != nil {
				return ctx.Err()
			}
		}
		return nil
	}
	return l, nil
}

// In publishes on b every value that arrives on subject, this process's own
// included. It returns once the subscription is live at the server.
//
// subject may have wildcards. Messages are decoded by c and published on b
// one at a time, in the order the subscription receives them, so one Out's
// values arrive in its order. A message c cannot decode is counted in
// Failed and skipped. Publishing on b waits while a [broadcast.Block]
// watcher of b is full; meanwhile nats.go queues the incoming messages up
// to the subscription's pending limits (500 000 messages or 64 MiB by
// default; see [Link.SetPendingLimits]) and drops what is over them, as a
// slow consumer: those are counted in the link's Dropped. In returns an
// error wrapping [ErrLoop] if an outgoing link joins b to an overlapping
// subject, an error wrapping nats.ErrBadSubject for a malformed subject,
// and the connection's error if the subscription cannot be confirmed
// within 10 s. A nil b, nc or c panics.
func In[T any](nc *nats.Conn, subject string, c Codec[T], b *broadcast.Broadcaster[T]) (*Link, error) {
	mustArgs("In", b == nil, nc == nil, c == nil)
	if !validSubject(subject, false) {
		return nil, fmt.Errorf("natsbridge: In: %w: %q", nats.ErrBadSubject, subject)
	}
	release, err := register(b, subject, dirIn)
	if err != nil {
		return nil, err
	}
	l := newLink("In", subject)
	l.release = release
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	var (
		subMu   sync.Mutex // guards sub until it is set
		sub     *nats.Subscription
		dropped atomic.Uint64 // sub.Dropped(), as last seen
		n       uint64        // messages handled; read in the handler only
		closing atomic.Bool   // Close began: the handler reads the drop count every time
	)
	checkDropped := func(s *nats.Subscription) {
		d, err := s.Dropped()
		if err != nil { // closed: keep the last count
			return
		}
		if old := dropped.Load(); uint64(d) > old && dropped.CompareAndSwap(old, uint64(d)) {
			l.warn.warn(fmt.Sprintf("%d messages dropped by the NATS client as a slow consumer (the broadcaster's publish waited)", uint64(d)-old), nats.ErrSlowConsumer)
		}
	}
	handler := func(m *nats.Msg) {
		// The client counts drops only while the subscription is open. A
		// drop happens when the pending queue is full, so a message is
		// handled after each drop: checking here (every 256 messages, and
		// every message once Close began) misses none at Close.
		n++
		if n%256 == 0 || closing.Load() {
			subMu.Lock()
			s := sub
			subMu.Unlock()
			if s != nil {
				checkDropped(s)
			}
		}
		deliver(ctx, l, c, b, m.Data)
	}
	s, err := nc.Subscribe(subject, handler)
	if err != nil {
		cancel()
		release()
		return nil, fmt.Errorf("natsbridge: In: %w", err)
	}
	s.SetClosedHandler(func(string) {
		close(exited)
		if nc.IsClosed() { // the connection closed for good, not by Close
			l.die(fmt.Errorf("natsbridge: In: %w", nats.ErrConnectionClosed))
		}
	})
	subMu.Lock()
	sub = s
	subMu.Unlock()
	if err := nc.FlushTimeout(subscribeTimeout); err != nil {
		cancel()
		_ = s.Unsubscribe()
		waitExited(exited)
		release()
		return nil, fmt.Errorf("natsbridge: In: subscription not confirmed by the server: %w", err)
	}
	l.setLimits = s.SetPendingLimits
	l.dropped = func() uint64 {
		checkDropped(s)
		return dropped.Load()
	}
	l.shut = func(cctx context.Context) error {
		closing.Store(true)
		checkDropped(s)
		// Drain: the server stops sending, the client hands over what it
		// holds, then the subscription closes and its goroutine exits.
		if err := s.Drain(); err != nil {
			_ = s.Unsubscribe()
		}
		select {
		case <-exited:
			checkDropped(s)
			cancel()
			return nil
		case <-cctx.Done():
		}
		// Out of time: a publish waiting on b gives up, and so does each
		// message the client still holds, counted in Failed one by one by
		// the handler, which then has nothing to wait for.
		cancel()
		if !waitExited(exited) {
			// The drain itself is stuck (the connection is down): drop
			// what is pending, counted.
			pending, _, _ := s.Pending()
			_ = s.Unsubscribe()
			waitExited(exited)
			if pending > 0 {
				l.failed.Add(uint64(pending))
			}
		}
		checkDropped(s)
		return cctx.Err()
	}
	return l, nil
}

// waitExited waits, at most closeGrace, for a subscription's goroutine to
// exit after an Unsubscribe (its closed handler closes exited). nats.go
// closes the subscription locally also when the connection is down or
// closed.
func waitExited(exited <-chan struct{}) bool {
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-exited:
		return true
	case <-t.C:
		return false
	}
}

// SetPendingLimits sets how many messages and bytes the NATS client queues
// for an [In] link while its broadcaster's publish waits; what is over them
// is dropped and counted in Dropped. A limit of -1 means none. It returns
// an error for other kinds of link.
func (l *Link) SetPendingLimits(msgs, bytes int) error {
	if l.setLimits == nil {
		return errors.New("natsbridge: SetPendingLimits: only In links have pending limits")
	}
	return l.setLimits(msgs, bytes)
}

func mustArgs(fn string, nilB, nilConn, nilCodec bool) {
	switch {
	case nilB:
		panic("natsbridge: " + fn + ": nil Broadcaster")
	case nilConn:
		panic("natsbridge: " + fn + ": nil connection")
	case nilCodec:
		panic("natsbridge: " + fn + ": nil Codec")
	}
}
