package natsbridge_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// linkLogger returns a logger for Options.Logger and what it wrote.
func linkLogger() (*slog.Logger, *logCapture) {
	c := &logCapture{}
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug})), c
}

// logged reports whether a line of c holds every one of parts.
func logged(c *logCapture, parts ...string) bool {
	for _, line := range c.lines() {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			return true
		}
	}
	return false
}

func makeStreamCfg(t testing.TB, js jetstream.JetStream, cfg jetstream.StreamConfig) jetstream.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	st, err := js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// storedNs returns the N of every message of the stream, in stream order.
func storedNs(t testing.TB, st jetstream.Stream) []int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ns []int
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		v, err := codec.Unmarshal(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		ns = append(ns, v.N)
	}
	return ns
}

func publishN(t testing.TB, b *broadcast.Broadcaster[val], from, to int) {
	t.Helper()
	for k := from; k <= to; k++ {
		if err := b.Publish(val{Origin: "a", N: k}); err != nil {
			t.Fatal(err)
		}
	}
}

// Guarantee 23: a stream full under DiscardNew. A Block watcher's link
// holds the refused value (Pending, logged at Warn) and stores it, and the
// ones after it, in order once there is room again; nothing is Failed.
func TestStreamFullBlock(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	st := makeStreamCfg(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgs: 5, Discard: jetstream.DiscardNew})
	lg, logs := linkLogger()
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{
		Logger: lg, Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)},
	})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, outbox, 1, 8)
	eventually(t, "5 stored, the rest held", func() bool {
		s := out.Stats()
		return s.Sent == 5 && s.Pending == 3 && logged(logs, "level=WARN", "stream is full")
	})
	// The link waits: still nothing more after a while, nothing failed.
	time.Sleep(300 * time.Millisecond)
	if s := out.Stats(); s.Sent != 5 || s.Failed != 0 || s.Pending != 3 {
		t.Fatalf("while full: %+v", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the held values stored", func() bool { return out.Stats().Sent == 8 })
	closeLink(t, out)
	if s := out.Stats(); s.Sent != 8 || s.Failed != 0 || s.Pending != 0 {
		t.Errorf("stats %+v, want Sent 8", s)
	}
	if got := storedNs(t, st); len(got) != 3 || got[0] != 6 || got[1] != 7 || got[2] != 8 {
		t.Errorf("stream holds %v, want [6 7 8]", got)
	}
}

// Guarantee 23: a stream full, any other policy: the refused values are
// counted in Failed and logged; the link goes on once there is room.
func TestStreamFullDrop(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	st := makeStreamCfg(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgs: 5, Discard: jetstream.DiscardNew})
	lg, logs := linkLogger()
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{
		Logger: lg, Watch: []broadcast.Option{broadcast.WithQueueLength(100)}, // Drop, the default
	})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, outbox, 1, 8)
	eventually(t, "5 stored, 3 failed", func() bool {
		s := out.Stats()
		return s.Sent == 5 && s.Failed == 3 && s.Pending == 0
	})
	if !logged(logs, "level=WARN", "the stream is full") {
		t.Errorf("no Warn line on the full stream: %q", logs.lines())
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := st.Purge(ctx); err != nil {
		t.Fatal(err)
	}
	publishN(t, outbox, 9, 10)
	closeLink(t, out)
	if s := out.Stats(); s.Sent != 7 || s.Failed != 3 || s.Dropped != 0 {
		t.Errorf("stats %+v, want Sent 7, Failed 3", s)
	}
	if got := storedNs(t, st); len(got) != 2 || got[0] != 9 || got[1] != 10 {
		t.Errorf("stream holds %v, want [9 10]", got)
	}
}

// Guarantee 23: a value over the stream's max_msg_size is counted in
// Failed (never retried); the link goes on with the next.
func TestStreamTooLarge(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	st := makeStreamCfg(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgSize: 200})
	lg, logs := linkLogger()
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{
		Logger: lg, Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []val{{N: 1}, {N: 2, Pad: strings.Repeat("x", 500)}, {N: 3}} {
		if err := outbox.Publish(v); err != nil {
			t.Fatal(err)
		}
	}
	closeLink(t, out)
	if s := out.Stats(); s.Sent != 2 || s.Failed != 1 {
		t.Errorf("stats %+v, want Sent 2, Failed 1", s)
	}
	if got := storedNs(t, st); len(got) != 2 || got[0] != 1 || got[1] != 3 {
		t.Errorf("stream holds %v, want [1 3]", got)
	}
	if !logged(logs, "level=WARN", "too large") {
		t.Errorf("no Warn line on the value too large: %q", logs.lines())
	}
}

