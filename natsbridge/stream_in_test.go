package natsbridge_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// sendStream publishes values from..to (origin o) through a fresh
// OutStream on js, closing it once they are acknowledged.
func sendStream(t testing.TB, js jetstream.JetStream, stream, subject, o string, from, to int, opts natsbridge.Options[val]) *natsbridge.Link {
	t.Helper()
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	opts.Watch = append(opts.Watch, broadcast.WithPolicy(broadcast.Block))
	out, err := natsbridge.OutStreamWith(outbox, js, stream, subject, codec, opts)
	if err != nil {
		t.Fatal(err)
	}
	for k := from; k <= to; k++ {
		if err := outbox.Publish(val{Origin: o, N: k}); err != nil {
			t.Fatal(err)
		}
	}
	closeLink(t, out)
	return out
}

func checkNs(t testing.TB, got []val, from int) {
	t.Helper()
	for i, v := range got {
		if v.N != from+i {
			t.Fatalf("value %d is %+v, want N %d", i, v, from+i)
		}
	}
}

// Guarantee 23: InStream's stream deleted: the link logs it at Warn and,
// once the stream is created again, delivers the new stream's messages
// from its first, without anything done by the user. Both consumers.
func TestInStreamStreamDeleted(t *testing.T) {
	for _, durable := range []string{"", "d"} {
		t.Run("durable="+durable, func(t *testing.T) {
			srv := startServer(t, natstest.Config{})
			js := newJS(t, connect(t, srv.URL()))
			makeStream(t, js, "S", "s.>")
			lg, logs := linkLogger()
			inbox := broadcast.New[val]()
			defer shutdown(t, inbox)
			w, _ := inbox.Watch(broadcast.WithQueueLength(1000))
			in, err := natsbridge.InStreamWith(js, "S", "s.v", 1, codec, inbox, natsbridge.Options[val]{Logger: lg, Durable: durable})
			if err != nil {
				t.Fatal(err)
			}
			sendStream(t, js, "S", "s.v", "a", 1, 3, natsbridge.Options[val]{})
			checkNs(t, receive(t, w, 3), 1)
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			if err := js.DeleteStream(ctx, "S"); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the deletion logged", func() bool { return logged(logs, "level=WARN", "stream was deleted") })
			makeStream(t, js, "S", "s.>")
			sendStream(t, js, "S", "s.v", "b", 1, 5, natsbridge.Options[val]{})
			got := receive(t, w, 5)
			checkNs(t, got, 1)
			if got[0].Origin != "b" {
				t.Errorf("after the stream came back: %+v", got)
			}
			eventually(t, "LastSeq in the new stream", func() bool { return in.LastSeq() == 5 })
			select {
			case <-in.Done():
				t.Fatalf("InStream stopped: %v", in.Err())
			default:
			}
			closeLink(t, in)
			if s := in.Stats(); s.Received != 8 || s.Failed != 0 {
				t.Errorf("stats %+v, want Received 8", s)
			}
		})
	}
}

// Guarantee 23: a durable consumer deleted while its stream lives is a
// consumer failed for good: the link logs at Error, Err says why, Done
// is closed.
func TestInStreamConsumerDeleted(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	makeStream(t, js, "S", "s.>")
	lg, logs := linkLogger()
	inbox := broadcast.New[val]()
	defer shutdown(t, inbox)
	in, err := natsbridge.InStreamWith(js, "S", "s.v", 0, codec, inbox, natsbridge.Options[val]{Logger: lg, Durable: "d"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := js.DeleteConsumer(ctx, "S", "d"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-in.Done():
	case <-time.After(guard):
		t.Fatalf("Done not closed after the consumer was deleted; logs %q", logs.lines())
	}
	if in.Err() == nil || !logged(logs, "level=ERROR", "stopped for good") {
		t.Errorf("Err = %v; logs %q", in.Err(), logs.lines())
	}
	closeLink(t, in)
}

// Guarantee 23: Close returns within ctx during an outage (the server
// stopped), for InStream with either consumer and for OutStream holding
// values.
func TestStreamCloseDuringOutage(t *testing.T) {
	for _, durable := range []string{"", "d"} {
		t.Run("durable="+durable, func(t *testing.T) {
			captureLogs(t)
			srv := startServer(t, natstest.Config{})
			nc := connect(t, srv.URL())
			js := newJS(t, nc)
			makeStream(t, js, "S", "s.>")
			inbox, outbox := broadcast.New[val](), broadcast.New[val]()
			defer shutdown(t, inbox)
			defer shutdown(t, outbox)
			in, err := natsbridge.InStreamWith(js, "S", "s.v", 0, codec, inbox, natsbridge.Options[val]{Durable: durable})
			if err != nil {
				t.Fatal(err)
			}
			out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)}})
			if err != nil {
				t.Fatal(err)
			}
			srv.Stop()
			eventually(t, "disconnect", func() bool { return !nc.IsConnected() })
			publishN(t, outbox, 1, 10)
			time.Sleep(200 * time.Millisecond) // the links notice the outage (not an assertion)
			for _, l := range []*natsbridge.Link{out, in} {
				ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				start := time.Now()
				err := l.Close(ctx)
				took := time.Since(start)
				cancel()
				t.Logf("%s: Close took %v with a ctx of 300ms", l.Subject(), took)
				// Bound: ctx plus InStream's stopGrace (100 ms) and
				// scheduling slack (guarantee 23: within ctx, in an outage too).
				if took > 300*time.Millisecond+500*time.Millisecond {
					t.Errorf("%s Close took %v", l.Subject(), took)
				}
				if err != nil && !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("Close: %v", err)
				}
				select {
				case <-l.Done():
				default:
					t.Error("Done open after Close")
				}
			}
			if s := out.Stats(); s.Failed != 10 || s.Pending != 0 {
				t.Errorf("OutStream stats %+v, want Failed 10", s)
			}
		})
	}
}

