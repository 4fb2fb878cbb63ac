package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
)

// InStream is [InStreamWith] with the zero Options: see there.
func InStream[T any](js jetstream.JetStream, stream, subject string, from uint64, c Codec[T], b *broadcast.Broadcaster[T]) (*Link, error) {
	return InStreamWith(js, stream, subject, from, c, b, Options[T]{})
}

// InStreamWith publishes on b the messages of stream on subject (which may
// have wildcards and must overlap the stream's subjects), from stream
// sequence from, inclusive (0: only messages stored after it starts). It
// reads o.Durable, o.AckWait, o.Window, o.FromHeaders, o.AcceptForeign and
// o.Logger.
//
// Without o.Durable it reads through an ordered consumer: an ephemeral
// consumer, without acks, that the client recreates after a reconnect, a
// server restart or a gap, from the sequence after the last one it
// delivered, so each stored message is published on b once, in stream
// order; the client holds up to o.Window messages (default 256) ahead of
// the link; o.AckWait is not used. [Link.LastSeq] is the stream sequence of
// the last message; a process that records it resumes with from =
// LastSeq()+1.
//
// With o.Durable it reads through the durable consumer of that name, made
// if the stream has none (starting at from) and otherwise used as it is
// (its AckWait and MaxAckPending set to the link's): explicit acks,
// AckWait o.AckWait (default 5 s), at most o.Window (default 256)
// unacknowledged. Each message is acknowledged once it is published on b
// (or counted Failed), so an InStream started again with the same name
// resumes after the last message acknowledged, whatever from says; Close
// flushes the acks within its ctx. A message whose publish on b Close's
// ctx cut short is counted in Failed and not acknowledged: the server
// delivers it again to the next InStream of that name. While
// the publish on b waits (a full Block watcher), the link tells the server
// the message is in progress, so it is not redelivered meanwhile. A message
// the server redelivers that the link already published (its ack was lost)
// is acknowledged again and not published twice, within the last 4×Window
// messages. A message lost on the way to the client after a reconnect is
// redelivered after AckWait, possibly after later ones: then the order on
// b differs from stream order. A durable consumer whose filter is not
// subject is an error.
//
// Each message's headers must carry the bridge's origin and sequence
// (HeaderSeq: what OutStream and Out send); a message
// without them, from a foreign publisher, is counted in Failed and logged
// at Warn unless o.AcceptForeign. A heartbeat (HeaderBeat, which an Out on
// a subject the stream takes stores there) is skipped, not counted. A
// message the codec cannot decode is counted in Failed and skipped;
// o.FromHeaders, if set, maps each decoded value with the message's
// headers. The consumer pulls only what the link takes, so nothing is
// dropped as a slow consumer: a Block watcher of b slows the link down
// instead.
//
// When the stream is deleted, the link logs it at Warn, looks the stream up
// with a backoff (50 ms doubling to 2 s) and, once a stream of that name is
// created again, reads it from its first message (a durable consumer is
// made again), without the user doing anything; LastSeq then counts in the
// new stream. Messages the old consumer still hands over once the link
// has given it up are counted in Failed. (An ordered consumer that
// recreated itself on the new stream before the link saw the deletion may
// have delivered a few of the new stream's messages already; they are
// delivered again.) Consumer
// errors are logged at Warn, at most one line per 10 s (the others at
// Debug). When the consumer fails for good (the connection closed, the
// durable consumer deleted while the stream lives: seen within about 10
// s, through the server's notice or the consumer's missing heartbeats),
// the link stops: it logs at Error, [Link.Err] says why and [Link.Done]
// is closed.
//
// InStreamWith returns an error at once if the stream does not exist or
// does not overlap subject, and an error wrapping [ErrLoop] as In does. A
// nil js, c or b, or a negative o.AckWait or o.Window, panics.
func InStreamWith[T any](js jetstream.JetStream, stream, subject string, from uint64, c Codec[T], b *broadcast.Broadcaster[T], o Options[T]) (*Link, error) {
	mustArgs("InStream", b == nil, js == nil, c == nil)
	if o.AckWait < 0 || o.Window < 0 {
		panic(fmt.Sprintf("natsbridge: InStreamWith: negative AckWait (%v) or Window (%d)", o.AckWait, o.Window))
	}
	if !validSubject(subject, false) {
		return nil, fmt.Errorf("natsbridge: InStream: %w: %q", nats.ErrBadSubject, subject)
	}
	created, err := checkStream(context.Background(), js, stream, subject, false)
	if err != nil {
		return nil, fmt.Errorf("natsbridge: InStream: %w", err)
	}
	release, err := register(b, subject, dirIn)
	if err != nil {
		return nil, err
	}
	l := newLink("InStream", subject)
	l.warn.lg = o.Logger
	l.release = release
	s := &inStream[T]{
		l:       l,
		js:      js,
		stream:  stream,
		subject: subject,
		codec:   c,
		b:       b,
		o:       o,
		window:  o.Window,
		ackWait: o.AckWait,
		created: created,
		events:  make(chan error, 1),
		stop:    make(chan struct{}),
		exited:  make(chan struct{}),
		seen:    map[uint64]struct{}{},
	}
	if s.window == 0 {
		s.window = defaultWindow
	}
	if s.ackWait == 0 {
		s.ackWait = ackWait
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.sctx, s.scancel = context.WithCancel(context.Background())
	if err := s.start(from, false); err != nil {
		s.cancel()
		s.scancel()
		release()
		return nil, fmt.Errorf("natsbridge: InStream: consumer on stream %q: %w", stream, err)
	}
	go s.supervise()
	l.shut = s.shut
	return l, nil
}

type inStream[T any] struct {
	l               *Link
	js              jetstream.JetStream
	stream, subject string
	codec           Codec[T]
	b               *broadcast.Broadcaster[T]
	o               Options[T]
	window          int
	ackWait         time.Duration
	ctx             context.Context // the publishes on b; canceled when Close's ctx ends
	cancel          context.CancelFunc
	sctx            context.Context // the supervisor's calls; canceled when Close begins
	scancel         context.CancelFunc
	events          chan error    // cap 1: the consumer reported an error worth a look-up
	stop            chan struct{} // closed when Close begins
	exited          chan struct{} // closed when supervise returns

	gen atomic.Uint64 // the current consumer's number: messages of an older one are ignored

	errLogMu   sync.Mutex
	nextErrLog time.Time // no Warn line on a consumer error before this

	mu      sync.Mutex
	cc      jetstream.ConsumeContext // the current consumption
	closed  <-chan struct{}          // cc.Closed(), asked once (each call may start a goroutine)
	created time.Time                // creation time of the stream it reads

	// Durable only: recently published stream sequences, to publish a
	// redelivered message once. seenMu: an old consumer's handler may still
	// run beside the new one's.
	seenMu sync.Mutex
	seen   map[uint64]struct{}
	order  []uint64
}

// start makes the consumer and consumes from stream sequence from
// (0: new messages only); fresh: the stream was created again, read it
// all.
func (s *inStream[T]) start(from uint64, fresh bool) error {
	ctx, cancel := context.WithTimeout(s.sctx, lookupTimeout)
	defer cancel()
	deliver, start := jetstream.DeliverNewPolicy, uint64(0)
	switch {
	case fresh:
		deliver = jetstream.DeliverAllPolicy
	case from > 0:
		deliver, start = jetstream.DeliverByStartSequencePolicy, from
	}
	var cons jetstream.Consumer
	var err error
	if s.o.Durable == "" {
		cons, err = s.js.OrderedConsumer(ctx, s.stream, jetstream.OrderedConsumerConfig{
			FilterSubjects: []string{s.subject}, DeliverPolicy: deliver, OptStartSeq: start,
		})
	} else {
		cons, err = s.durable(ctx, deliver, start)
	}
	if err != nil {
		return err
	}
	gen := s.gen.Add(1)
	cc, err := cons.Consume(s.handler(gen),
		jetstream.PullMaxMessages(s.window),
		jetstream.PullHeartbeat(pullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) { s.consumeErr(gen, err) }))
	if err != nil {
		return err
	}
	closed := cc.Closed()
	s.mu.Lock()
	s.cc, s.closed = cc, closed
	s.mu.Unlock()
	return nil
}

