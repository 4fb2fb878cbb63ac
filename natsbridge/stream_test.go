package natsbridge_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// Guarantee 15: OutStream and InStream return an error at once when the
// stream does not exist (or does not take the subject), and loop with the
// core links too.
func TestStreamMissing(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	js := newJS(t, nc)
	makeStream(t, js, "S", "s.>")
	b := broadcast.New[val]()
	defer shutdown(t, b)
	if _, err := natsbridge.OutStream(b, js, "NOPE", "s.a", codec); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("OutStream on a missing stream: %v, want ErrStreamNotFound", err)
	}
	if _, err := natsbridge.InStream(js, "NOPE", "s.a", 0, codec, b); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("InStream on a missing stream: %v, want ErrStreamNotFound", err)
	}
	if _, err := natsbridge.OutStream(b, js, "S", "t.a", codec); err == nil {
		t.Error("OutStream on a subject the stream does not take: no error")
	}
	if _, err := natsbridge.InStream(js, "S", "t.*", 0, codec, b); err == nil {
		t.Error("InStream on a filter outside the stream: no error")
	}
	if got := b.Stats().Watchers; got != 0 {
		t.Errorf("failed links left %d watchers", got)
	}
	// ErrLoop across kinds: OutStream then InStream, and In on its subject.
	out, err := natsbridge.OutStream(b, js, "S", "s.a", codec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natsbridge.InStream(js, "S", "s.>", 0, codec, b); !errors.Is(err, natsbridge.ErrLoop) {
		t.Errorf("InStream onto OutStream's broadcaster and subject: %v, want ErrLoop", err)
	}
	if _, err := natsbridge.In(nc, "s.a", codec, b); !errors.Is(err, natsbridge.ErrLoop) {
		t.Errorf("In onto OutStream's broadcaster and subject: %v, want ErrLoop", err)
	}
	closeLink(t, out)
	in, err := natsbridge.InStream(js, "S", "s.>", 0, codec, b)
	if err != nil {
		t.Fatalf("InStream after OutStream's Close: %v", err)
	}
	closeLink(t, in)
}

// Guarantee 15 through JetStream: two and three bridges, every inbox gets
// every origin's values once, each origin's in order; the stream stored
// each value once.
func TestStreamBridges(t *testing.T) {
	for _, n := range []int{2, 3} {
		t.Run(fmt.Sprintf("bridges=%d", n), func(t *testing.T) {
			srv := startServer(t, natstest.Config{})
			setup := connect(t, srv.URL())
			makeStream(t, newJS(t, setup), "HERALD", "herald.>")
			const perOrigin = 300
			type sbridge struct {
				name          string
				outbox, inbox *broadcast.Broadcaster[val]
				out, in       *natsbridge.Link
				w             *broadcast.Watcher[val]
			}
			var bridges []*sbridge
			want := map[string]int{}
			for i := range n {
				js := newJS(t, connect(t, srv.URL()))
				br := &sbridge{name: fmt.Sprintf("p%d", i), outbox: broadcast.New[val](), inbox: broadcast.New[val]()}
				var err error
				if br.out, err = natsbridge.OutStream(br.outbox, js, "HERALD", "herald.values", codec, broadcast.WithPolicy(broadcast.Block)); err != nil {
					t.Fatal(err)
				}
				if br.in, err = natsbridge.InStream(js, "HERALD", "herald.values", 0, codec, br.inbox); err != nil {
					t.Fatal(err)
				}
				br.w, _ = br.inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(10_000))
				bridges = append(bridges, br)
				want[br.name] = perOrigin
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
				if err := checkPerOrigin(receive(t, br.w, n*perOrigin), want); err != nil {
					t.Errorf("%s: %v", br.name, err)
				}
			}
			for _, br := range bridges {
				closeLink(t, br.out)
				closeLink(t, br.in)
				if s := br.out.Stats(); s.Sent != perOrigin || s.Failed != 0 {
					t.Errorf("%s OutStream stats %+v", br.name, s)
				}
				if s := br.in.Stats(); s.Received != uint64(n*perOrigin) || s.Failed != 0 {
					t.Errorf("%s InStream stats %+v", br.name, s)
				}
				if br.in.LastSeq() != uint64(n*perOrigin) {
					t.Errorf("%s InStream LastSeq %d, want %d", br.name, br.in.LastSeq(), n*perOrigin)
				}
				shutdown(t, br.outbox)
				shutdown(t, br.inbox)
			}
			if got := streamMsgs(t, newJS(t, setup), "HERALD"); got != uint64(n*perOrigin) {
				t.Errorf("stream holds %d messages, want %d", got, n*perOrigin)
			}
		})
	}
}

func streamMsgs(t testing.TB, js jetstream.JetStream, name string) uint64 {
	t.Helper()
	s, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return s.CachedInfo().State.Msgs
}