// Guarantee 24: with Options.MsgID from the value, a publisher restarted
// (a second OutStream, a new origin) that publishes the same values again
// has them stored once.
func TestStreamMsgIDDedup(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	makeStream(t, js, "S", "s.>")
	id := natsbridge.Options[val]{MsgID: func(v val) string { return v.Origin + "/" + strconv.Itoa(v.N) }}
	first := sendStream(t, js, "S", "s.v", "a", 1, 10, id)
	second := sendStream(t, js, "S", "s.v", "a", 1, 15, id) // the restarted process: 1..10 again, then 11..15
	if first.Stats().Sent != 10 || second.Stats().Sent != 15 {
		t.Errorf("Sent %d and %d, want 10 and 15 (a duplicate is acknowledged too)", first.Stats().Sent, second.Stats().Sent)
	}
	st, err := js.Stream(context.Background(), "S")
	if err != nil {
		t.Fatal(err)
	}
	got := storedNs(t, st)
	if len(got) != 15 {
		t.Fatalf("stream holds %v, want 1..15 once", got)
	}
	for i, k := range got {
		if k != i+1 {
			t.Fatalf("stream holds %v, want 1..15 once", got)
		}
	}
	// Without MsgID, each link's own IDs: the values are stored twice.
	sendStream(t, js, "S", "s.w", "a", 1, 3, natsbridge.Options[val]{})
	sendStream(t, js, "S", "s.w", "a", 1, 3, natsbridge.Options[val]{})
	if n := streamMsgs(t, js, "S"); n != 21 {
		t.Errorf("stream holds %d, want 21 (default IDs differ per link)", n)
	}
}

// Options.Durable: an InStream started again with the same durable name
// gets only what was stored after the last value it acknowledged,
// whatever from says; the consumer has the link's AckWait and Window.
func TestInStreamDurableResume(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	makeStream(t, js, "S", "s.>")
	opts := natsbridge.Options[val]{Durable: "resume", AckWait: 7 * time.Second, Window: 33}
	sendStream(t, js, "S", "s.v", "a", 1, 5, natsbridge.Options[val]{})
	for round, want := range [][2]int{{1, 5}, {6, 9}} {
		inbox := broadcast.New[val]()
		w, _ := inbox.Watch()
		in, err := natsbridge.InStreamWith(js, "S", "s.v", 1, codec, inbox, opts)
		if err != nil {
			t.Fatal(err)
		}
		if round == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			cons, err := js.Consumer(ctx, "S", "resume")
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			cfg := cons.CachedInfo().Config
			if cfg.AckWait != 7*time.Second || cfg.MaxAckPending != 33 || cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.Durable != "resume" {
				t.Errorf("consumer config: AckWait %v MaxAckPending %d AckPolicy %v Durable %q", cfg.AckWait, cfg.MaxAckPending, cfg.AckPolicy, cfg.Durable)
			}
		}
		checkNs(t, receive(t, w, want[1]-want[0]+1), want[0])
		closeLink(t, in)
		if s := in.Stats(); s.Received != uint64(want[1]-want[0]+1) {
			t.Errorf("round %d: stats %+v", round, s)
		}
		w.Stop()
		shutdown(t, inbox)
		sendStream(t, js, "S", "s.v", "a", 6, 9, natsbridge.Options[val]{})
		if round == 1 {
			break
		}
	}
	// The server's view: everything acknowledged.
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	cons, err := js.Consumer(ctx, "S", "resume")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.AckFloor.Stream != 9 || info.NumAckPending != 0 {
		t.Errorf("ack floor %d, %d pending; want 9, 0", info.AckFloor.Stream, info.NumAckPending)
	}
}

