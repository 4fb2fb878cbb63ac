package events

import (
	"math"
	"time"
)

// bucket is the spam filter's token bucket for one source+object. It
// computes exactly what golang.org/x/time/rate's Limiter.AllowN(now, 1)
// computes, which client-go's filter calls (the fidelity module checks the
// decisions against client-go), without the Limiter's own mutex and
// allocation: the correlator's lock already guards it, and it lives inside
// the cache entry. DESIGN.md has the numbers.
type bucket struct {
	tokens float64
	last   time.Time
}

// reset makes b a full bucket, as rate.NewLimiter does.
func (b *bucket) reset(burst int) { *b = bucket{tokens: float64(burst)} }

// allow takes one token at now, if there is one.
func (b *bucket) allow(now time.Time, limit float64, burst int) bool {
	if limit == math.MaxFloat64 { // rate.Inf
		return true
	}
	elapsed := now.Sub(b.last)
	if elapsed < 0 { // now.Before(b.last), which Limiter treats as no time
		elapsed = 0
	}
	tokens := b.tokens + tokensFromDuration(limit, elapsed)
	if fb := float64(burst); tokens > fb {
		tokens = fb
	}
	tokens--
	var wait time.Duration
	if tokens < 0 {
		wait = durationFromTokens(limit, -tokens)
	}
	if burst < 1 || wait > 0 {
		return false
	}
	b.last, b.tokens = now, tokens
	return true
}

func tokensFromDuration(limit float64, d time.Duration) float64 {
	if limit <= 0 {
		return 0
	}
	return d.Seconds() * limit
}

func durationFromTokens(limit, tokens float64) time.Duration {
	if limit <= 0 {
		return math.MaxInt64
	}
	d := (tokens / limit) * float64(time.Second)
	if d > float64(math.MaxInt64) {
		return math.MaxInt64
	}
	return time.Duration(d)
}
