//go:build unix

package natsbridge_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// The publishing side of OutStream in one process, against what a user
// writes with nats.go alone (crossbench's js-bare-id): b.N values into a
// file-backed stream on an embedded server, every one acknowledged before
// the clock stops, 256 in flight. Only the sending side: no consumer.
// cpu-ns/op is the process's CPU time per value, the server's included.
// Run them interleaved and compare within one run (the machine is
// shared): go test -run '^$' -bench 'StreamPub' -count 6 .

func benchStreamPub(b *testing.B, bare bool) {
	srv, err := natstest.Start(natstest.Config{StoreDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	defer nc.Close()
	var failed atomic.Int64
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(256),
		jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
		Name: "PUB", Subjects: []string{"pub"}, Storage: jetstream.FileStorage,
	}); err != nil {
		b.Fatal(err)
	}
	type sample struct {
		S uint64 `json:"s"`
		T int64  `json:"t"`
	}
	c := natsbridge.JSON[sample]()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c0 := cpuNS()
	b.ResetTimer()
	if bare {
		opts := []jetstream.PublishOpt{jetstream.WithStallWait(time.Minute)}
		var id []byte
		for i := range b.N {
			data, err := c.Marshal(sample{S: uint64(i), T: 1764770000000000000})
			if err != nil {
				b.Fatal(err)
			}
			id = strconv.AppendUint(append(id[:0], "bench-"...), uint64(i), 10)
			if _, err := js.PublishAsync("pub", data, append(opts[:1:1], jetstream.WithMsgID(string(id)))...); err != nil {
				b.Fatal(err)
			}
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-ctx.Done():
			b.Fatal("not all acknowledged")
		}
		if failed.Load() > 0 {
			b.Fatalf("%d failed", failed.Load())
		}
	} else {
		outbox := broadcast.New[sample]()
		l, err := natsbridge.OutStream(outbox, js, "PUB", "pub", c, broadcast.WithPolicy(broadcast.Block))
		if err != nil {
			b.Fatal(err)
		}
		for i := range b.N {
			if err := outbox.Publish(sample{S: uint64(i), T: 1764770000000000000}); err != nil {
				b.Fatal(err)
			}
		}
		if err := l.Close(ctx); err != nil {
			b.Fatal(err)
		}
		if s := l.Stats(); s.Sent != uint64(b.N) {
			b.Fatalf("sent %d of %d: %+v", s.Sent, b.N, s)
		}
		_ = outbox.Shutdown(ctx)
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuNS()-c0)/float64(b.N), "cpu-ns/op")
}

func BenchmarkStreamPubBare(b *testing.B) { benchStreamPub(b, true) }
func BenchmarkStreamPubOut(b *testing.B)  { benchStreamPub(b, false) }
