package broadcast

// A waiter is one goroutine waiting for values of a watcher: an All loop or
// a C() forwarder. While it waits it is on the broadcaster's parked list,
// and the next publish wakes it. A forwarder that has not started yet is
// on the list as a waiter with start set: the wake-up hands the new values
// over to its channel (deliver).
//
// The parked list is a lock-free stack: a waiter pushes itself once (its
// parked flag), and a waker takes the whole stack with one swap. Nothing
// is ever taken off the stack but by a waker, so a waiter that found a
// value after it parked stays on it and later gets a token it does not
// need: one more look at its watcher, never a lost wake-up.
type waiter[T any] struct {
	wake  chan struct{} // cap 1: the token a waker leaves
	start *Watcher[T]   // deliver to this watcher's channel instead of waking
	next  *waiter[T]    // the stack's link; written by the waiter before its push
	// On the stack, or on a list a waker took; set by park, which pushes
	// n. A loop's flag is its own: cleared when it receives the token
	// (wakers take a waiter off the stack and then leave it a token, one
	// for one, so a loop never receives a token while it is on a list). A
	// starter's is guarded by its watcher's mu: parked under it, cleared
	// by deliver under it.
	parked bool
}

func newWaiter[T any]() *waiter[T] {
	return &waiter[T]{wake: make(chan struct{}, 1)}
}

// park puts n on the parked list, unless it is there already. Called by
// the loop that owns n, or, for a starter, with its watcher's mu held.
func (b *Broadcaster[T]) park(n *waiter[T]) {
	if n.parked {
		return
	}
	n.parked = true
	b.push(n, n)
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
// A starter whose channel took the new values is parked again, but not
// one by one: wakeParked chains them and pushes the chain with one CAS,
// then looks at the tail. Each starter found nothing more queued under
// its watcher's mu, with the tail at t0 or later; if the tail is still t0
// after the push, every later commit stores its tail after the push and
// finds the chain on the stack. If it moved, a commit may have taken the
// stack before the chain was on it: wakeParked goes round again.
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
// starters to park again.
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
			select {
			case n.wake <- struct{}{}:
			default:
			}
		}
		n = next
	}
	return again
}

// chain is the starters one wakeParked parks again, pushed with one CAS.
type chain[T any] struct{ top, bottom *waiter[T] }

// add parks the starter n on c. Called with n's watcher's mu held.
func (c *chain[T]) add(n *waiter[T]) {
	n.parked = true
	n.next = c.top
	c.top = n
	if c.bottom == nil {
		c.bottom = n
	}
}