// durable returns the durable consumer o.Durable, made if missing.
func (s *inStream[T]) durable(ctx context.Context, deliver jetstream.DeliverPolicy, start uint64) (jetstream.Consumer, error) {
	cons, err := s.js.Consumer(ctx, s.stream, s.o.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		return s.js.CreateConsumer(ctx, s.stream, jetstream.ConsumerConfig{
			Durable:       s.o.Durable,
			FilterSubject: s.subject,
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       s.ackWait,
			MaxAckPending: s.window,
			DeliverPolicy: deliver,
			OptStartSeq:   start,
		})
	}
	if err != nil {
		return nil, err
	}
	cfg := cons.CachedInfo().Config
	if cfg.FilterSubject != s.subject || len(cfg.FilterSubjects) > 0 {
		return nil, fmt.Errorf("durable consumer %q filters %q%v, not %q", s.o.Durable, cfg.FilterSubject, cfg.FilterSubjects, s.subject)
	}
	if cfg.AckPolicy != jetstream.AckExplicitPolicy {
		return nil, fmt.Errorf("durable consumer %q acks %v, not explicitly", s.o.Durable, cfg.AckPolicy)
	}
	if cfg.AckWait != s.ackWait || cfg.MaxAckPending != s.window {
		cfg.AckWait, cfg.MaxAckPending = s.ackWait, s.window
		return s.js.UpdateConsumer(ctx, s.stream, cfg)
	}
	return cons, nil
}

