package natsbridge

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
)

const (
	// subscribeTimeout bounds how long In waits for the server to confirm
	// its subscription.
	subscribeTimeout = 10 * time.Second

	// heartbeatInterval is how often an Out that has taken at least one
	// value sends a heartbeat (header HeaderBeat with the origin and its
	// last sequence number, no data), so that an In learns of values lost on the
	// way even when no value follows them: it counts them within a second
	// plus the heartbeat's way to it (documented as 2 s; see In).
	heartbeatInterval = time.Second

	// flushAttempt bounds one PING/PONG round trip of an Out's flusher; an
	// attempt not answered in time (the connection is down) is made again.
	flushAttempt = time.Second
	// flushRetry is the pause after a failed flush attempt.
	flushRetry = 10 * time.Millisecond
	// flushLinger is the least time between the end of a flush and the
	// next: one PING confirms every value handed to nats.go before it, so
	// the flusher batches rather than sending a PING per value, at most
	// one PING a millisecond.
	flushLinger = time.Millisecond

	// originTick is how often an In's clock of connected time advances;
	// an origin is forgotten after originIdleTicks ticks without a
	// message, that is after 60 to 65 s of connected time.
	originTick      = 5 * time.Second
	originIdleTicks = 13
)

// errForeign is why In refuses a message without the bridge's headers.
var errForeign = errors.New("natsbridge: no Herald-Seq header: not sent by an Out (Options.AcceptForeign lets such messages in)")

// Out sends every value published on b, in order, to subject. It is a watcher
// of b with the given options (policy, queue length). It is [OutWith] with
// Options{Watch: opts}.
func Out[T any](b *broadcast.Broadcaster[T], nc *nats.Conn, subject string, c Codec[T], opts ...broadcast.Option) (*Link, error) {
	return outWith("Out", b, nc, subject, c, Options[T]{Watch: opts})
}

// OutWith sends every value published on b, in order, to subject, as a
// watcher of b with o.Watch as its options (policy, queue length). It reads
// o.Logger, o.Watch and o.Headers.
//
// The values go out through nc as core NATS messages, encoded by c, from one
// goroutine, so they leave in b's order. Every value the link takes from
// its watcher gets the next sequence number of the link's origin (a random
// ID per link): 1, 2, 3, ..., a value that cannot be encoded or published
// included. Each message carries the origin and the number in the
// [HeaderSeq] header, plus what o.Headers adds. Once the link has taken a
// value it sends a heartbeat every second (header [HeaderBeat] with the
// origin and the last number used, no data), and one more at Close, so
// that every [In] on the subject counts the values that never reached it
// in its Lost, the last ones before a quiet period included (within 2 s;
// see [InWith]).
//
// What is counted: a value nats.go accepted is Pending until a PING the
// link sends after it is answered by the server (a flusher goroutine
// confirms values in batches, about one round trip after they were handed
// over; after a reconnect the new server answers, so a value written to
// the broken connection just before it broke counts as Sent although the
// server may not have read it: the Ins count it in Lost). Then it is Sent.
// A value that cannot be encoded, that is over the server's max_payload,
// or that nats.go refuses (its reconnect buffer, nats.ReconnectBufSize, 8
// MiB by default, is full while disconnected, or disabled with -1) is
// counted in Failed. Every value the link took is in exactly one of Sent,
// Failed and Pending, and Pending is 0 once Close has returned. Close
// waits, within its ctx, for the server to confirm what is Pending; what is
// still unconfirmed when ctx ends (a value in the reconnect buffer during
// an outage, say) is counted Failed and Close returns ctx.Err(). nats.go
// may still send such a value after reconnecting: the link cannot take it
// back, and the Ins then count it as received.
//
// When nc closes for good (nc.Close, or the reconnect attempts are used
// up), the link stops within a second: what is Pending and what
// its watcher still held are counted in Failed and logged at Warn, it logs
// its end at Error, [Link.Err] returns an error wrapping
// nats.ErrConnectionClosed, [Link.Done] is closed, and the watcher is
// stopped, so no publisher of b waits for it under [broadcast.Block].
//
// The watcher's policy decides what happens when NATS is slower than b's
// publishers: [broadcast.Block] makes them wait (nothing lost within the
// process), [broadcast.Drop] (the default) and [broadcast.DropOldest] lose
// values, counted in the link's Dropped; such values never get a sequence
// number. OutWith returns an error wrapping [ErrLoop] if an incoming link
// joins b to an overlapping subject, [broadcast.ErrClosed] if b is shut
// down, an error wrapping nats.ErrBadSubject for a subject that is empty or
// has wildcards, and nats.ErrConnectionClosed if nc is closed. A nil b, nc
// or c panics.
func OutWith[T any](b *broadcast.Broadcaster[T], nc *nats.Conn, subject string, c Codec[T], o Options[T]) (*Link, error) {
	return outWith("OutWith", b, nc, subject, c, o)
}

