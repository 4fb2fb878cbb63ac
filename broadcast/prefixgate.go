package broadcast

import "time"

// The prefix gate: under DropOldest, a C() forwarder holds live values
// back while prefix values are unread in the channel, and polls for the
// reader to take them.

// How often a DropOldest forwarder looks whether its reader has taken the
// prefix (prefixGateLocked): from 50µs, doubling up to 10ms while it has not.
const (
	minPrefixPoll = 50 * time.Microsecond
	maxPrefixPoll = 10 * time.Millisecond
)

// prefixPoll is the forwarder's wait for a reader to take the prefix
// (prefixGateLocked): from minPrefixPoll, doubling up to maxPrefixPoll.
type prefixPoll struct {
	timer *time.Timer
	next  time.Duration
}

func (p *prefixPoll) wait(stop, done <-chan struct{}) {
	if p.next == 0 {
		p.next = minPrefixPoll
	}
	if p.timer == nil {
		p.timer = time.NewTimer(p.next)
	} else {
		p.timer.Reset(p.next)
	}
	select {
	case <-p.timer.C:
	case <-stop:
	case <-done:
	}
	p.next = min(2*p.next, maxPrefixPoll)
}

func (p *prefixPoll) reset() { p.next = minPrefixPoll }

func (p *prefixPoll) stop() {
	if p.timer != nil {
		p.timer.Stop()
	}
}

// prefixGateLocked reports whether the forwarder must hold the non-prefix
// values back: under DropOldest, while prefix values are unread in the
// channel. DropOldest discards the oldest non-prefix value, and a value in
// a channel behind others cannot be taken out while a reader receives from
// the front; kept outside the channel until the prefix is read, it can.
// The forwarder polls for that (see forward); after Shutdown there is
// nothing more to discard, so it does not wait.
func (w *Watcher[T]) prefixGateLocked() bool {
	return w.policy.kind == kindDropOldest && w.prefixLen > 0 && !w.ended &&
		w.prefixLeft.Load() == 0 && w.npClaimed.Load() == 0 && len(w.ch) > 0 &&
		(w.pend.len() > 0 || w.h.Load() < w.b.seq())
}
