//go:build unix

package natsbridge

import (
	"context"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
)

// The receiving side of an In link as BenchmarkHop (hop_bench_test.go)
// measures it, with the bridge's own work added: nats.go's parsing of the
// message's headers (nats.DecodeHeadersMsg, what the client does for every
// message that has headers), then In's handler: the origin and sequence
// header, loss detection, the JSON codec with its empty and null checks,
// the publish on a broadcaster whose Block watcher another goroutine reads.
// BenchmarkHopInHandler leaves out nats.go's header parsing: the bridge's
// code alone; BenchmarkHopInDeliver is In's handler before headers and
// loss detection (decode and publish), in the same harness. cpu-ns/op is
// the process's CPU time per value; compare with BenchmarkHop's.

var hopInPayload = []byte(`{"s":123456,"t":1764770000000000000}`)

type hopInSample struct {
	S uint64 `json:"s"`
	T int64  `json:"t"`
}

func hopCPUNS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// hopMode is what benchHopIn does per message.
type hopMode int

const (
	hopParse   hopMode = iota // nats.go's header parsing, then In's handler
	hopHandler                // In's handler, headers already parsed
	hopDeliver                // what In's handler did before headers and loss detection: decode and publish
)

func benchHopIn(b *testing.B, mode hopMode) {
	parse := mode == hopParse
	bc := broadcast.New[hopInSample]()
	w, err := bc.Watch(broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		b.Fatal(err)
	}
	// The reader records as BenchmarkHop's does.
	var mu sync.Mutex
	n := 0
	ts := make([]int64, 0, b.N)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := range w.All() {
			now := time.Now().UnixNano()
			mu.Lock()
			n++
			ts = append(ts, now-v.T)
			mu.Unlock()
		}
	}()
	l := newLink("In", "hop")
	in := &coreIn[hopInSample]{l: l, c: JSON[hopInSample](), b: bc, track: true, origins: map[string]*originState{}}
	origin := newOrigin()
	prefix := []byte("NATS/1.0\r\n" + HeaderSeq + ": " + origin + " ")
	hdr := make([]byte, 0, 128)
	pre := nats.Header{HeaderSeq: {""}}
	// BenchmarkHopInHandler: the strings nats.go would have made, made
	// before; numbers after the 4096th repeat, which costs the handler
	// what a new number does.
	seqs := make([]string, 4096)
	for i := range seqs {
		seqs[i] = originValue(origin, uint64(i+1))
	}
	m := &nats.Msg{Subject: "hop"} // nats.go allocates one per message: not the bridge's cost
	ctx := context.Background()
	c0 := hopCPUNS()
	b.ResetTimer()
	for i := range b.N {
		m.Data = hopInPayload
		if mode == hopDeliver {
			deliver(ctx, l, in.c, bc, m.Data)
			continue
		}
		if parse {
			hdr = append(strconv.AppendUint(append(hdr[:0], prefix...), uint64(i+1), 10), "\r\n\r\n"...)
			if m.Header, err = nats.DecodeHeadersMsg(hdr); err != nil {
				b.Fatal(err)
			}
		} else {
			pre[HeaderSeq][0] = seqs[i%len(seqs)]
			m.Header = pre
		}
		in.handle(ctx, m)
	}
	if err := bc.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	<-done
	b.StopTimer()
	if s := l.Stats(); n != b.N || s.Received != uint64(b.N) || s.Lost != 0 || s.Failed != 0 {
		b.Fatalf("recorded %d of %d, stats %+v", n, b.N, s)
	}
	b.ReportMetric(float64(hopCPUNS()-c0)/float64(b.N), "cpu-ns/op")
}

func BenchmarkHopIn(b *testing.B)        { benchHopIn(b, hopParse) }
func BenchmarkHopInHandler(b *testing.B) { benchHopIn(b, hopHandler) }
func BenchmarkHopInDeliver(b *testing.B) { benchHopIn(b, hopDeliver) }
