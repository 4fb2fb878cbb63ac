package broadcast

// The visits a publish pays to watchers that need them: applying a full
// watcher's policy, moving a segment the ring is about to overwrite into
// the watcher's own queue, and finding the full Block watchers to wait for.

import (
	"math"
	"runtime"
	"time"
)

// claimToLocked moves h to seq t (if it is behind), with a CAS, since All
// loops claim values without w.mu, and returns where h was: w has taken
// [returned, t) out of the ring.
func (w *Watcher[T]) claimToLocked(t uint64) uint64 {
	h := w.h.Load()
	for h < t && !w.h.CompareAndSwap(h, t) {
		h = w.h.Load()
	}
	return min(h, t)
}

// settleLocked copies w's ring segment [h, s) into pend, so that the ring
// may overwrite it or so that seq s can be skipped.
func (w *Watcher[T]) settleLocked(s uint64, r *ring[T]) {
	// All loops claim values with a CAS on h without w.mu: move h first,
	// then copy what we took.
	for h := w.claimToLocked(s); h < s; h++ {
		w.pend.push(item[T]{seq: h + 1, v: r.buf[h&r.mask]})
	}
	w.pendLen.Store(int64(w.pend.len()))
}

// evictLocked ends w, full for seq s under Evict: s is dropped (counted),
// w keeps what it holds, moved out of the ring into pend (its cursor goes
// past every sequence number, so that it reads nothing more from the ring),
// and ends as at Shutdown: its readers take what it holds, then its loops
// end and its channel closes. The caller unregisters it. Called by the
// committing publisher with b.mu and w.mu held.
func (w *Watcher[T]) evictLocked(s uint64, r *ring[T]) {
	w.drop()
	w.settleLocked(s, r)
	w.h.Store(math.MaxUint64)
	w.evicted = true
	if w.err == nil {
		w.err = ErrEvicted
	}
	w.end()
	w.b.unpark(w)
}

// discardOldestLocked removes w's oldest non-prefix value for DropOldest:
// from the front of its channel if that is where it is, else from pend or
// the head of the ring segment. It reports false if it found none it could
// take: the oldest is the one a forwarder holds in a blocked send, with
// nothing behind it outside the channel.
func (w *Watcher[T]) discardOldestLocked(s uint64) bool {
	if p := w.chp.Load(); p != nil && !w.chClosed {
		ch := *p
		held := w.held.Load()
		x := uint64(len(ch)) + uint64(held)
		np := w.npClaimed.Load()
		switch {
		case x > 0 && np >= x:
			// Everything in flight is non-prefix: the front is the oldest.
			// A blocked forwarder's value moves into the freed slot.
			select {
			case <-ch:
				return true
			default: // the channel is empty: a reader, or discards, emptied it
			}
			if held > 0 {
				// Then the oldest may be the value the forwarder holds, not
				// one in pend or the ring, which are newer: it is on its
				// way into the channel, which has room, and the send
				// completes as soon as the forwarder runs, which then
				// clears held before it takes w.mu. (Or the send completed
				// already and the value went the way of the channel's
				// others; held is cleared as soon as the forwarder runs.)
				// Wait for that, and take the value from the channel if it
				// is there; else the oldest is in pend or the ring. If Stop
				// or Shutdown's deadline calls the send off, the new value
				// is dropped instead (attendLocked).
				for w.held.Load() > 0 {
					select {
					case <-w.stopCh:
						return false
					case <-w.b.abort:
						return false
					default:
						runtime.Gosched()
					}
				}
				select {
				case <-ch:
					return true
				default:
				}
			}
		}
	}
	if np := int(w.pendLen.Load() - w.prefixLeft.Load()); np > 0 {
		w.pend.removeAt(int(w.prefixLeft.Load()))
		w.pendLen.Add(-1)
		return true
	}
	if h := w.h.Load(); h < s && w.h.CompareAndSwap(h, h+1) {
		return true // the oldest is the head of the ring segment
	}
	return false
}

// fullBlockers reports whether a Block or unexpired BlockFor watcher is
// full for seq s, marking each such watcher so that its reader (or
// forwarder) signals roomCh when it makes room, and returns the earliest
// BlockFor deadline among them (zero if none). Full watchers whose whole
// queue is in their C() channel cannot signal (nobody sees a receive from a
// full channel but a blocked sender), so they are put on b.direct instead:
// the publisher sends v to them itself. Called with b.mu held.
func (b *Broadcaster[T]) fullBlockers(s uint64, ws *waitState) (bool, time.Time) {
	if s < b.attn {
		return false, time.Time{}
	}
	full := false
	var deadline time.Time
	R := b.ringSize()
	for _, w := range b.watchers {
		if !w.policy.waits() || w.attnSeq(R) > s {
			continue
		}
		w.mu.Lock()
		w.roomWanted.Store(true)
		if w.h.Load() <= s && w.queuedLocked(s) >= w.queueLen && !ws.expired(w.policy) {
			if ws.start.IsZero() {
				ws.start = time.Now()
				ws.now = ws.start
			}
			if w.directLocked(s) {
				w.roomWanted.Store(false)
				b.direct = append(b.direct, w)
			} else {
				full = true
				if d := ws.deadline(w.policy); !d.IsZero() && (deadline.IsZero() || d.Before(deadline)) {
					deadline = d
				}
			}
		} else {
			w.roomWanted.Store(false)
		}
		w.mu.Unlock()
	}
	return full, deadline
}

// attend handles every watcher that needs it before seq s is written:
// full lossy watchers get their policy applied, watchers about to be lapped
// get their values copied out of the ring. It recomputes b.attn. Called with
// b.mu held, only when s >= b.attn, which is rare unless a watcher is full.
func (b *Broadcaster[T]) attend(s uint64, ws *waitState) {
	r := b.ring.Load()
	R := b.ringSize()
	next := uint64(math.MaxUint64)
	for i := 0; i < len(b.watchers); i++ {
		w := b.watchers[i]
		if w.attnSeq(R) <= s {
			w.mu.Lock()
			w.attendLocked(s, r, ws)
			evicted := w.evicted
			w.mu.Unlock()
			if evicted {
				b.remove(w) // moves the last watcher to i: visit i again
				i--
				continue
			}
		}
		next = min(next, w.attnSeq(R))
	}
	b.attn = next
}

// attendLocked applies w's policy if w is full for seq s, and copies its
// segment out of the ring if seq s would overwrite it. Called by the
// committing publisher with b.mu and w.mu held.
func (w *Watcher[T]) attendLocked(s uint64, r *ring[T], ws *waitState) {
	if w.h.Load() > s {
		return // the publisher already sent s to w directly (sendDirect)
	}
	if w.queuedLocked(s) >= w.queueLen {
		switch {
		case w.policy.kind == kindDropOldest:
			if w.discardOldestLocked(s) {
				w.drop()
				break
			}
			// Nothing older can be taken (it is in the forwarder's hands):
			// seq s is not queued for w, as under Drop.
			w.settleLocked(s, r)
			w.h.Store(s + 1)
			w.drop()
			return
		case w.policy.kind == kindEvict:
			w.evictLocked(s, r)
			return
		default:
			// Drop, or a Block/BlockFor watcher whose wait expired or was
			// given up: seq s is not queued for w.
			w.settleLocked(s, r)
			w.h.Store(s + 1)
			w.drop()
			return
		}
	}
	if R := uint64(len(r.buf)); s >= R && w.h.Load() <= s-R {
		w.settleLocked(s, r)
	}
}