// consumeErr is the consumer's error handler: errors that may mean the
// stream is gone make the supervisor look; all are logged at Warn.
func (s *inStream[T]) consumeErr(gen uint64, err error) {
	if s.gen.Load() != gen {
		return
	}
	level := slog.LevelWarn
	s.errLogMu.Lock()
	if now := time.Now(); now.Before(s.nextErrLog) {
		level = slog.LevelDebug // at most one Warn line per 10 s
	} else {
		s.nextErrLog = now.Add(warnInterval)
	}
	s.errLogMu.Unlock()
	s.l.warn.logger().Log(context.Background(), level, "natsbridge: the stream's consumer reported an error", "link", s.l.kind, "subject", s.subject, "error", err.Error())
	if errors.Is(err, jetstream.ErrConsumerDeleted) || errors.Is(err, jetstream.ErrNoHeartbeat) ||
		errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrConsumerNotFound) {
		select {
		case s.events <- err:
		default:
		}
	}
}

func (s *inStream[T]) handler(gen uint64) jetstream.MessageHandler {
	return func(m jetstream.Msg) {
		if s.gen.Load() != gen {
			// A consumer given up (its stream was deleted): what it still
			// hands over is not published.
			s.l.fail("a message of the deleted stream was not published", nil)
			return
		}
		md, _ := m.Metadata()
		var seq uint64
		if md != nil {
			seq = md.Sequence.Stream
		}
		durable := s.o.Durable != ""
		if durable && md != nil && md.NumDelivered > 1 {
			s.seenMu.Lock()
			_, ok := s.seen[seq]
			s.seenMu.Unlock()
			if ok {
				_ = m.Ack()
				return
			}
		}
		if !s.deliver(m, durable) {
			return // not published: Close's ctx ended; redelivered to the next reader
		}
		if md != nil {
			s.l.lastSeq.Store(seq)
		}
		if durable {
			_ = m.Ack()
			s.remember(seq)
		}
	}
}

