package events

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestNowFollowsTimeNow: now's monotonic reading lies between those of
// time.Now calls around it, and its wall reading within a few milliseconds
// of time.Now's (the machine's wall clock is not stepped during a test).
func TestNowFollowsTimeNow(t *testing.T) {
	clockBase.Store(nil)
	for i := range 2000 {
		before := time.Now()
		n := now()
		after := time.Now()
		if n.Before(before) || after.Before(n) {
			t.Fatalf("call %d: now %v not between %v and %v", i, n, before, after)
		}
		if d := n.Round(0).Sub(after.Round(0)); d > 0 || d < -50*time.Millisecond {
			t.Fatalf("call %d: now's wall clock is %v from time.Now's", i, d)
		}
		if i%500 == 0 {
			time.Sleep(time.Millisecond)
		}
	}
}

// TestNowInBubble: inside a synctest bubble now is time.Now exactly, whether
// its base was read outside the bubble, in the bubble, or more than a second
// ago; and a base read in a bubble does not leak its fake time out of it.
func TestNowInBubble(t *testing.T) {
	now() // a base read outside the bubble
	synctest.Test(t, func(t *testing.T) {
		for i, d := range []time.Duration{0, time.Nanosecond, time.Millisecond, 999 * time.Millisecond,
			time.Second, 1500 * time.Millisecond, 5 * time.Minute, 0} {
			time.Sleep(d)
			n, want := now(), time.Now()
			if n.UnixNano() != want.UnixNano() || !n.Equal(want) {
				t.Fatalf("step %d (+%v): now %v, time.Now %v", i, d, n, want)
			}
		}
		time.Sleep(2 * time.Second)
		now()
		if b := clockBase.Load(); b == nil || !b.Equal(time.Now()) {
			t.Fatalf("base %v not read again after more than a second (time.Now %v)", b, time.Now())
		}
	})
	if d := time.Since(now().Round(0)); d < 0 || d > time.Minute {
		t.Fatalf("outside the bubble, now is %v from time.Now: the bubble's base leaked", d)
	}
}

// BenchmarkNow compares now with time.Now, which it replaces as the default
// clock.
func BenchmarkNow(b *testing.B) {
	var sink time.Time
	b.Run("now", func(b *testing.B) {
		for b.Loop() {
			sink = now()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			sink = time.Now()
		}
	})
	_ = sink
}
