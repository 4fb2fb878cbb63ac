package natsbridge_test

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// Options.Logger receives a link's lines; slog.Default gets none.
func TestOptionLogger(t *testing.T) {
	def := captureLogs(t)
	own := &logCapture{}
	lg := slog.New(slog.NewTextHandler(own, nil))
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	outbox, inbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, outbox)
	defer shutdown(t, inbox)
	out, err := natsbridge.OutWith(outbox, nc, "logger", failingCodec{codec}, natsbridge.Options[val]{Logger: lg, Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)}})
	if err != nil {
		t.Fatal(err)
	}
	in, err := natsbridge.InWith(nc, "logger", codec, inbox, natsbridge.Options[val]{Logger: lg})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch(broadcast.WithQueueLength(100))
	_ = outbox.Publish(val{Origin: "a", N: 1})
	_ = outbox.Publish(val{Origin: "a", N: -2}) // cannot be encoded: Out's Failed, In's Lost
	_ = outbox.Publish(val{Origin: "a", N: 3})
	receive(t, w, 2)
	eventually(t, "the gap counted", func() bool { return in.Stats().Lost == 1 })
	closeLink(t, out)
	closeLink(t, in)
	text := strings.Join(own.lines(), "\n")
	for _, want := range []string{"link=Out", "could not be encoded", "link=In", "never arrived"} {
		if !strings.Contains(text, want) {
			t.Errorf("the Logger's lines lack %q:\n%s", want, text)
		}
	}
	if lines := def.lines(); len(lines) != 0 {
		t.Errorf("slog.Default got lines:\n%s", strings.Join(lines, "\n"))
	}
	w.Stop()
}

// Options.Headers and Options.FromHeaders carry a header from the value
// on one side to the value on the other (a W3C traceparent, say), and the
// bridge's own headers stay the bridge's.
func TestOptionHeaders(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	outbox, inbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, outbox)
	defer shutdown(t, inbox)
	trace := func(n int) string { return fmt.Sprintf("00-%032x-%016x-01", n, n) }
	out, err := natsbridge.OutWith(outbox, nc, "hdr", codec, natsbridge.Options[val]{
		Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)},
		Headers: func(v val, h nats.Header) {
			h.Set("traceparent", trace(v.N))
			h.Set(natsbridge.HeaderSeq, "999") // the bridge's own win
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	in, err := natsbridge.InWith(nc, "hdr", codec, inbox, natsbridge.Options[val]{
		FromHeaders: func(h nats.Header, v val) val {
			v.Pad = h.Get("traceparent")
			return v
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch(broadcast.WithQueueLength(100))
	const n = 20
	for k := 1; k <= n; k++ {
		_ = outbox.Publish(val{Origin: "a", N: k})
	}
	for i, v := range receive(t, w, n) {
		if v.N != i+1 || v.Pad != trace(i+1) {
			t.Fatalf("value %d: %+v, want N %d with traceparent %s", i, v, i+1, trace(i+1))
		}
	}
	closeLink(t, out)
	closeLink(t, in)
	if s := in.Stats(); s.Received != n || s.Lost != 0 || s.Failed != 0 {
		t.Errorf("In stats %+v, want Received %d, nothing Lost", s, n)
	}
	w.Stop()
}

// Options.QueueGroup: two members of a queue group share the messages,
// each once in total; loss detection is off, so the numbers each member
// does not see are not counted as Lost.
func TestOptionQueueGroup(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	pnc := connect(t, srv.URL())
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	type member struct {
		in *natsbridge.Link
		b  *broadcast.Broadcaster[val]
		c  *collector
	}
	var ms []member
	for range 2 {
		b := broadcast.New[val]()
		defer shutdown(t, b)
		in, err := natsbridge.InWith(connect(t, srv.URL()), "work", codec, b, natsbridge.Options[val]{QueueGroup: "workers"})
		if err != nil {
			t.Fatal(err)
		}
		w, _ := b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1000))
		ms = append(ms, member{in: in, b: b, c: collect(w)})
	}
	out, err := natsbridge.Out(outbox, pnc, "work", codec, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	for k := 1; k <= n; k++ {
		_ = outbox.Publish(val{Origin: "a", N: k})
	}
	eventually(t, "every value at one member", func() bool {
		return ms[0].in.Stats().Received+ms[1].in.Stats().Received == n
	})
	closeLink(t, out)
	seen := map[int]int{}
	for i, m := range ms {
		closeLink(t, m.in)
		shutdown(t, m.b)
		<-m.c.done
		got := m.c.values()
		for _, v := range got {
			seen[v.N]++
		}
		if s := m.in.Stats(); s.Lost != 0 || s.Failed != 0 || s.Received != uint64(len(got)) {
			t.Errorf("member %d stats %+v, got %d values: want Lost 0, Failed 0", i, s, len(got))
		}
		t.Logf("member %d: %d values", i, len(got))
	}
	for k := 1; k <= n; k++ {
		if seen[k] != 1 {
			t.Errorf("value %d arrived %d times in total, want once", k, seen[k])
		}
	}
}

// OutWith and InWith panic on misuse with the function's name, as Out and
// In do.
func TestOptionsMisuse(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	for name, f := range map[string]func(){
		"natsbridge: OutWith: nil Broadcaster": func() { _, _ = natsbridge.OutWith(nil, nc, "x", codec, natsbridge.Options[val]{}) },
		"natsbridge: InWith: nil Codec":        func() { _, _ = natsbridge.InWith(nc, "x", nil, broadcast.New[val](), natsbridge.Options[val]{}) },
	} {
		func() {
			defer func() {
				if r := recover(); r != name {
					t.Errorf("panic %v, want %q", r, name)
				}
			}()
			f()
		}()
	}
	if _, err := natsbridge.InWith(nc, "x", codec, broadcast.New[val](), natsbridge.Options[val]{QueueGroup: "bad group"}); err == nil {
		t.Error("InWith with a malformed queue group: no error")
	}
}
