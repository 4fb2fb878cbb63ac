package events_test

import (
	"testing"

	. "github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/events/eventstest"
)

func BenchmarkSmallStream(b *testing.B) {
	s := eventstest.MixedStream(64, 1)
	c := NewCorrelator(CorrelatorOptions{})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c.Correlate(&s[i%len(s)])
		i++
	}
}