// remember records seq as published, keeping the last 4×window.
func (s *inStream[T]) remember(seq uint64) {
	s.seenMu.Lock()
	defer s.seenMu.Unlock()
	s.seen[seq] = struct{}{}
	s.order = append(s.order, seq)
	if len(s.order) > 4*s.window {
		delete(s.seen, s.order[0])
		s.order = s.order[1:]
	}
}

// deliver handles one message; false when Close's ctx ended before it was
// published (counted Failed).
func (s *inStream[T]) deliver(m jetstream.Msg, durable bool) bool {
	h := m.Headers()
	_, _, beat, ok := origin(h)
	if beat {
		return true
	}
	if !ok && !s.o.AcceptForeign {
		s.l.fail("a message without the bridge's headers was refused (a foreign publisher: see Options.AcceptForeign)", nil)
		return true
	}
	v, err := s.codec.Unmarshal(m.Data())
	if err != nil {
		s.l.fail("a message could not be decoded", err)
		return true
	}
	if s.o.FromHeaders != nil {
		v = s.o.FromHeaders(h, v)
	}
	if durable {
		if ok, err := s.b.TryPublish(v); ok || err != nil {
			return s.published(err)
		}
		// The publish waits: keep the message from being redelivered.
		done := make(chan struct{})
		defer close(done)
		go func() {
			t := time.NewTicker(s.ackWait / 2)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					_ = m.InProgress()
				case <-done:
					return
				}
			}
		}()
	}
	return s.published(s.b.PublishContext(s.ctx, v))
}

func (s *inStream[T]) published(err error) bool {
	if err == nil {
		s.l.received.Add(1)
		return true
	}
	if s.ctx.Err() != nil {
		s.l.fail("a received message was not published: Close's context ended", err)
		return false
	}
	s.l.fail("a message could not be published on the broadcaster", err)
	return true
}

// supervise watches the consumer: when it reports a reason to look (or
// stops on its own), the stream is looked up; deleted, the link waits for
// it and reads the new one; the consumer stopped for good: the link dies.
func (s *inStream[T]) supervise() {
	defer close(s.exited)
	for {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		var why error
		stopped := false
		select {
		case <-s.stop:
			return
		case why = <-s.events:
		case <-closed:
			stopped = true
			why = errors.New("the consumer stopped")
		}
		if !s.check(why, stopped) {
			return
		}
	}
}

// check looks the stream up after why; stopped: the consumer has stopped.
// False when the supervisor is done (Close, or the link died).
func (s *inStream[T]) check(why error, stopped bool) bool {
	backoff := retryMin
	nc := s.js.Conn()
	for {
		ctx, cancel := context.WithTimeout(s.sctx, lookupTimeout)
		st, err := s.js.Stream(ctx, s.stream)
		cancel()
		if s.sctx.Err() != nil {
			return false
		}
		switch {
		case errors.Is(err, jetstream.ErrStreamNotFound):
			return s.recreated(nil)
		case err != nil:
			if nc.IsClosed() {
				s.die(fmt.Errorf("natsbridge: InStream: %w", nats.ErrConnectionClosed))
				return false
			}
			// Cannot tell yet (disconnected, JetStream not ready).
		default:
			s.mu.Lock()
			same := st.CachedInfo().Created.Equal(s.created)
			s.mu.Unlock()
			if !same {
				return s.recreated(st) // deleted and created again meanwhile
			}
			if !stopped && s.o.Durable != "" {
				// A durable consumer deleted while no pull was pending
				// leaves nats.go without the server's notice: it reports
				// missing heartbeats and goes on waiting. Ask.
				ctx, cancel := context.WithTimeout(s.sctx, lookupTimeout)
				_, cerr := st.Consumer(ctx, s.o.Durable)
				cancel()
				if errors.Is(cerr, jetstream.ErrConsumerNotFound) {
					s.die(fmt.Errorf("natsbridge: InStream: durable consumer %q on stream %q: %w", s.o.Durable, s.stream, cerr))
					return false
				}
			}
			if !stopped {
				return true // the consumer recovers on its own
			}
			s.die(fmt.Errorf("natsbridge: InStream: consumer on stream %q stopped for good: %w", s.stream, why))
			return false
		}
		if !s.pause(&backoff) {
			return false
		}
	}
}

