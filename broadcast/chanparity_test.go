package broadcast_test

import (
	"context"
	"iter"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// Side by side with a plain Go channel (issue 27): a watcher of queue
// length N behaves as a buffered channel of capacity N written by one
// goroutine, under Block as the plain `ch <- v`, under Drop and DropOldest
// as what a user writes by hand for them (chanDrop, chanDropOldest). The
// same input goes through both; nothing reads until the writer is done:
// the channel is closed, the broadcaster shut down (guarantee 6: Shutdown
// waits for no reader). Then both are read to their end, one value at a
// time: the same values in the same order, then the end (a closed channel,
// a closed C(), an All() loop that ends), with Len() == len(ch) and
// Dropped() == the hand-kept count at every step (guarantee 3).

// chanSend is what a user writes to put v into ch under a policy; it
// reports whether a value was lost.
type chanSend func(ch chan int, v int) (lost bool)

// chanBlock is the plain send: it waits for room (the cases below never
// fill the channel, as nothing reads until the end).
func chanBlock(ch chan int, v int) bool {
	ch <- v
	return false
}

// chanDrop is the usual non-blocking send: a full channel loses v.
func chanDrop(ch chan int, v int) bool {
	select {
	case ch <- v:
		return false
	default:
		return true
	}
}

// chanDropOldest keeps the latest: while the channel is full, drain one
// value, then send.
func chanDropOldest(ch chan int, v int) (lost bool) {
	for {
		select {
		case ch <- v:
			return lost
		default:
		}
		select {
		case <-ch:
			lost = true
		default:
		}
	}
}

// pullC reads a channel one value at a time, as pull does an iterator.
func pullC(c <-chan int) func() (int, bool) {
	return func() (int, bool) { v, ok := <-c; return v, ok }
}

func TestChannelParity(t *testing.T) {
	cases := []struct {
		name   string
		policy broadcast.Policy
		send   chanSend
		n      int   // queue length and channel capacity
		input  []int // published and sent, in order
		want   []int // what both yield
		reason string
	}{
		{"Block, full", broadcast.Block, chanBlock, 3, []int{1, 2, 3}, []int{1, 2, 3},
			"a full buffered channel closed with nothing reading still yields all it holds; so does a full Block watcher after Shutdown (issue 27: through C() it lost most of them)"},
		{"Block, room left", broadcast.Block, chanBlock, 5, []int{1, 2}, []int{1, 2},
			"with room left, both yield what was sent and end at once, nothing waits for the rest"},
		{"Block, capacity 1", broadcast.Block, chanBlock, 1, []int{7}, []int{7},
			"the smallest queue: issue 27: C()'s channel was unbuffered at queue length 1 and nothing survived Shutdown"},
		{"Block, nothing sent", broadcast.Block, chanBlock, 4, nil, nil,
			"a closed empty channel ends a range at once; so does a watcher with nothing queued after Shutdown"},
		{"Drop, overflow", broadcast.Drop, chanDrop, 3, []int{1, 2, 3, 4, 5, 6, 7, 8}, []int{1, 2, 3},
			"Drop is select with default: the first N stay, every later value is lost and counted"},
		{"Drop, exactly full", broadcast.Drop, chanDrop, 3, []int{1, 2, 3}, []int{1, 2, 3},
			"filling the channel to its capacity loses nothing"},
		{"DropOldest, overflow", broadcast.DropOldest, chanDropOldest, 3, []int{1, 2, 3, 4, 5, 6, 7, 8}, []int{6, 7, 8},
			"DropOldest is drain one, then send: the last N stay (issue 27: through C() the oldest stuck)"},
		{"DropOldest, capacity 1", broadcast.DropOldest, chanDropOldest, 1, []int{1, 2, 3, 4}, []int{4},
			"with one place, only the latest value is kept"},
	}
	paths := []struct {
		name string
		pull func(w *broadcast.Watcher[int]) (next func() (int, bool), stop func())
	}{
		{"C", func(w *broadcast.Watcher[int]) (func() (int, bool), func()) {
			return pullC(w.C()), func() {}
		}},
		{"All", func(w *broadcast.Watcher[int]) (func() (int, bool), func()) {
			return iter.Pull(w.All())
		}},
	}
	for _, tc := range cases {
		for _, path := range paths {
			t.Run(tc.name+"/"+path.name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					b := newB(t)
					w := watch(t, b, with(tc.policy, tc.n)...)
					if path.name == "C" && cap(w.C()) != tc.n {
						t.Fatalf("cap(C()) = %d, want %d as the channel's", cap(w.C()), tc.n)
					}
					ch := make(chan int, tc.n)
					var lost uint64
					same := func(when string) {
						t.Helper()
						if w.Len() != len(ch) || w.Dropped() != lost {
							t.Errorf("%s: Len() %d, Dropped() %d; the channel: len %d, %d lost (%s)", when, w.Len(), w.Dropped(), len(ch), lost, tc.reason)
						}
					}
					for _, v := range tc.input {
						if tc.send(ch, v) {
							lost++
						}
						publish(t, b, v)
						same("after sending " + strconv.Itoa(v))
					}
					close(ch)
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					start := time.Now()
					if err := b.Shutdown(ctx); err != nil {
						t.Errorf("Shutdown with nothing reading = %v, want nil, as close(ch) (%s)", err, tc.reason)
					}
					if d := time.Since(start); d != 0 {
						t.Errorf("Shutdown took %v; close(ch) waits for nobody", d)
					}
					same("after close and Shutdown")

					next, stop := path.pull(w)
					defer stop()
					var fromCh, fromW []int
					for i := 0; ; i++ {
						cv, cok := <-ch
						wv, wok := next()
						if cok != wok || cv != wv {
							t.Fatalf("read %d: the channel gave (%d, %v), the watcher (%d, %v) (%s)", i, cv, cok, wv, wok, tc.reason)
						}
						if !cok {
							break
						}
						fromCh, fromW = append(fromCh, cv), append(fromW, wv)
						same("after read " + strconv.Itoa(i))
					}
					if d := diff(tc.want, fromCh); d != "" {
						t.Errorf("the channel yielded (-want +got):\n%s", d)
					}
					if d := diff(tc.want, fromW); d != "" {
						t.Errorf("the watcher yielded (-want +got):\n%s(%s)", d, tc.reason)
					}
					// Both stay ended: a closed channel keeps answering.
					if _, ok := next(); ok {
						t.Error("the watcher yielded a value after its end")
					}
					if st := b.Stats(); st.Dropped != lost || st.Published != uint64(len(tc.input)) {
						t.Errorf("Stats() = %+v, want Published %d, Dropped %d as the hand-kept count", st, len(tc.input), lost)
					}
				})
			})
		}
	}
}
