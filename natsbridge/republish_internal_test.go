package natsbridge

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// Guarantee 16: retried publishes carry a message ID, so the stream stores
// each value once. An ack wait far shorter than the round trip makes
// OutStream republish its window again and again (values already stored
// among them); the stream still holds each value once, in order. Without
// the message ID it holds many copies.
func TestOutStreamRepublishStoresOnce(t *testing.T) {
	oldWait, oldMin := ackWait, retryMin
	ackWait, retryMin = 50*time.Microsecond, time.Millisecond
	defer func() { ackWait, retryMin = oldWait, oldMin }()
	restore := discardLogs()
	defer restore()

	srv, err := natstest.Start(natstest.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s"}})
	if err != nil {
		t.Fatal(err)
	}
	b := broadcast.New[int]()
	defer b.Shutdown(ctx)
	l, err := OutStream(b, js, "S", "s", JSON[int](), broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	const n = 500
	for i := 1; i <= n; i++ {
		_ = b.Publish(i)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != n {
		t.Errorf("stream holds %d messages, want %d", info.State.Msgs, n)
	}
	for seq := uint64(1); seq <= min(info.State.Msgs, n); seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatal(err)
		}
		if v, _ := JSON[int]().Unmarshal(m.Data); v != int(seq) {
			t.Fatalf("sequence %d holds %d", seq, v)
		}
	}
	if s := l.Stats(); s.Sent != n || s.Failed != 0 {
		t.Errorf("stats %+v", s)
	}
}
