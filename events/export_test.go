package events

import (
	"testing"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// BenchCacheHerald and BenchCacheHashicorp are the bodies of
// BenchmarkCache (bench_test.go, in package events_test so that it can use
// eventstest).
func BenchCacheHerald(b *testing.B, stream []Event) {
	keys := logKeys(stream)
	corr := NewCorrelator(CorrelatorOptions{})
	c := newLRU[logKey, logRecord](DefaultLRUCacheSize)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		j := i % len(keys)
		r, _ := c.touch(keys[j], corr.eventHash(&stream[j]))
		r.count++
		i++
	}
}

func BenchCacheHashicorp(b *testing.B, stream []Event) {
	keys := logKeys(stream)
	c, _ := simplelru.NewLRU[logKey, *logRecord](DefaultLRUCacheSize, nil)
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

func logKeys(stream []Event) []logKey {
	keys := make([]logKey, len(stream))
	for i := range stream {
		keys[i] = eventKeyOf(&stream[i])
	}
	return keys
}