// Guarantee 23: OutStream's stream deleted: the link logs it at Error,
// Err says why, Done is closed, its watcher stops (a Block watcher no
// longer holds b's publishers). Idle (the deletion advisory) and while
// values are refused (the publish path: the subject taken by another
// stream, so the publish fails with "expected stream does not match").
func TestOutStreamStreamDeleted(t *testing.T) {
	for _, busy := range []bool{false, true} {
		t.Run(fmt.Sprint("busy=", busy), func(t *testing.T) {
			srv := startServer(t, natstest.Config{})
			js := newJS(t, connect(t, srv.URL()))
			makeStream(t, js, "S", "s.>")
			lg, logs := linkLogger()
			outbox := broadcast.New[val]()
			defer shutdown(t, outbox)
			out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{
				Logger: lg, Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)},
			})
			if err != nil {
				t.Fatal(err)
			}
			publishN(t, outbox, 1, 3)
			eventually(t, "3 stored", func() bool { return out.Stats().Sent == 3 })
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			if err := js.DeleteStream(ctx, "S"); err != nil {
				t.Fatal(err)
			}
			if busy {
				makeStream(t, js, "T", "s.>")
				publishN(t, outbox, 4, 4)
			}
			select {
			case <-out.Done():
			case <-time.After(guard):
				t.Fatal("Done not closed after the stream was deleted")
			}
			if err := out.Err(); !errors.Is(err, jetstream.ErrStreamNotFound) {
				t.Errorf("Err = %v, want ErrStreamNotFound", err)
			}
			if !logged(logs, "level=ERROR", "stopped for good") {
				t.Errorf("no Error line: %q", logs.lines())
			}
			if w := outbox.Stats().Watchers; w != 0 {
				t.Errorf("the dead link's watcher still registered (%d watchers)", w)
			}
			publishN(t, outbox, 5, 5000) // no watcher holds the publisher
			ctx2, cancel2 := context.WithTimeout(context.Background(), time.Second)
			defer cancel2()
			if err := out.Close(ctx2); err != nil {
				t.Errorf("Close after death: %v, want nil (the loss is counted, Err says why)", err)
			}
			if !errors.Is(out.Err(), jetstream.ErrStreamNotFound) {
				t.Errorf("Err after Close = %v, want still the cause", out.Err())
			}
			s := out.Stats()
			if s.Sent != 3 || s.Pending != 0 || busy && s.Failed > 1 || !busy && s.Failed != 0 {
				t.Errorf("stats %+v, want Sent 3, Failed 0 (idle) or at most 1", s)
			}
			if busy {
				st, err := js.Stream(ctx, "T")
				if err != nil {
					t.Fatal(err)
				}
				if n := st.CachedInfo().State.Msgs; n != 0 {
					t.Errorf("the other stream took %d values", n)
				}
			}
		})
	}
}

// Guarantee 23: Close returns within ctx while a Block link holds values
// the full stream refuses; they are counted in Failed.
func TestStreamFullBlockClose(t *testing.T) {
	srv := startServer(t, natstest.Config{})
	js := newJS(t, connect(t, srv.URL()))
	makeStreamCfg(t, js, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}, MaxMsgs: 1, Discard: jetstream.DiscardNew})
	lg, _ := linkLogger()
	outbox := broadcast.New[val]()
	defer shutdown(t, outbox)
	out, err := natsbridge.OutStreamWith(outbox, js, "S", "s.v", codec, natsbridge.Options[val]{
		Logger: lg, Watch: []broadcast.Option{broadcast.WithPolicy(broadcast.Block)},
	})
	if err != nil {
		t.Fatal(err)
	}
	publishN(t, outbox, 1, 3)
	eventually(t, "1 stored, 2 held", func() bool { s := out.Stats(); return s.Sent == 1 && s.Pending == 2 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := out.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 300*time.Millisecond+closeBound {
		t.Errorf("Close took %v", took)
	}
	if s := out.Stats(); s.Sent != 1 || s.Failed != 2 || s.Pending != 0 {
		t.Errorf("stats %+v, want Sent 1, Failed 2", s)
	}
}

// closeBound is how long after its ctx ends a Close may take (the links'
// grace for a NATS call in progress, and scheduling).
const closeBound = 3 * time.Second
