package broadcast

import (
	"testing"
	"testing/synctest"
)

// Tests of the parked list (park.go): a loop that keeps up stays on it
// without pushing itself again, and a loop busy in its body is let go.

// listed returns the waiters on b's parked list, top first. Called when
// no waker runs (inside a bubble, after synctest.Wait).
func (b *Broadcaster[T]) listed() []*waiter[T] {
	var ns []*waiter[T]
	for n := b.parked.Load(); n != nil; n = n.next {
		ns = append(ns, n)
	}
	return ns
}

// An All loop that waits again after each value is kept on the list by
// the wake-up (the same waiter, once, armed again); one that does not wait
// again (busy in its loop body) is let go by the next wake-up, so that a
// publish never visits a loop that is not waiting twice; and it puts
// itself back when it waits again.
func TestParkedLoopKeptWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := New[int]()
		w, err := b.Watch()
		if err != nil {
			t.Fatal(err)
		}
		busy, release := make(chan struct{}), make(chan struct{})
		done := make(chan struct{})
		var got []int
		go func() {
			defer close(done)
			for v := range w.All() {
				got = append(got, v)
				if v == 2 {
					close(busy)
					<-release
				}
			}
		}()
		synctest.Wait()
		want := func(step string, n int, st uint32) *waiter[int] {
			t.Helper()
			ns := b.listed()
			if len(ns) != n {
				t.Errorf("%s: %d waiters on the list, want %d", step, len(ns), n)
			}
			if len(ns) == 0 {
				return nil
			}
			if s := ns[0].state.Load(); s != st {
				t.Errorf("%s: state %b, want %b", step, s, st)
			}
			return ns[0]
		}
		first := want("parked", 1, listed|armed)

		publish := func(v int) {
			t.Helper()
			if err := b.Publish(v); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
		}
		for v := range 2 {
			publish(v)
			if n := want("kept after a value", 1, listed|armed); n != first {
				t.Error("the loop pushed a new waiter")
			}
		}
		publish(2) // taken in the loop body, which then blocks
		<-busy
		want("kept while busy", 1, listed)
		publish(3)
		want("let go while busy", 0, 0)
		close(release)
		synctest.Wait()
		if n := want("back after the body", 1, listed|armed); n != first {
			t.Error("the loop pushed a new waiter")
		}
		w.Stop()
		<-done
		if len(got) != 4 {
			t.Errorf("got %v, want 0..3", got)
		}
	})
}
