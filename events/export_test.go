package events

import (
	"hash/maphash"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
	"golang.org/x/time/rate"
)

// BenchCacheHerald and BenchCacheHashicorp are the bodies of
// BenchmarkCache (bench_test.go, in package events_test so that it can use
// eventstest).
func BenchCacheHerald(b *testing.B, stream []Event) {
	keys := eventKeyStrings(stream)
	seed := maphash.MakeSeed()
	c := newLRU[string, logRecord](DefaultLRUCacheSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		r, _ := c.touch(k, maphash.String(seed, k))
		r.count++
		i++
	}
}

func BenchCacheHashicorp(b *testing.B, stream []Event) {
	keys := eventKeyStrings(stream)
	c, _ := simplelru.NewLRU[string, *logRecord](DefaultLRUCacheSize, nil)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := keys[i%len(keys)]
		r, ok := c.Get(k)
		if !ok {
			r = new(logRecord)
			c.Add(k, r)
		}
		r.count++
		i++
	}
}

// eventKeyStrings returns the de-duplication keys of stream, as the
// correlator encodes them.
func eventKeyStrings(stream []Event) []string {
	keys := make([]string, len(stream))
	for i := range stream {
		keys[i] = string(appendEventKey(nil, &stream[i]))
	}
	return keys
}

// BenchBucketHerald and BenchBucketXRate are the bodies of
// BenchmarkBucket: herald's inline token bucket against
// golang.org/x/time/rate, which client-go's spam filter uses, each making a
// fresh bucket for one event in 16, as a busy correlator does.
func BenchBucketHerald(b *testing.B) {
	start := time.Now()
	var bs [16]bucket
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % len(bs)
		if i%256 < 16 {
			bs[k].reset(DefaultBurstSize)
		}
		bs[k].allow(start.Add(time.Duration(i)*time.Second), DefaultQPS, DefaultBurstSize)
		i++
	}
}

func BenchBucketXRate(b *testing.B) {
	start := time.Now()
	var bs [16]*rate.Limiter
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % len(bs)
		if i%256 < 16 {
			bs[k] = rate.NewLimiter(DefaultQPS, DefaultBurstSize)
		}
		bs[k].AllowN(start.Add(time.Duration(i)*time.Second), 1)
		i++
	}
}

// TestBucketMatchesXRate replays random times, rates and bursts through a
// bucket and a rate.Limiter: every decision must match.
func TestBucketMatchesXRate(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for trial := range 200 {
		limit := []float64{DefaultQPS, float64(float32(DefaultQPS)), 1, 0.5, 10, 0, math.MaxFloat64}[trial%7]
		burst := []int{25, 1, 3, 0}[trial%4]
		var bk bucket
		bk.reset(burst)
		lim := rate.NewLimiter(rate.Limit(limit), burst)
		now := start
		for i := range 500 {
			switch rng.IntN(4) {
			case 0:
				now = now.Add(time.Duration(rng.IntN(600)) * time.Second)
			case 1:
				now = now.Add(time.Duration(rng.Int64N(int64(time.Second))))
			case 2:
				now = now.Add(-time.Duration(rng.IntN(10)) * time.Second) // backwards
			}
			if got, want := bk.allow(now, limit, burst), lim.AllowN(now, 1); got != want {
				t.Fatalf("trial %d (limit %v, burst %d), step %d: bucket %v, rate.Limiter %v", trial, limit, burst, i, got, want)
			}
		}
	}
}

// RaceEnabled reports whether the race detector is on (allocation counts
// differ under it).
const RaceEnabled = raceEnabled

// CaptureLostReports sends the lines that say a report was lost to a buffer
// until the returned function is called, which returns them.
func CaptureLostReports() (stop func() string) {
	var buf strings.Builder
	lostReports = &buf
	return func() string {
		lostReports = os.Stderr
		return buf.String()
	}
}

// Workers returns the number of workers b keeps.
func Workers(b *Broadcaster) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.workers)
}