func outWith[T any](fn string, b *broadcast.Broadcaster[T], nc *nats.Conn, subject string, c Codec[T], o Options[T]) (*Link, error) {
	mustArgs(fn, b == nil, nc == nil, c == nil)
	if !validSubject(subject, true) {
		return nil, fmt.Errorf("natsbridge: %s: %w: %q (a subject to publish to has no wildcards)", fn, nats.ErrBadSubject, subject)
	}
	if nc.IsClosed() {
		return nil, fmt.Errorf("natsbridge: %s: %w", fn, nats.ErrConnectionClosed)
	}
	release, err := register(b, subject, dirOut)
	if err != nil {
		return nil, err
	}
	w, base, err := watchExact(b, o.Watch)
	if err != nil {
		release()
		return nil, fmt.Errorf("natsbridge: %s: %w", fn, err)
	}
	l := newLink("Out", subject)
	l.warn.lg = o.Logger
	l.release = release
	l.dropped = w.Dropped
	stopCtx, cancelStop := context.WithCancel(context.Background())
	out := &coreOut[T]{
		l:           l,
		f:           &outFeed[T]{w: w, b: b, base: base},
		nc:          nc,
		subject:     subject,
		c:           c,
		hook:        o.Headers,
		origin:      newOrigin(),
		seqVal:      make([]string, 1),
		kick:        make(chan struct{}, 1),
		stop:        make(chan struct{}),
		stopCtx:     stopCtx,
		cancelStop:  cancelStop,
		loopExited:  make(chan struct{}),
		flushExited: make(chan struct{}),
	}
	out.msg = nats.Msg{Subject: subject, Header: nats.Header{HeaderSeq: out.seqVal}}
	l.pending = out.pendingCount
	l.shut = out.shut
	go func() {
		defer close(out.loopExited)
		out.f.run(out.send)
	}()
	go out.flusher()
	return l, nil
}

// coreOut is an Out link's state. Two goroutines: the loop (f.run, which
// calls send for every value) and the flusher (confirmations, heartbeats,
// the link's death); shut, Close's part, takes over the flusher's fields
// once the flusher has exited.
type coreOut[T any] struct {
	l       *Link
	f       *outFeed[T]
	nc      *nats.Conn
	subject string
	c       Codec[T]
	hook    func(T, nats.Header)
	origin  string

	// The loop's own.
	seq    uint64   // the last sequence number given
	msg    nats.Msg // reused for every value when hook is nil
	seqVal []string // msg's HeaderSeq value

	// announced is the last sequence number whose message nats.go accepted
	// or that failed: what a heartbeat says. Stored after the message was
	// handed over, so a heartbeat never overtakes the value it announces
	// (nats.go keeps one connection's messages in the order of the calls).
	announced atomic.Uint64

	// handed counts the values nats.go accepted; l.sent those of them a
	// PONG confirmed, given those given up (counted Failed) when the link
	// died or Close's ctx ended. l.sent and given are written by the
	// flusher, then by shut once the flusher has exited. Pending is
	// handed - sent - given.
	handed atomic.Uint64
	given  atomic.Uint64

	idle atomic.Bool   // the flusher waits for kick
	kick chan struct{} // wakes the flusher: a value was handed over, or the link died

	stop        chan struct{} // closed by shut: the flusher exits
	stopCtx     context.Context
	cancelStop  context.CancelFunc // cancels a flush in progress
	loopExited  chan struct{}
	flushExited chan struct{}
	dead        atomic.Bool // the connection closed for good and the link died
}

