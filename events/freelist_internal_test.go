package events

import "testing"

// TestFreeListBounds: what workers hand over comes back out, each event
// once, and the list keeps no more than maxFreeBatches batches: a worker's
// batch beyond that goes to the garbage collector, and the worker gets an
// empty batch to fill either way.
func TestFreeListBounds(t *testing.T) {
	var f freeList
	if f.get() != nil {
		t.Fatal("an empty list gave an event")
	}
	handed := map[*recorded]bool{}
	batch := []*recorded(nil)
	for range (maxFreeBatches + 3) * freeBatch {
		r := new(recorded)
		handed[r] = true
		batch = append(batch, r)
		if len(batch) == freeBatch {
			batch = f.put(batch)
			if len(batch) != 0 || cap(batch) < freeBatch {
				t.Fatalf("put returned a batch of length %d, capacity %d", len(batch), cap(batch))
			}
		}
	}
	if got := f.avail.Load(); got != maxFreeBatches*freeBatch {
		t.Fatalf("avail %d after %d batches, want %d", got, maxFreeBatches+3, maxFreeBatches*freeBatch)
	}
	got := map[*recorded]bool{}
	for {
		r := f.get()
		if r == nil {
			break
		}
		if !handed[r] || got[r] {
			t.Fatalf("get gave %p: handed over %v, given before %v", r, handed[r], got[r])
		}
		got[r] = true
	}
	if len(got) != maxFreeBatches*freeBatch || f.avail.Load() != 0 {
		t.Fatalf("got %d events back, avail %d; want %d, 0", len(got), f.avail.Load(), maxFreeBatches*freeBatch)
	}
	// The emptied batches are reused: handing over a batch of events and
	// taking them all again allocates no batch. (The list is empty here,
	// so every put is taken, and every get that empties a batch keeps it
	// for the next put.)
	events := make([]*recorded, freeBatch)
	for i := range events {
		events[i] = new(recorded)
	}
	round := func() {
		batch = append(batch[:0], events...)
		batch = f.put(batch)
		n := 0
		for f.get() != nil {
			n++
		}
		if n != freeBatch {
			t.Fatalf("got %d events back of a batch of %d", n, freeBatch)
		}
	}
	round() // the first round may make the spare batch
	if allocs := testing.AllocsPerRun(100, round); allocs != 0 {
		t.Errorf("a round of put and get allocated %v times, want 0", allocs)
	}
}
