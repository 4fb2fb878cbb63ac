package natsbridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// bridge is one process's half of the outbox/inbox pattern, built from the
// four primitives.
type bridge struct {
	name          string
	outbox, inbox *broadcast.Broadcaster[val]
	out, in       *natsbridge.Link
	w             *broadcast.Watcher[val]
}

func newBridge(t *testing.T, nc *nats.Conn, name, subject string) *bridge {
	t.Helper()
	br := &bridge{name: name, outbox: broadcast.New[val](), inbox: broadcast.New[val]()}
	var err error
	if br.out, err = natsbridge.Out(br.outbox, nc, subject, codec, broadcast.WithPolicy(broadcast.Block)); err != nil {
		t.Fatal(err)
	}
	if br.in, err = natsbridge.In(nc, subject, codec, br.inbox); err != nil {
		t.Fatal(err)
	}
	if br.w, err = br.inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(10_000)); err != nil {
		t.Fatal(err)
	}
	return br
}

func (br *bridge) close(t *testing.T) {
	t.Helper()
	closeLink(t, br.out)
	closeLink(t, br.in)
	shutdown(t, br.outbox)
	shutdown(t, br.inbox)
}

// Guarantee 15: every process's inbox receives every origin's values, its
// own included, each origin's in order; with two and with three bridges,
// each on its own connection, in one process.
func TestBridgesInOneProcess(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("bridges=%d", n), func(t *testing.T) {
			srv := startServer(t, natstest.Config{})
			const perOrigin = 500
			var bridges []*bridge
			want := map[string]int{}
			for i := range n {
				name := fmt.Sprintf("p%d", i)
				bridges = append(bridges, newBridge(t, connect(t, srv.URL()), name, "herald.test"))
				want[name] = perOrigin
			}
			var wg sync.WaitGroup
			for _, br := range bridges {
				wg.Go(func() {
					for k := 1; k <= perOrigin; k++ {
						if err := br.outbox.Publish(val{Origin: br.name, N: k}); err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			for _, br := range bridges {
				got := receive(t, br.w, n*perOrigin)
				if err := checkPerOrigin(got, want); err != nil {
					t.Errorf("%s: %v", br.name, err)
				}
			}
			for _, br := range bridges {
				br.close(t)
				if s := br.out.Stats(); s.Sent != perOrigin || s.Failed != 0 || s.Dropped != 0 {
					t.Errorf("%s Out stats %+v, want Sent %d", br.name, s, perOrigin)
				}
				if s := br.in.Stats(); s.Received != uint64(n*perOrigin) || s.Failed != 0 || s.Dropped != 0 {
					t.Errorf("%s In stats %+v, want Received %d", br.name, s, n*perOrigin)
				}
			}
		})
	}
}

// Guarantee 15: an outgoing and an incoming link on one broadcaster and one
// (overlapping) subject: the second is refused with ErrLoop and registers
// nothing; Close frees the pair.
func TestErrLoop(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	b := broadcast.New[val]()
	defer shutdown(t, b)
	other := broadcast.New[val]()
	defer shutdown(t, other)

	out, err := natsbridge.Out(b, nc, "loop.a", codec)
	if err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"loop.a", "loop.*", "loop.>", ">"} {
		if _, err := natsbridge.In(nc, subj, codec, b); !errors.Is(err, natsbridge.ErrLoop) {
			t.Errorf("In(%q) on Out's broadcaster: err %v, want ErrLoop", subj, err)
		}
	}
	// Other subjects, and the same subject on another broadcaster, are fine.
	in1, err := natsbridge.In(nc, "loop.b", codec, b)
	if err != nil {
		t.Fatal(err)
	}
	in2, err := natsbridge.In(nc, "loop.a", codec, other)
	if err != nil {
		t.Fatal(err)
	}
	// The other order: Out refused where an In listens.
	if _, err := natsbridge.Out(b, nc, "loop.b", codec); !errors.Is(err, natsbridge.ErrLoop) {
		t.Errorf("Out onto an In's subject: err %v, want ErrLoop", err)
	}
	if _, err := natsbridge.Out(other, nc, "loop.a", codec); !errors.Is(err, natsbridge.ErrLoop) {
		t.Errorf("Out onto an In's subject (other): err %v, want ErrLoop", err)
	}
	// The refused links registered nothing: b still has one watcher (Out's).
	if got := b.Stats().Watchers; got != 1 {
		t.Errorf("b has %d watchers, want 1 (Out's)", got)
	}
	// The existing link still works: a value on b reaches "loop.a".
	w, _ := other.Watch()
	if err := b.Publish(val{Origin: "b", N: 1}); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, w, 1); got[0] != (val{Origin: "b", N: 1}) {
		t.Errorf("got %v", got)
	}
	w.Stop()
	// Close frees the pair.
	closeLink(t, out)
	in3, err := natsbridge.In(nc, "loop.a", codec, b)
	if err != nil {
		t.Fatalf("In after Out's Close: %v", err)
	}
	for _, l := range []*natsbridge.Link{in1, in2, in3} {
		closeLink(t, l)
	}
}