// pendingCount is Stats' Pending: read sent and given before handed, so
// that the difference never wraps around.
func (o *coreOut[T]) pendingCount() uint64 {
	s, g := o.l.sent.Load(), o.given.Load()
	return o.handed.Load() - s - g
}

// send handles one value taken from the watcher; the loop's goroutine.
func (o *coreOut[T]) send(v T) {
	o.seq++
	n := o.seq
	data, err := o.c.Marshal(v)
	if err != nil {
		o.l.fail("a value could not be encoded", err)
		o.announced.Store(n)
		return
	}
	m := &o.msg
	if o.hook != nil {
		// A fresh header for every value: the hook may keep it.
		m = &nats.Msg{Subject: o.subject, Header: make(nats.Header, 4)}
		o.hook(v, m.Header)
		setOrigin(m.Header, o.origin, n)
	} else {
		o.seqVal[0] = originValue(o.origin, n)
	}
	m.Data = data
	err = o.nc.PublishMsg(m) // copies headers and data into nats.go's buffer
	m.Data = nil
	o.announced.Store(n)
	if err != nil {
		o.l.fail("a value could not be published", err)
		if errors.Is(err, nats.ErrConnectionClosed) {
			o.kill()
		}
		return
	}
	o.handed.Add(1)
	if o.idle.Load() && o.idle.CompareAndSwap(true, false) {
		o.wake()
	}
}

func (o *coreOut[T]) wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// kill makes the link die because its connection closed for good, unless
// Close began: the watcher stops at once (no publisher of b waits for the
// link), and the flusher counts what is left in Failed.
func (o *coreOut[T]) kill() {
	if !o.l.die(fmt.Errorf("natsbridge: Out: %w", nats.ErrConnectionClosed)) {
		return
	}
	o.f.startClose() // fixes what the watcher was to hand over, for left()
	o.f.w.Stop()
	o.dead.Store(true)
	o.wake()
}

// flusher confirms handed values with PING/PONG round trips, sends the
// heartbeats, notices that the connection closed for good, and settles
// the counts when the link dies.
func (o *coreOut[T]) flusher() {
	defer close(o.flushExited)
	beat := time.NewTicker(heartbeatInterval)
	defer beat.Stop()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var wait time.Duration // 0: until a value is handed over
	for {
		if wait == 0 {
			o.idle.Store(true)
			if o.unconfirmed() == 0 && !o.dead.Load() {
				select {
				case <-o.stop:
					return
				case <-o.kick:
				case <-beat.C:
					o.beat()
				}
			}
			o.idle.Store(false)
		} else {
			retry.Reset(wait)
			select {
			case <-o.stop:
				return
			case <-retry.C:
			case <-beat.C:
				o.beat()
			}
		}
		select {
		case <-o.stop:
			return
		default:
		}
		if o.dead.Load() {
			o.settleDead()
			return
		}
		wait = o.flushOnce()
	}
}

// unconfirmed is what the flusher still has to confirm.
func (o *coreOut[T]) unconfirmed() uint64 {
	return o.handed.Load() - o.l.sent.Load() - o.given.Load()
}

// flushOnce confirms what was handed over so far with one round trip, and
// returns how long to wait before the next attempt (0: until a value is
// handed over).
func (o *coreOut[T]) flushOnce() time.Duration {
	target := o.handed.Load()
	if target == o.l.sent.Load() {
		return 0
	}
	ctx, cancel := context.WithTimeout(o.stopCtx, flushAttempt)
	err := o.nc.FlushWithContext(ctx)
	cancel()
	if err == nil {
		o.l.sent.Add(target - o.l.sent.Load())
		return flushLinger // then the values handed over meanwhile, if any
	}
	if o.nc.IsClosed() {
		o.kill()
		if o.dead.Load() {
			return 0 // settle at once
		}
		return flushRetry // Close began: it settles, the flusher only waits to stop
	}
	// Disconnected (nats.go answers a pending flush with
	// ErrConnectionClosed when the connection breaks, and holds a new one
	// until it has reconnected) or slow: try again.
	return flushRetry
}

// beat sends a heartbeat with the last sequence number used, if any; it
// also notices a connection closed for good while the link is quiet.
func (o *coreOut[T]) beat() {
	if o.nc.IsClosed() {
		o.kill()
		return
	}
	o.sendBeat()
}