// Options.Window bounds OutStream's values in flight (Pending).
func TestOutStreamWindow(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	makeStream(t, js, "S", "s.>")
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{
		Window: 4, Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	peak := make(chan uint64)
	go func() {
		var top uint64
		for {
			select {
			case <-stop:
				peak <- top
				return
			default:
				top = max(top, out.Stats().Pending)
			}
		}
	}()
	publishN(t, outbox, 1, 2000)
	closeLink(t, out)
	close(stop)
	if p := <-peak; p > 4 || p < 2 {
		t.Errorf("peak Pending %d, want 2..4 (the window)", p)
	}
	if s := out.Stats(); s.Sent != 2000 {
		t.Errorf("stats %+v", s)
	}
}

// Options.AckWait: an ack wait far below the round trip makes OutStream
// publish again (reported), and the stream still stores each value once,
// in order.
func TestOutStreamAckWait(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	makeStream(t, js, "S", "s.>")
	lg, logs := linkLogger()
	out := sendStream(t, js, "S", "s.v", "a", 1, 300, natsbridge.Options[val]{AckWait: 20 * time.Microsecond, Logger: lg})
	if s := out.Stats(); s.Sent != 300 || s.Failed != 0 {
		t.Errorf("stats %+v", s)
	}
	if !logged(logs, "timeout waiting for ack") {
		t.Errorf("no republish after the short AckWait: %q", logs.lines())
	}
	st, _ := js.Stream(context.Background(), "S")
	got := storedNs(t, st)
	for i, k := range got {
		if k != i+1 {
			t.Fatalf("stream sequence %d holds %d", i+1, k)
		}
	}
	if len(got) != 300 {
		t.Errorf("stream holds %d, want 300", len(got))
	}
}

// Guarantee 22 for streams: by default InStream refuses messages without
// the bridge's headers (Failed, Warn); AcceptForeign lets them in. The
// Headers and FromHeaders hooks carry a header with the value.
func TestInStreamForeign(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	makeStream(t, js, "S", "s.>")
	raw, _ := codec.Marshal(val{Origin: "foreign", N: 1})
	if _, err := js.Publish(context.Background(), "s.v", raw); err != nil {
		t.Fatal(err)
	}
	hooks := natsbridge.Options[val]{Headers: func(v val, h nats.Header) { h.Set("Trace", fmt.Sprint("t", v.N)) }}
	sendStream(t, js, "S", "s.v", "a", 1, 2, hooks)
	for _, accept := range []bool{false, true} {
		lg, logs := linkLogger()
		inbox := broadcast.New[val]()
		w, _ := inbox.Watch()
		in, err := natsbridge.InStreamWith(js, "S", "s.v", 1, codec, inbox, natsbridge.Options[val]{
			Logger: lg, AcceptForeign: accept,
			FromHeaders: func(h nats.Header, v val) val { v.Pad = h.Get("Trace"); return v },
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []val{{Origin: "a", N: 1, Pad: "t1"}, {Origin: "a", N: 2, Pad: "t2"}}
		if accept {
			want = append([]val{{Origin: "foreign", N: 1}}, want...)
		}
		got := receive(t, w, len(want))
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("accept=%v: got %+v, want %+v", accept, got, want)
				break
			}
		}
		eventually(t, "all handled", func() bool { return in.LastSeq() == 3 })
		closeLink(t, in)
		s := in.Stats()
		if accept && (s.Received != 3 || s.Failed != 0) || !accept && (s.Received != 2 || s.Failed != 1) {
			t.Errorf("accept=%v: stats %+v", accept, s)
		}
		if !accept && !logged(logs, "level=WARN", "without the bridge's headers") {
			t.Errorf("the refusal not logged: %q", logs.lines())
		}
		w.Stop()
		shutdown(t, inbox)
	}
}

// Guarantee 23: the connection closed for good: OutStream (idle) and
// InStream stop, Err wraps nats.ErrConnectionClosed, Done is closed.
func TestStreamConnClosed(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	js := newJS(t, nc)
	makeStream(t, js, "S", "s.>")
	lg, logs := linkLogger()
	inbox, outbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, inbox)
	defer shutdown(t, outbox)
	in, err := natsbridge.InStreamWith(js, "S", "s.v", 0, codec, inbox, natsbridge.Options[val]{Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	for _, l := range []*natsbridge.Link{out, in} {
		select {
		case <-l.Done():
		case <-time.After(guard):
			t.Fatalf("%v: Done not closed after the connection closed", l)
		}
		if !errors.Is(l.Err(), nats.ErrConnectionClosed) {
			t.Errorf("Err = %v, want ErrConnectionClosed", l.Err())
		}
		closeLink(t, l)
	}
	if !logged(logs, "level=ERROR", "link=OutStream") || !logged(logs, "level=ERROR", "link=InStream") {
		t.Errorf("logs %q", logs.lines())
	}
}
