package broadcast_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// harnessCase is one cell of the contract harness: a policy, a read path,
// and how the watcher starts (plain, with a prefix, or replaying history).
type harnessCase struct {
	policy broadcast.Policy
	read   readPath
	start  string // "Watch", "WatchWithPrefix" or "WatchFrom"
}

const (
	harnessQueue = 3 // the watcher's queue length
	harnessPub   = 7 // values published while it does not read: 1..7
)

// want is what a watcher that never reads holds once harnessPub values were
// published (Block: as many as were accepted), how many it dropped, and
// why, per the package doc's guarantees.
func (hc harnessCase) want() (held []int, dropped uint64, published int, reason string) {
	var head []int
	switch hc.start {
	case "WatchWithPrefix":
		head = []int{-2, -1}
	case "WatchFrom":
		head = []int{-2, -1} // the kept values published before it, replayed
	}
	switch hc.policy.String() {
	case "Drop", "BlockFor(1s)":
		held = append(head, 1, 2, 3)
		return held, harnessPub - harnessQueue, harnessPub, "guarantee 3: a full Drop (or expired BlockFor) watcher keeps the first values; 5/9: the prefix or replay is never dropped and does not count"
	case "DropOldest":
		held = append(head, harnessPub-2, harnessPub-1, harnessPub)
		return held, harnessPub - harnessQueue, harnessPub, "guarantee 3: DropOldest keeps the last values, never a prefix or replayed one"
	case "Block":
		held = append(head, 1, 2, 3)
		return held, 0, harnessQueue, "guarantee 4: nothing is lost; a TryPublish finds it full and refuses"
	case "Evict":
		held = append(head, 1, 2, 3)
		return held, 1, harnessPub, "guarantee 10: the value that finds it full is dropped and ends it; it keeps what it holds"
	}
	panic("no case for " + hc.policy.String())
}

// TestContractHarness runs the guarantees that hold for every watcher over
// {policy, read path, start}: the registration barrier (1), a watcher that
// never reads holds exactly its queue length under its policy with every
// loss counted (3, 4, 10), the prefix or replay first and never dropped
// (5, 9), Stop releases a Publish waiting for it (4), sequence numbers and
// Err() (8, 11), and Shutdown leaves what it holds readable (6). Each case
// says which guarantee it checks.
func TestContractHarness(t *testing.T) {
	policies := []broadcast.Policy{broadcast.Drop, broadcast.DropOldest, broadcast.Block, broadcast.BlockFor(time.Second), broadcast.Evict}
	for _, p := range policies {
		for _, rp := range readPaths {
			for _, start := range []string{"Watch", "WatchWithPrefix", "WatchFrom"} {
				hc := harnessCase{p, rp, start}
				t.Run(fmt.Sprintf("%v/%s/%s", p, rp.name, start), func(t *testing.T) {
					synctest.Test(t, hc.run)
				})
			}
		}
	}
}

func (hc harnessCase) run(t *testing.T) {
	held, dropped, published, reason := hc.want()
	b := newB(t, broadcast.WithHistory(2))
	publish(t, b, -3, -2, -1) // before Watch: only WatchFrom may see them (replaying the 2 kept)
	opts := with(hc.policy, harnessQueue)
	var w *broadcast.Watcher[int]
	var err error
	switch hc.start {
	case "Watch":
		w, err = b.Watch(opts...)
	case "WatchWithPrefix":
		w, err = b.WatchWithPrefix([]int{-2, -1}, opts...)
	case "WatchFrom":
		w, err = b.WatchFrom(0, opts...)
	}
	if err != nil {
		t.Fatalf("%s: %v", hc.start, err)
	}
	first := b.Stats().Published
	for v := 1; v <= harnessPub; v++ {
		if v > published {
			// Block: full. TryPublish refuses; a Publish waits until Stop.
			if ok, err := b.TryPublish(v); ok || err != nil {
				t.Fatalf("TryPublish(%d) with the Block watcher full = (%v, %v), want (false, nil): %s", v, ok, err, reason)
			}
			continue
		}
		publish(t, b, v)
	}
	checkDropped(t, "w", w, dropped)
	if got := w.Len(); got != len(held) {
		t.Errorf("Len() = %d, want %d (%s)", got, len(held), reason)
	}
	if hc.policy == broadcast.Evict && !errors.Is(w.Err(), broadcast.ErrEvicted) {
		t.Errorf("Err() = %v, want ErrEvicted (%s)", w.Err(), reason)
	}
	if hc.policy == broadcast.Block {
		waiting := async(func() error { return b.Publish(100) })
		synctest.Wait()
		if _, ok := returned(waiting); ok {
			t.Fatalf("Publish returned with the Block watcher full (%s)", reason)
		}
		// Read what it holds first: Stop discards what is not in C()'s buffer.
		got := hc.read.take(t, w, len(held))
		if d := diff(held, got); d != "" {
			t.Errorf("read (-want +got), %s:\n%s", reason, d)
		}
		synctest.Wait()
		if _, ok := returned(waiting); !ok {
			t.Fatal("Publish still waits after the Block watcher read its queue")
		}
		w.Stop()
		return
	}
	shutdown(t, b)
	var got []int
	var seqs []uint64
	if hc.read.name == "All" {
		for s, v := range w.Seq() {
			got, seqs = append(got, v), append(seqs, s)
		}
	} else {
		got = testutil.Drain(t, w.C(), guard)
	}
	if d := diff(held, got); d != "" {
		t.Errorf("read (-want +got), %s:\n%s", reason, d)
	}
	publishedTo := b.Stats().Published - first
	if hc.policy == broadcast.Evict {
		publishedTo = harnessQueue + 1 // nothing reaches it after the value that evicted it
	}
	if live := uint64(len(got) - 2*btoi(hc.start != "Watch")); live+w.Dropped() != publishedTo {
		t.Errorf("received %d live values + Dropped() %d != %d published to it (guarantee 3)", live, w.Dropped(), publishedTo)
	}
	for i, s := range seqs {
		var want uint64
		switch v := got[i]; {
		case v > 0:
			want = first + uint64(v)
		case hc.start == "WatchFrom":
			want = uint64(v + 4) // -2 and -1 were published 2nd and 3rd
		}
		if s != want {
			t.Errorf("value %d has sequence number %d, want %d (guarantee 8)", got[i], s, want)
		}
	}
	wantErr := broadcast.ErrClosed
	if hc.policy == broadcast.Evict {
		wantErr = broadcast.ErrEvicted
	}
	if !errors.Is(w.Err(), wantErr) {
		t.Errorf("Err() after Shutdown = %v, want %v (guarantee 11: the first cause is kept)", w.Err(), wantErr)
	}
	if !slices.Contains(held, got[len(got)-1]) {
		t.Errorf("last value %d not among those held", got[len(got)-1])
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