func (o *coreOut[T]) sendBeat() {
	n := o.announced.Load()
	if n == 0 {
		return
	}
	h := nats.Header{HeaderBeat: {originValue(o.origin, n)}}
	if err := o.nc.PublishMsg(&nats.Msg{Subject: o.subject, Header: h}); errors.Is(err, nats.ErrConnectionClosed) {
		o.kill()
	}
	// Other errors (the reconnect buffer is full) lose only this
	// heartbeat; the next one says the same or more.
}

// settleDead counts in Failed what the dead link did not send: what its
// watcher still held when it was stopped, and what nats.go had not
// confirmed. The flusher's goroutine.
func (o *coreOut[T]) settleDead() {
	<-o.loopExited // at once: the watcher is stopped and publishing fails
	left := o.f.left()
	p := o.giveUp()
	if n := left + p; n > 0 {
		o.l.failed.Add(left)
		o.l.warn.warn(n, fmt.Sprintf("%d values not sent: the connection closed for good (%d not confirmed by the server, %d not yet handed to it)", n, p, left), nats.ErrConnectionClosed)
	}
}

// giveUp counts in Failed every handed value not confirmed, and returns how
// many. Called by the flusher or, once it has exited, by shut.
func (o *coreOut[T]) giveUp() uint64 {
	n := o.handed.Load() - o.l.sent.Load() - o.given.Load()
	o.given.Add(n)
	o.l.failed.Add(n)
	return n
}

// shut is Close's part: everything published on b before Close is taken
// and handed to nats.go, a last heartbeat follows, and the server confirms
// it all, within ctx.
func (o *coreOut[T]) shut(ctx context.Context) error {
	if o.l.Err() != nil {
		// The link died before Close: the flusher counts what is left.
		<-o.flushExited
		return nil
	}
	o.f.startClose()
	var err error
	select {
	case <-o.loopExited:
	case <-ctx.Done():
		o.f.w.Stop()
		<-o.loopExited // the loop ends after the publish in progress, which does not wait
		if n := o.f.left(); n > 0 {
			o.l.failed.Add(n)
			o.l.warn.warn(n, fmt.Sprintf("%d values not sent: Close's context ended", n), ctx.Err())
		}
		err = ctx.Err()
	}
	close(o.stop)
	o.cancelStop()
	<-o.flushExited
	o.sendBeat()
	for err == nil {
		target := o.handed.Load()
		if target == o.l.sent.Load() {
			return nil
		}
		actx, cancel := context.WithTimeout(ctx, flushAttempt)
		ferr := o.nc.FlushWithContext(actx)
		cancel()
		switch {
		case ferr == nil:
			o.l.sent.Add(target - o.l.sent.Load())
			continue
		case o.nc.IsClosed():
			n := o.giveUp()
			o.l.warn.warn(n, fmt.Sprintf("%d values not confirmed by the server: the connection closed for good", n), nats.ErrConnectionClosed)
			return fmt.Errorf("natsbridge: Out: Close: %d values not confirmed: %w", n, nats.ErrConnectionClosed)
		case ctx.Err() != nil:
			err = ctx.Err()
		default:
			t := time.NewTimer(flushRetry)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				err = ctx.Err()
			}
		}
	}
	if n := o.giveUp(); n > 0 {
		o.l.warn.warn(n, fmt.Sprintf("%d values not confirmed by the server: Close's context ended (nats.go may still send them after reconnecting)", n), err)
	}
	return err
}

// In publishes on b every value that arrives on subject, this process's own
// included. It returns once the subscription is live at the server. It is
// [InWith] with the zero Options.
func In[T any](nc *nats.Conn, subject string, c Codec[T], b *broadcast.Broadcaster[T]) (*Link, error) {
	return inWith("In", nc, subject, c, b, Options[T]{})
}

