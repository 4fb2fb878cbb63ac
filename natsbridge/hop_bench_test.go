//go:build unix

package natsbridge_test

import (
	"context"
	"encoding/json"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// The receiving side of an In link in isolation, without NATS: decode a
// message with encoding/json (as In's handler does, about 0.9 µs here),
// then either record the value in the same goroutine (what a bare nats.go
// subscriber does) or publish it on a broadcaster whose Block watcher
// another goroutine reads through All() and records (In and the watcher
// behind it). cpu-ns/op is the process's CPU time (getrusage) per value,
// every goroutine included: the price of the hop. BenchmarkHopBackToBack
// publishes with nothing between values, for comparison. See BENCH.md.

var hopPayload = []byte(`{"s":123456,"t":1764770000000000000}`)

type hopSample struct {
	S uint64 `json:"s"`
	T int64  `json:"t"`
}

type hopRecorder struct {
	mu sync.Mutex
	n  int
	ts []int64
}

func (r *hopRecorder) record(v hopSample) {
	now := time.Now().UnixNano()
	r.mu.Lock()
	r.n++
	r.ts = append(r.ts, now-v.T)
	r.mu.Unlock()
}

func cpuNS() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func decodeSample(b *testing.B) hopSample {
	var v hopSample
	if err := json.Unmarshal(hopPayload, &v); err != nil {
		b.Fatal(err)
	}
	return v
}

func BenchmarkHopInline(b *testing.B) {
	r := &hopRecorder{ts: make([]int64, 0, b.N)}
	c0 := cpuNS()
	b.ResetTimer()
	for range b.N {
		r.record(decodeSample(b))
	}
	b.StopTimer()
	b.ReportMetric(float64(cpuNS()-c0)/float64(b.N), "cpu-ns/op")
}

func benchHop(b *testing.B, decode bool) {
	r := &hopRecorder{ts: make([]int64, 0, b.N)}
	bc := broadcast.New[hopSample]()
	w, err := bc.Watch(broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for v := range w.All() {
			r.record(v)
		}
	}()
	c0 := cpuNS()
	b.ResetTimer()
	for i := range b.N {
		v := hopSample{S: uint64(i)}
		if decode {
			v = decodeSample(b)
		}
		if err := bc.Publish(v); err != nil {
			b.Fatal(err)
		}
	}
	if err := bc.Shutdown(context.Background()); err != nil {
		b.Fatal(err)
	}
	<-done
	b.StopTimer()
	if r.n != b.N {
		b.Fatalf("recorded %d of %d", r.n, b.N)
	}
	b.ReportMetric(float64(cpuNS()-c0)/float64(b.N), "cpu-ns/op")
}

func BenchmarkHop(b *testing.B)           { benchHop(b, true) }
func BenchmarkHopBackToBack(b *testing.B) { benchHop(b, false) }
