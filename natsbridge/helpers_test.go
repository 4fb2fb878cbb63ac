package natsbridge_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// val is what the tests send: its origin and its number there.
type val struct {
	Origin string `json:"o"`
	N      int    `json:"n"`
	Pad    string `json:"p,omitempty"`
}

var codec = natsbridge.JSON[val]()

// guard bounds every wait of the tests against hangs; never a timing claim.
const guard = 30 * time.Second

func startServer(t testing.TB, cfg natstest.Config) *natstest.Server {
	t.Helper()
	if cfg.StoreDir == "" {
		cfg.StoreDir = t.TempDir()
	}
	s, err := natstest.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// connect opens a connection that reconnects forever, quickly.
func connect(t testing.TB, url string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(20 * time.Millisecond),
		nats.ReconnectJitter(0, 0),
		nats.NoCallbacksAfterClientClose(),
	}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newJS(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

func makeStream(t testing.TB, js jetstream.JetStream, name string, subjects ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: subjects, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
}

// closeLink closes l within guard and fails the test on an error.
func closeLink(t testing.TB, l *natsbridge.Link) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := l.Close(ctx); err != nil {
		t.Errorf("Close(%s): %v", l.Subject(), err)
	}
}

func shutdown[T any](t testing.TB, b *broadcast.Broadcaster[T]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := b.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// receive reads n values from w, failing the test after guard.
func receive(t testing.TB, w *broadcast.Watcher[val], n int) []val {
	t.Helper()
	got := make([]val, 0, n)
	timeout := time.NewTimer(guard)
	defer timeout.Stop()
	for len(got) < n {
		select {
		case v, ok := <-w.C():
			if !ok {
				t.Fatalf("watcher ended after %d of %d values", len(got), n)
			}
			got = append(got, v)
		case <-timeout.C:
			t.Fatalf("timed out after %d of %d values", len(got), n)
		}
	}
	return got
}

// checkPerOrigin checks that got holds, for every origin, exactly the
// numbers 1..want[origin] in order (interleaving between origins is free).
func checkPerOrigin(got []val, want map[string]int) error {
	next := map[string]int{}
	for _, v := range got {
		if _, ok := want[v.Origin]; !ok {
			return fmt.Errorf("value from unknown origin %q", v.Origin)
		}
		next[v.Origin]++
		if v.N != next[v.Origin] {
			return fmt.Errorf("origin %s: got %d, want %d (lost, repeated or out of order)", v.Origin, v.N, next[v.Origin])
		}
	}
	for o, n := range want {
		if next[o] != n {
			return fmt.Errorf("origin %s: %d values, want %d", o, next[o], n)
		}
	}
	return nil
}

// eventually polls cond until it holds or guard passes.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(guard)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// consumerDelivered is the highest stream sequence the server has sent to
// any consumer of stream: a message up to it has left the server, so the
// client holds it (a drain still hands it to the handler).
func consumerDelivered(t testing.TB, js jetstream.JetStream, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	var top uint64
	lister := st.ListConsumers(ctx)
	for ci := range lister.Info() {
		top = max(top, ci.Delivered.Stream)
	}
	if err := lister.Err(); err != nil {
		t.Fatal(err)
	}
	return top
}

// publishBridged publishes data on subject as an Out of origin would, with
// the bridge's headers and sequence number seq, so that an In takes it.
func publishBridged(t testing.TB, nc *nats.Conn, subject, origin string, seq uint64, data []byte) {
	t.Helper()
	m := nats.NewMsg(subject)
	m.Header.Set(natsbridge.HeaderSeq, fmt.Sprint(origin, " ", seq))
	m.Data = data
	if err := nc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
}