// InWith publishes on b every value that arrives on subject, this
// process's own included. It returns once the subscription is live at the
// server. It reads o.Logger, o.FromHeaders, o.AcceptForeign and
// o.QueueGroup.
//
// subject may have wildcards. Messages are decoded by c, passed through
// o.FromHeaders if set, and published on b one at a time, in the order the
// subscription receives them, so one Out's values arrive in its order.
//
// Loss detection: for every origin (every [Out] on the subject) the link
// keeps the last sequence number it saw. The first message of an origin
// it sees sets that origin's baseline: values numbered before it (sent
// before this In subscribed, or lost before its first message arrived)
// are not counted. From then on a gap (a value numbered beyond the next
// one, or a heartbeat numbered beyond the last value seen) adds the
// missing values to Lost and is logged at Warn. So, for values from the
// baseline on, every value an Out took is counted by every In in exactly
// one of Received (published on b), Failed (arrived, but could not be
// decoded or published on b) and Lost (never arrived: lost by the
// transport during a reconnect, refused by the Out's codec, or dropped as
// a slow consumer, which Dropped counts too). The bound: a lost value is
// counted when the next message or heartbeat of its origin reaches this
// In, and a running Out sends a heartbeat every second, so within 2 s of
// its sending while both connections are up (1 s, plus the heartbeat's
// way through the server and the messages queued before it in this In);
// a value lost while a connection was down, within 2 s of both being up
// again. An origin is forgotten after 60
// to 65 s of this In's connected time without a message from it (a
// running Out sends a heartbeat every second): if it is heard of again,
// its next message sets a new baseline. With o.QueueGroup set the link
// joins that queue group (nc.QueueSubscribe): each message goes to one
// member, so a member sees only part of each origin's numbers, and loss
// detection is off (Lost stays 0; heartbeats are ignored).
//
// A message without the bridge's headers (not sent by an Out) is refused,
// counted in Failed and logged at Warn, unless o.AcceptForeign is set:
// then it is decoded by c and published like the others, outside loss
// detection. A message c cannot decode is counted in Failed and skipped.
//
// Publishing on b waits while a [broadcast.Block] watcher of b is full;
// meanwhile nats.go queues the incoming messages up to the subscription's
// pending limits (500 000 messages or 64 MiB by default; see
// [Link.SetPendingLimits]) and drops what is over them, as a slow
// consumer: those are counted in the link's Dropped. When nc closes for
// good the link stops: it logs it at Error, [Link.Err] returns an error
// wrapping nats.ErrConnectionClosed and [Link.Done] is closed. InWith
// returns an error wrapping [ErrLoop] if an outgoing link joins b to an
// overlapping subject, an error wrapping nats.ErrBadSubject for a
// malformed subject, and the connection's error if the subscription
// cannot be confirmed within 10 s. A nil b, nc or c panics.
func InWith[T any](nc *nats.Conn, subject string, c Codec[T], b *broadcast.Broadcaster[T], o Options[T]) (*Link, error) {
	return inWith("InWith", nc, subject, c, b, o)
}