// InStream from a sequence, inclusive, replays what is stored from there;
// 0 takes only what is stored after it starts. LastSeq gives where to go on.
func TestInStreamFrom(t *testing.T) {
	captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	js := newJS(t, nc)
	makeStream(t, js, "S", "s.>")
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	out, err := natsbridge.OutStream(outbox, js, "S", "s.v", codec, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 10; k++ {
		_ = outbox.Publish(val{Origin: "a", N: k})
	}
	closeLink(t, out)
	if out.LastSeq() != 10 {
		t.Errorf("OutStream LastSeq %d, want 10", out.LastSeq())
	}
	// A message of another subject in the stream, and one that does not decode.
	if _, err := js.Publish(context.Background(), "s.other", []byte(`{"o":"z","n":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), "s.v", []byte(`garbage`)); err != nil {
		t.Fatal(err)
	}
	for _, from := range []uint64{1, 5} {
		inbox := broadcast.New[val]()
		w, _ := inbox.Watch()
		// AcceptForeign: the garbage message is a decode failure then.
		in, err := natsbridge.InStreamWith(js, "S", "s.v", from, codec, inbox, natsbridge.Options[val]{AcceptForeign: true})
		if err != nil {
			t.Fatal(err)
		}
		got := receive(t, w, int(11-from))
		for i, v := range got {
			if v.N != int(from)+i {
				t.Fatalf("from %d: value %d is %v", from, i, v)
			}
		}
		eventually(t, "the garbage message counted", func() bool { return in.Stats().Failed == 1 })
		closeLink(t, in)
		if in.LastSeq() != 12 {
			t.Errorf("from %d: LastSeq %d, want 12", from, in.LastSeq())
		}
		w.Stop()
		shutdown(t, inbox)
	}
	// from 0: only what comes after (a foreign publisher's message).
	inbox := broadcast.New[val]()
	defer shutdown(t, inbox)
	w, _ := inbox.Watch()
	in, err := natsbridge.InStreamWith(js, "S", "s.v", 0, codec, inbox, natsbridge.Options[val]{AcceptForeign: true})
	if err != nil {
		t.Fatal(err)
	}
	data, _ := codec.Marshal(val{Origin: "b", N: 1})
	if _, err := js.Publish(context.Background(), "s.v", data); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, w, 1); got[0] != (val{Origin: "b", N: 1}) {
		t.Errorf("from 0 got %v first, want the new value", got[0])
	}
	closeLink(t, in)
}

// Guarantee 16, JetStream: the server restarts (twice) while values flow.
// Nothing acknowledged is lost, the stream stores each value once (message
// IDs), and InStream delivers each once, in stream order. The stream keeps
// OutStream's order except for at most one value per restart: the one
// published in the instant the connection broke, which nats.go sends from
// its reconnect buffer ahead of the earlier values lost with the
// connection (see OutStreamWith); the link reports it at Warn.
func TestStreamServerRestart(t *testing.T) {
	logs := captureLogs(t)
	srv := startServer(t, natstest.Config{})
	pnc, snc := connect(t, srv.URL()), connect(t, srv.URL())
	pjs, sjs := newJS(t, pnc), newJS(t, snc)
	makeStream(t, pjs, "S", "s.>")
	outbox, inbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, outbox)
	defer shutdown(t, inbox)
	out, err := natsbridge.OutStream(outbox, pjs, "S", "s.v", codec, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	in, err := natsbridge.InStream(sjs, "S", "s.v", 0, codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(100_000))
	const n, restarts = 3000, 2
	done := make(chan struct{})
	go func() {
		defer close(done)
		for k := 1; k <= n; k++ {
			if err := outbox.Publish(val{Origin: "a", N: k}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for _, at := range []uint64{n / 4, n / 2} {
		eventually(t, "values acknowledged", func() bool { return out.Stats().Sent >= at })
		if err := srv.Restart(0); err != nil {
			t.Fatal(err)
		}
	}
	<-done
	closeLink(t, out) // every value acknowledged, or an error
	if s := out.Stats(); s.Sent != n || s.Failed != 0 || s.Pending != 0 {
		t.Errorf("OutStream stats %+v, want Sent %d", s, n)
	}
	got := receive(t, w, n)
	closeLink(t, in)
	if s := in.Stats(); s.Received != n || s.Failed != 0 {
		t.Errorf("InStream stats %+v, want Received %d", s, n)
	}
	st, err := pjs.Stream(context.Background(), "S")
	if err != nil {
		t.Fatal(err)
	}
	stored := storedNs(t, st)
	if len(stored) != n {
		t.Fatalf("stream holds %d messages, want %d (each value once)", len(stored), n)
	}
	// InStream: each stored message once, in stream order.
	for i := range got {
		if got[i].N != stored[i] {
			t.Fatalf("InStream's value %d is %d, stream sequence %d holds %d", i, got[i].N, i+1, stored[i])
		}
	}
	// The stream: every value once; out of place (stored ahead of a
	// smaller one) at most one per restart, each reported.
	seen := make([]bool, n+1)
	for _, k := range stored {
		if k < 1 || k > n || seen[k] {
			t.Fatalf("value %d stored twice or unknown", k)
		}
		seen[k] = true
	}
	misplaced, low := 0, n+1
	for i := len(stored) - 1; i >= 0; i-- {
		if stored[i] > low {
			misplaced++
		}
		low = min(low, stored[i])
	}
	if misplaced > restarts {
		t.Errorf("%d values stored out of publish order, want at most %d (one per restart)", misplaced, restarts)
	}
	if misplaced > 0 {
		t.Logf("%d values stored ahead of earlier ones (the race at the disconnect)", misplaced)
		if !slices.ContainsFunc(logs.lines(), func(l string) bool { return strings.Contains(l, "ahead of earlier values") }) {
			t.Errorf("%d values out of order, not reported", misplaced)
		}
	}
	if t.Failed() {
		for _, line := range logs.lines() {
			t.Log(line)
		}
	}
}

// Guarantee 16 for OutStream: a value that cannot be encoded and one over
// max_payload are counted in Failed; the values around them are stored.
func TestOutStreamFailures(t *testing.T) {
	captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	js := newJS(t, nc)
	makeStream(t, js, "S", "s.>")
	outbox, inbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, outbox)
	defer shutdown(t, inbox)
	w, _ := inbox.Watch()
	in, err := natsbridge.InStream(js, "S", "s.v", 0, codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	out, err := natsbridge.OutStream(outbox, js, "S", "s.v", failingCodec{codec}, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	big := string(make([]byte, 1<<20))
	for _, v := range []val{{Origin: "a", N: 1}, {Origin: "a", N: -1}, {Origin: "a", N: 2, Pad: big}, {Origin: "a", N: 2}} {
		if err := outbox.Publish(v); err != nil {
			t.Fatal(err)
		}
	}
	closeLink(t, out)
	if s := out.Stats(); s.Sent != 2 || s.Failed != 2 {
		t.Errorf("OutStream stats %+v, want Sent 2, Failed 2", s)
	}
	if err := checkPerOrigin(receive(t, w, 2), map[string]int{"a": 2}); err != nil {
		t.Error(err)
	}
	closeLink(t, in)
}

// A zero Link is inert: Stats, Close and SetPendingLimits do not panic.
func TestZeroLink(t *testing.T) {
	var l natsbridge.Link
	if s := l.Stats(); s != (natsbridge.LinkStats{}) {
		t.Errorf("Stats %+v", s)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := l.Close(context.Background()); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if l.SetPendingLimits(1, 1) == nil {
		t.Error("SetPendingLimits: no error")
	}
}

// Close is bounded for the stream links too: OutStream holding values the
// stream cannot acknowledge (the server is down), and InStream whose
// broadcaster's Block watcher is full, return ctx.Err() once ctx ends, with
// every value counted and no goroutine left (goleak).
func TestStreamCloseBounded(t *testing.T) {
	captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	js := newJS(t, nc)
	makeStream(t, js, "S", "s.>")

	inbox := broadcast.New[val]()
	w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
	in, err := natsbridge.InStreamWith(js, "S", "s.v", 1, codec, inbox, natsbridge.Options[val]{AcceptForeign: true})
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 20; k++ {
		data, _ := codec.Marshal(val{Origin: "a", N: k})
		if _, err := js.Publish(context.Background(), "s.v", data); err != nil {
			t.Fatal(err)
		}
	}
	// The server has sent the client message 2 (its consumer's delivered
	// count), so the consumer holds it and its publish must wait on the
	// full watcher: Received alone would not say that message 2 is there.
	eventually(t, "InStream waiting on the full watcher", func() bool {
		return in.Stats().Received >= 1 && consumerDelivered(t, js, "S") >= 2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := in.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("InStream Close = %v, want DeadlineExceeded", err)
	}
	if s := in.Stats(); s.Received < 1 || s.Failed < 1 {
		t.Errorf("InStream stats %+v: want some received and the rest failed", s)
	}
	w.Stop()
	shutdown(t, inbox)

	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	out, err := natsbridge.OutStream(outbox, js, "S", "s.v", codec, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	eventually(t, "disconnect", func() bool { return !nc.IsConnected() })
	for k := 1; k <= 50; k++ {
		if err := outbox.Publish(val{Origin: "a", N: k}); err != nil {
			t.Fatal(err)
		}
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel2()
	if err := out.Close(ctx2); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("OutStream Close = %v, want DeadlineExceeded", err)
	}
	if s := out.Stats(); s.Sent != 0 || s.Failed != 50 {
		t.Errorf("OutStream stats %+v, want Failed 50", s)
	}
}