func (s *inStream[T]) pause(backoff *time.Duration) bool {
	t := time.NewTimer(*backoff)
	defer t.Stop()
	*backoff = min(2**backoff, retryMax)
	select {
	case <-t.C:
		return true
	case <-s.stop:
		return false
	}
}

// recreated gives the current consumer up, waits for the stream to exist
// again (st, if already found) and reads it from its first message.
func (s *inStream[T]) recreated(st jetstream.Stream) bool {
	s.gen.Add(1) // ignore the old consumer from now on
	s.mu.Lock()
	old := s.cc
	s.mu.Unlock()
	old.Stop()
	s.l.warn.logger().Warn("natsbridge: the stream was deleted; waiting for it to be created again", "link", s.l.kind, "subject", s.subject, "stream", s.stream)
	backoff := retryMin
	for {
		if st == nil {
			ctx, cancel := context.WithTimeout(s.sctx, lookupTimeout)
			found, err := s.js.Stream(ctx, s.stream)
			cancel()
			if err == nil {
				st = found
			} else if s.js.Conn().IsClosed() {
				s.die(fmt.Errorf("natsbridge: InStream: %w", nats.ErrConnectionClosed))
				return false
			}
		}
		if st != nil {
			s.mu.Lock()
			s.created = st.CachedInfo().Created
			s.mu.Unlock()
			if err := s.start(0, true); err == nil {
				s.l.warn.logger().Info("natsbridge: the stream exists again; reading it from its first message", "link", s.l.kind, "subject", s.subject, "stream", s.stream)
				return true
			} else if s.sctx.Err() == nil {
				s.l.warn.logger().Warn("natsbridge: reading the stream created again failed; retrying", "link", s.l.kind, "subject", s.subject, "stream", s.stream, "error", err.Error())
			}
			st = nil
		}
		if !s.pause(&backoff) {
			return false
		}
	}
}

func (s *inStream[T]) die(err error) {
	s.l.die(err)
	s.mu.Lock()
	cc := s.cc
	s.mu.Unlock()
	cc.Stop()
}

func (s *inStream[T]) shut(cctx context.Context) error {
	close(s.stop)
	s.scancel()
	select {
	case <-s.exited:
	case <-cctx.Done():
		// The supervisor's calls end with sctx; it exits at once.
		<-s.exited
	}
	s.mu.Lock()
	cc := s.cc
	closed := s.closed
	s.mu.Unlock()
	cc.Drain()
	select {
	case <-closed:
		s.cancel()
		if s.o.Durable != "" {
			// Have the acks reach the server, as far as ctx allows.
			if nc := s.js.Conn(); nc.IsConnected() {
				if err := nc.FlushWithContext(cctx); err != nil && cctx.Err() != nil {
					return cctx.Err()
				}
			}
		}
		return nil
	case <-cctx.Done():
	}
	// Out of time: the consumer stops at once. A value being published
	// on b gives up (counted Failed); what the client still holds was not
	// taken and stays in the stream (a later InStream from LastSeq()+1, or
	// the durable consumer, gets it). stopGrace bounds the wait for the
	// consumer's goroutine to exit.
	s.cancel()
	cc.Stop()
	t := time.NewTimer(stopGrace)
	defer t.Stop()
	select {
	case <-closed:
	case <-t.C:
	}
	return cctx.Err()
}