func inWith[T any](fn string, nc *nats.Conn, subject string, c Codec[T], b *broadcast.Broadcaster[T], o Options[T]) (*Link, error) {
	mustArgs(fn, b == nil, nc == nil, c == nil)
	if !validSubject(subject, false) {
		return nil, fmt.Errorf("natsbridge: %s: %w: %q", fn, nats.ErrBadSubject, subject)
	}
	release, err := register(b, subject, dirIn)
	if err != nil {
		return nil, err
	}
	l := newLink("In", subject)
	l.warn.lg = o.Logger
	l.release = release
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan struct{})
	in := &coreIn[T]{
		l:       l,
		c:       c,
		b:       b,
		from:    o.FromHeaders,
		foreign: o.AcceptForeign,
		track:   o.QueueGroup == "",
		origins: map[string]*originState{},
	}
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
			l.warn.warn(uint64(d)-old, fmt.Sprintf("%d messages dropped by the NATS client as a slow consumer (the broadcaster's publish waited)", uint64(d)-old), nats.ErrSlowConsumer)
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
		in.handle(ctx, m)
	}
	var s *nats.Subscription
	if o.QueueGroup != "" {
		s, err = nc.QueueSubscribe(subject, o.QueueGroup, handler)
	} else {
		s, err = nc.Subscribe(subject, handler)
	}
	if err != nil {
		cancel()
		release()
		return nil, fmt.Errorf("natsbridge: %s: %w", fn, err)
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
	clockExited := make(chan struct{})
	go in.clock(ctx, nc, exited, clockExited)
	if err := nc.FlushTimeout(subscribeTimeout); err != nil {
		cancel()
		_ = s.Unsubscribe()
		waitExited(exited)
		<-clockExited
		release()
		return nil, fmt.Errorf("natsbridge: %s: subscription not confirmed by the server: %w", fn, err)
	}
	l.setLimits = s.SetPendingLimits
	l.dropped = func() uint64 {
		checkDropped(s)
		return dropped.Load()
	}
	l.shut = func(cctx context.Context) error {
		defer func() { <-clockExited }()
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
		// While the connection is down the drain cannot finish (nats.go
		// waits for the server's answer): do not wait for it.
		if !nc.IsConnected() || !waitExited(exited) {
			// The drain itself is stuck: drop what is pending, counted.
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

// coreIn is an In link's message handling. Its fields after the first
// five are the subscription handler's own (nats.go calls it from one
// goroutine), except epoch.
type coreIn[T any] struct {
	l       *Link
	c       Codec[T]
	b       *broadcast.Broadcaster[T]
	from    func(nats.Header, T) T
	foreign bool // AcceptForeign
	track   bool // loss detection on (not a queue member)

	origins map[string]*originState
	curID   string       // the origin of the previous message, the usual next one
	cur     *originState // its state
	swept   uint64       // epoch of the last sweep of origins

	// epoch counts originTick periods of connected time; written by the
	// clock goroutine.
	epoch atomic.Uint64
}

// originState is what an In knows of one origin.
type originState struct {
	last  uint64 // the highest sequence number seen
	epoch uint64 // coreIn.epoch at its last message
}

// clock advances in.epoch every originTick while nc is connected, until the
// subscription has closed (exited) or Close canceled ctx.
func (in *coreIn[T]) clock(ctx context.Context, nc *nats.Conn, exited <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(originTick)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			if nc.IsConnected() {
				in.epoch.Add(1)
			}
		case <-exited:
			return
		case <-ctx.Done():
			return
		}
	}
}

// handle is In's work for one message; ctx is canceled by Close.
func (in *coreIn[T]) handle(ctx context.Context, m *nats.Msg) {
	h := m.Header
	id, seq, beat, ok := origin(h)
	switch {
	case !ok:
		if !in.foreign {
			in.l.fail("a message without the bridge's headers was refused", errForeign)
			return
		}
	case beat:
		if in.track {
			in.see(id, seq, true)
		}
		return
	case in.track:
		in.see(id, seq, false)
	}
	v, err := in.c.Unmarshal(m.Data)
	if err != nil {
		in.l.fail("a message could not be decoded", err)
		return
	}
	if in.from != nil {
		v = in.from(h, v)
	}
	if err := in.b.PublishContext(ctx, v); err != nil {
		if ctx.Err() != nil {
			in.l.fail("a received message was not published: Close's context ended", err)
		} else {
			in.l.fail("a message could not be published on the broadcaster", err)
		}
		return
	}
	in.l.received.Add(1)
}

// see records message seq of origin id (a heartbeat if beat) and counts a
// gap in Lost.
func (in *coreIn[T]) see(id string, seq uint64, beat bool) {
	e := in.epoch.Load()
	if e != in.swept {
		in.sweep(e)
	}
	st := in.cur
	if st == nil || id != in.curID {
		st = in.origins[id]
		if st == nil { // the baseline: nothing before it is counted
			id = strings.Clone(id) // not the message's header block
			st = &originState{last: seq, epoch: e}
			in.origins[id] = st
			in.cur, in.curID = st, id
			return
		}
		in.cur, in.curID = st, id
	}
	st.epoch = e
	next := st.last + 1
	if beat {
		next = st.last
	}
	if seq > next {
		gap := seq - next
		in.l.lost.Add(gap)
		in.l.warn.warn(gap, fmt.Sprintf("%d values of origin %s never arrived (sequence numbers %d to %d)", gap, id, st.last+1, st.last+gap), nil)
	}
	if seq > st.last {
		st.last = seq
	}
}

// sweep forgets the origins not heard of for originIdleTicks ticks.
func (in *coreIn[T]) sweep(e uint64) {
	in.swept = e
	for id, st := range in.origins {
		if e-st.epoch >= originIdleTicks {
			delete(in.origins, id)
			if st == in.cur {
				in.cur, in.curID = nil, ""
			}
		}
	}
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