// Guarantee 16: a message that cannot be decoded is counted in Failed and
// reported at Warn; the link goes on with the next message.
func TestUndecodableMessage(t *testing.T) {
	logs := captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	inbox := broadcast.New[val]()
	defer shutdown(t, inbox)
	in, err := natsbridge.In(nc, "dec", codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch()
	for k, raw := range []string{"not json", `{"o":"x","n":1}`, `{"o":`, `{"o":"x","n":2}`} {
		publishBridged(t, nc, "dec", "x", uint64(k+1), []byte(raw))
	}
	got := receive(t, w, 2)
	if err := checkPerOrigin(got, map[string]int{"x": 2}); err != nil {
		t.Error(err)
	}
	closeLink(t, in)
	if s := in.Stats(); s.Received != 2 || s.Failed != 2 || s.Lost != 0 {
		t.Errorf("stats %+v, want Received 2, Failed 2, Lost 0", s)
	}
	// One line at once, the second failure within 10 s in the summary at Close.
	if lines := logs.lines(); len(lines) != 2 || !strings.Contains(lines[0], "could not be decoded") || !strings.Contains(lines[1], "values=1") {
		t.Errorf("log lines:\n%s", strings.Join(lines, "\n"))
	}
}

// failingCodec fails to encode values whose N is negative.
type failingCodec struct{ natsbridge.Codec[val] }

func (c failingCodec) Marshal(v val) ([]byte, error) {
	if v.N < 0 {
		return nil, errors.New("negative")
	}
	return c.Codec.Marshal(v)
}

// Guarantee 16: a value that cannot be encoded, and a value over the
// server's max_payload (1 MiB here), are counted in Failed; the link goes on.
func TestEncodeFailureAndOversized(t *testing.T) {
	captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	if mp := nc.MaxPayload(); mp != 1<<20 {
		t.Fatalf("server max_payload %d, want 1 MiB", mp)
	}
	outbox, inbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, outbox)
	defer shutdown(t, inbox)
	out, err := natsbridge.Out(outbox, nc, "big", failingCodec{codec}, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	in, err := natsbridge.In(nc, "big", codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch()
	big := strings.Repeat("x", 1<<20) // 1 MiB of padding: over max_payload once encoded
	for _, v := range []val{{Origin: "a", N: 1}, {Origin: "a", N: -1}, {Origin: "a", N: 2, Pad: big}, {Origin: "a", N: 2}} {
		if err := outbox.Publish(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkPerOrigin(receive(t, w, 2), map[string]int{"a": 2}); err != nil {
		t.Error(err)
	}
	closeLink(t, out)
	closeLink(t, in)
	if s := out.Stats(); s.Sent != 2 || s.Failed != 2 {
		t.Errorf("Out stats %+v, want Sent 2, Failed 2", s)
	}
}

// Auth on: links work on authenticated connections; a wrong password is
// refused by the server (the test would pass vacuously otherwise).
func TestAuth(t *testing.T) {
	srv := startServer(t, natstest.Config{User: "herald", Pass: "s3cret"})
	if _, err := nats.Connect(srv.URL(), nats.UserInfo("herald", "wrong"), nats.MaxReconnects(0)); err == nil {
		t.Fatal("connect with a wrong password succeeded")
	}
	nc := connect(t, srv.URL(), nats.UserInfo("herald", "s3cret"))
	br := newBridge(t, nc, "a", "auth.values")
	for k := 1; k <= 100; k++ {
		if err := br.outbox.Publish(val{Origin: "a", N: k}); err != nil {
			t.Fatal(err)
		}
	}
	if err := checkPerOrigin(receive(t, br.w, 100), map[string]int{"a": 100}); err != nil {
		t.Error(err)
	}
	br.close(t)
}

// A slow consumer on the NATS side: the inbox's Block watcher is full, so
// In's publish waits; the client queues messages up to the pending limits
// and drops the rest, counted in Dropped. Once the watcher reads again the
// link goes on.
func TestSlowConsumer(t *testing.T) {
	captureLogs(t)
	srv := startServer(t, natstest.Config{})
	pub := connect(t, srv.URL())
	nc := connect(t, srv.URL())
	inbox := broadcast.New[val]()
	defer shutdown(t, inbox)
	in, err := natsbridge.In(nc, "slow", codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.SetPendingLimits(20, -1); err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(10))
	const sent = 200
	for k := 1; k <= sent; k++ {
		data, _ := codec.Marshal(val{Origin: "a", N: k})
		publishBridged(t, pub, "slow", "a", uint64(k), data)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	// Everything the server sent is either queued (watcher 10, one publish
	// waiting, client pending at most 20) or dropped.
	eventually(t, "drops", func() bool { return in.Stats().Dropped >= sent-10-1-20 })
	// Read on: what was kept arrives in order, then new values flow.
	var got []val
	for len(got) < sent-int(in.Stats().Dropped) {
		got = append(got, receive(t, w, 1)...)
	}
	for i := 1; i < len(got); i++ {
		if got[i].N <= got[i-1].N {
			t.Fatalf("out of order: %d after %d", got[i].N, got[i-1].N)
		}
	}
	data, _ := codec.Marshal(val{Origin: "a", N: sent + 1})
	publishBridged(t, pub, "slow", "a", sent+1, data)
	if v := receive(t, w, 1)[0]; v.N != sent+1 {
		t.Errorf("after the drops got %v, want N %d", v, sent+1)
	}
	w.Stop()
	closeLink(t, in)
	s := in.Stats()
	// A drop leaves a gap in the origin's numbers: Lost counts it too.
	if s.Received+s.Dropped != sent+1 || s.Failed != 0 || s.Lost != s.Dropped {
		t.Errorf("stats %+v: Received+Dropped want %d, Lost == Dropped", s, sent+1)
	}
	if err := (&natsbridge.Link{}).SetPendingLimits(1, 1); err == nil {
		t.Error("SetPendingLimits on a non-In link: no error")
	}
}

// Guarantee 16, core NATS: the server restarts mid-stream; the links
// reconnect and go on. Values published while the connection is down go to
// nats.go's reconnect buffer (Sent) or, with the buffer disabled, fail
// (Failed): every value is counted once, and what arrives is in order,
// without repeats.
func TestCoreServerRestart(t *testing.T) {
	captureLogs(t)
	for _, buffered := range []bool{true, false} {
		t.Run(fmt.Sprintf("reconnectBuffer=%v", buffered), func(t *testing.T) {
			srv := startServer(t, natstest.Config{})
			var opts []nats.Option
			if !buffered {
				opts = append(opts, nats.ReconnectBufSize(-1))
			}
			pnc := connect(t, srv.URL(), opts...)
			snc := connect(t, srv.URL())
			outbox, inbox := broadcast.New[val](), broadcast.New[val]()
			defer shutdown(t, outbox)
			defer shutdown(t, inbox)
			out, err := natsbridge.Out(outbox, pnc, "restart", codec, broadcast.WithPolicy(broadcast.Block))
			if err != nil {
				t.Fatal(err)
			}
			in, err := natsbridge.In(snc, "restart", codec, inbox)
			if err != nil {
				t.Fatal(err)
			}
			w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(100_000))
			n := 0
			publish := func(k int) {
				for range k {
					n++
					if err := outbox.Publish(val{Origin: "a", N: n}); err != nil {
						t.Fatal(err)
					}
				}
			}
			publish(100)
			if err := checkPerOrigin(receive(t, w, 100), map[string]int{"a": 100}); err != nil {
				t.Fatal(err)
			}
			srv.Stop()
			eventually(t, "disconnect", func() bool { return !pnc.IsConnected() })
			publish(50) // while down
			// Handed to nats.go (Pending until a server confirms them) or failed.
			eventually(t, "the 50 handled while down", func() bool { s := out.Stats(); return s.Sent+s.Failed+s.Pending == uint64(n) })
			if err := srv.Restart(0); err != nil {
				t.Fatal(err)
			}
			eventually(t, "reconnect", func() bool { return pnc.IsConnected() && snc.IsConnected() })
			// After both reconnected and resubscribed, values flow again.
			if err := snc.Flush(); err != nil {
				t.Fatal(err)
			}
			before := n
			publish(100)
			closeLink(t, out)
			var got []val
			for {
				v := receive(t, w, 1)[0]
				got = append(got, v)
				if v.N == n {
					break
				}
			}
			for i := 1; i < len(got); i++ {
				if got[i].N <= got[i-1].N {
					t.Fatalf("out of order or repeated: %d after %d", got[i].N, got[i-1].N)
				}
			}
			if k := len(got); k < n-before {
				t.Errorf("after the restart %d values arrived, want at least the %d published after reconnecting", k, n-before)
			}
			s := out.Stats()
			if s.Sent+s.Failed != uint64(n) || s.Pending != 0 {
				t.Errorf("Out stats %+v: Sent+Failed want %d, Pending 0", s, n)
			}
			if !buffered && s.Failed < 50 {
				t.Errorf("without a reconnect buffer Failed = %d, want the 50 published while down", s.Failed)
			}
			if buffered && s.Failed != 0 {
				t.Errorf("with the reconnect buffer Failed = %d, want 0", s.Failed)
			}
			closeLink(t, in)
		})
	}
}

// Close is bounded: an In whose broadcaster's Block watcher never reads,
// and an Out whose connection is down with no reconnect buffer, both return
// ctx.Err() soon after ctx ends, with their goroutines gone (goleak).
func TestCloseBounded(t *testing.T) {
	captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	inbox := broadcast.New[val]()
	in, err := natsbridge.In(nc, "bounded", codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
	for k := 1; k <= 10; k++ {
		data, _ := codec.Marshal(val{Origin: "a", N: k})
		publishBridged(t, nc, "bounded", "a", uint64(k), data)
	}
	eventually(t, "a publish waiting", func() bool { return in.Stats().Received >= 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := in.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("In.Close = %v, want DeadlineExceeded", err)
	}
	if s := in.Stats(); s.Received+s.Failed != 10 {
		t.Errorf("In stats %+v: Received+Failed want 10", s)
	}
	if err := in.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	w.Stop()
	shutdown(t, inbox)

	// Out: b holds values that cannot be sent in time (the Block watcher
	// fills while the codec is slow).
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	slow := slowCodec{Codec: codec, d: 50 * time.Millisecond}
	out, err := natsbridge.Out(outbox, nc, "bounded.out", slow, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 20; k++ {
		_ = outbox.Publish(val{Origin: "a", N: k})
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 120*time.Millisecond)
	defer cancel2()
	if err := out.Close(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Out.Close = %v, want DeadlineExceeded", err)
	}
	if s := out.Stats(); s.Sent+s.Failed != 20 || s.Failed == 0 {
		t.Errorf("Out stats %+v: Sent+Failed want 20, some failed", s)
	}
}

type slowCodec struct {
	natsbridge.Codec[val]
	d time.Duration
}

func (c slowCodec) Marshal(v val) ([]byte, error) {
	time.Sleep(c.d)
	return c.Codec.Marshal(v)
}

// Close of an Out sends every value published before it (lossless watcher).
func TestOutCloseSendsWhatItHolds(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	sub, err := nc.SubscribeSync("hold")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	slow := slowCodec{Codec: codec, d: time.Millisecond}
	out, err := natsbridge.Out(outbox, nc, "hold", slow, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for k := 1; k <= n; k++ {
		if err := outbox.Publish(val{Origin: "a", N: k}); err != nil {
			t.Fatal(err)
		}
	}
	if s := out.Stats(); s.Sent == n {
		t.Log("all sent before Close: the test shows less than it could")
	}
	closeLink(t, out)
	if s := out.Stats(); s.Sent != n {
		t.Errorf("after Close Sent = %d, want %d", s.Sent, n)
	}
	for k := 1; k <= n; k++ {
		m, err := sub.NextMsg(guard)
		if err != nil {
			t.Fatalf("message %d: %v", k, err)
		}
		v, _ := codec.Unmarshal(m.Data)
		if v.N != k {
			t.Fatalf("got %d, want %d", v.N, k)
		}
	}
	_ = sub.Unsubscribe()
}

// Configuration mistakes panic with the module's prefix; bad subjects and
// closed connections are errors.
func TestMisuse(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	b := broadcast.New[val]()
	defer shutdown(t, b)
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			r := recover()
			if s, ok := r.(string); !ok || !strings.HasPrefix(s, "natsbridge: ") {
				t.Errorf("%s: panic %v, want a natsbridge: message", name, r)
			}
		}()
		f()
	}
	mustPanic("Out nil b", func() { _, _ = natsbridge.Out(nil, nc, "x", codec) })
	mustPanic("Out nil nc", func() { _, _ = natsbridge.Out(b, nil, "x", codec) })
	mustPanic("In nil codec", func() { _, _ = natsbridge.In(nc, "x", nil, b) })
	mustPanic("OutStream nil js", func() { _, _ = natsbridge.OutStream(b, nil, "S", "x", codec) })
	for _, s := range []string{"", "a.*", "a.>", "a..b", "a b"} {
		if _, err := natsbridge.Out(b, nc, s, codec); !errors.Is(err, nats.ErrBadSubject) {
			t.Errorf("Out(%q): %v, want ErrBadSubject", s, err)
		}
	}
	if _, err := natsbridge.In(nc, "a.>.b", codec, b); !errors.Is(err, nats.ErrBadSubject) {
		t.Errorf("In(a.>.b): %v, want ErrBadSubject", err)
	}
	closed := broadcast.New[val]()
	shutdown(t, closed)
	if _, err := natsbridge.Out(closed, nc, "x", codec); !errors.Is(err, broadcast.ErrClosed) {
		t.Errorf("Out on a shut down broadcaster: %v, want ErrClosed", err)
	}
	// The failed Out registered nothing: an In on it is no loop.
	in, err := natsbridge.In(nc, "x", codec, closed)
	if err != nil {
		t.Fatal(err)
	}
	closeLink(t, in)
	nc2 := connect(t, srv.URL())
	nc2.Close()
	if _, err := natsbridge.Out(b, nc2, "x", codec); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Errorf("Out on a closed connection: %v, want ErrConnectionClosed", err)
	}
}

// Close of an In publishes on b what the client already received: the
// watcher is slow (a queue of 1, Block), so most messages are still pending
// in the client when Close begins; all of them arrive, in order.
func TestInCloseDeliversWhatItHolds(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	pub, nc := connect(t, srv.URL()), connect(t, srv.URL())
	inbox := broadcast.New[val]()
	defer shutdown(t, inbox)
	in, err := natsbridge.In(nc, "held", codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
	const n = 100
	for k := 1; k <= n; k++ {
		data, _ := codec.Marshal(val{Origin: "a", N: k})
		publishBridged(t, pub, "held", "a", uint64(k), data)
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the messages at the client", func() bool {
		s := in.Stats()
		return s.Received >= 1 // one queued; the handler waits with the rest pending
	})
	got := make(chan []val)
	go func() {
		var vs []val
		for v := range w.C() { // until Shutdown closes it
			time.Sleep(100 * time.Microsecond)
			vs = append(vs, v)
		}
		got <- vs
	}()
	closeLink(t, in)
	if s := in.Stats(); s.Received != n || s.Failed != 0 {
		t.Errorf("stats after Close %+v, want Received %d", s, n)
	}
	shutdown(t, inbox)
	if err := checkPerOrigin(<-got, map[string]int{"a": n}); err != nil {
		t.Error(err)
	}
}
