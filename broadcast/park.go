package broadcast

import "sync/atomic"

// A waiter is one goroutine waiting for values of a watcher: an All loop
// (a read loop of All or Seq). While it waits it is on the broadcaster's
// parked list, and the next publish wakes it. A C() forwarder that is not
// running is on the list as a waiter with start set, its starter: the
// wake-up hands the new values over to its channel (deliver).
//
// The parked list is a lock-free stack: a waiter is pushed once and stays
// on the stack, or on the chain of a waker that took the stack with one
// swap, until a waker lets it go. Nothing is ever taken off the stack but
// by a waker, so a waiter that found a value after it parked stays on it
// and later gets a token it does not need: one more look at its watcher,
// never a lost wake-up.
//
// A waker keeps on the list (on its chain, pushed with one CAS) the
// starters whose channel took the values and the loops that waited since
// the previous wake-up (armed): a loop that keeps up waits again right
// after it read the value, and finds itself still on the list, without a
// CAS on the stack's head, which every parking loop would share. A loop
// that did not wait since is busy reading: the waker lets it go, and it
// pushes itself the next time it waits.
type waiter[T any] struct {
	wake  chan struct{} // cap 1: the token a waker leaves
	start *Watcher[T]   // deliver to this watcher's channel instead of waking
	next  *waiter[T]    // the stack's link; written by whoever pushes n
	// A starter's place on the list: set when it is parked, cleared by
	// deliver, both under its watcher's mu.
	parked bool
	// A loop's place on the list (listed) and whether it waited since a
	// waker last took it (armed): the loop sets armed, a waker clears both
	// bits or armed alone. Only the loop sets listed, and only when it is
	// clear: no waker has n then.
	state atomic.Uint32
}

// The bits of waiter.state.
const (
	listed = 1 // on the stack or on a waker's chain
	armed  = 2 // the loop waited since a waker last took it
)

func newWaiter[T any]() *waiter[T] {
	return &waiter[T]{wake: make(chan struct{}, 1)}
}

// park puts the starter n on the parked list, unless it is there already.
// Called with n's watcher's mu held.
func (b *Broadcaster[T]) park(n *waiter[T]) {
	if n.parked {
		return
	}
	n.parked = true
	b.push(n, n)
}

// arm is how the loop that owns n parks: it marks n armed, and pushes it
// unless a waker still has it (listed). A waker that takes n after this
// keeps it listed and leaves a token.
func (b *Broadcaster[T]) arm(n *waiter[T]) {
	if n.state.Or(armed)&listed == 0 {
		n.state.Store(listed | armed) // no waker has n: nobody else writes state
		b.push(n, n)
	}
}

// keep is a waker's decision for the loop n it took off the list: keep it
// listed, disarmed, if it waited since the last wake-up; otherwise let it
// go.
func (n *waiter[T]) keep() bool {
	for {
		s := n.state.Load()
		var to uint32
		if s&armed != 0 {
			to = listed
		}
		if n.state.CompareAndSwap(s, to) {
			return to != 0
		}
	}
}

// push puts the chain top..bottom (linked by next, bottom's link about to
// be set) on the parked list with one CAS.
func (b *Broadcaster[T]) push(top, bottom *waiter[T]) {
	for {
		h := b.parked.Load()
		bottom.next = h
		if b.parked.CompareAndSwap(h, top) {
			return
		}
	}
}

// wakeParked wakes every parked waiter. Publishers call it after each
// commit (one atomic load when nobody is parked), Stop and Shutdown so
// that no stopped watcher stays referenced from the list.
//
// The waiters a wake-up keeps (starters whose channel took the new
// values, armed loops) go back on the list not one by one: wakeParked
// chains them and pushes the chain with one CAS, then looks at the tail.
// Each starter found nothing more queued under its watcher's mu, and each
// loop looks after its token, with the tail at t0 or later; if the tail
// is still t0 after the push, every later commit stores its tail after
// the push and finds the chain on the stack. If it moved, a commit may
// have taken the stack before the chain was on it: wakeParked goes round
// again.
func (b *Broadcaster[T]) wakeParked() {
	for b.parked.Load() != nil {
		t0 := b.tail()
		again := b.wakeAll()
		if again.top == nil {
			return
		}
		b.push(again.top, again.bottom)
		if b.tail() == t0 {
			return
		}
	}
}

// wakeAll takes the whole stack and wakes each waiter: a loop gets a
// token, a starter's watcher gets the new values (deliver). It returns the
// waiters it keeps on the list (keep, handOverLocked), to push again.
func (b *Broadcaster[T]) wakeAll() chain[T] {
	var again chain[T]
	for n := b.parked.Swap(nil); n != nil; {
		// Read the link before n may be pushed again, which rewrites it:
		// before a starter's deliver, before a loop's token.
		next := n.next
		n.next = nil
		if n.start != nil {
			n.start.deliver(&again)
		} else {
			// Kept before the token: the loop that takes it finds
			// itself listed when it waits again.
			if n.keep() {
				again.link(n)
			}
			select {
			case n.wake <- struct{}{}:
			default:
			}
		}
		n = next
	}
	return again
}

// chain is the waiters one wakeParked keeps on the list, pushed with one
// CAS.
type chain[T any] struct{ top, bottom *waiter[T] }

// add parks the starter n on c. Called with n's watcher's mu held.
func (c *chain[T]) add(n *waiter[T]) {
	n.parked = true
	c.link(n)
}

// link puts n on c.
func (c *chain[T]) link(n *waiter[T]) {
	n.next = c.top
	c.top = n
	if c.bottom == nil {
		c.bottom = n
	}
}
