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
	read   harnessRead
	start  string // "Watch", "WatchWithPrefix" or "WatchFrom"
}

// harnessRead is a read path: All (C() never called), C (called as soon as
// the watcher is registered), or C called only to read (after the values
// are queued). All three hold the same values (guarantee 3).
type harnessRead struct {
	name  string
	early bool // C() called before anything is published to the watcher
	rp    readPath
}

var harnessReads = []harnessRead{
	{"All", false, readPaths[1]},
	{"C", true, readPaths[0]},
	{"C-late", false, readPaths[0]},
}

const (
	harnessQueue = 3 // the watcher's queue length
	harnessPub   = 7 // values published while it does not read: 1..7
)

// want is what a watcher that never reads holds once harnessPub values were
// published (Block: as many as were accepted), how many it dropped, how
// many were published to it (through the one that evicted it, for Evict),
// and why, per the package doc's guarantees.
func (hc harnessCase) want() (held []int, dropped uint64, published, publishedTo int, reason string) {
	var head []int
	switch hc.start {
	case "WatchWithPrefix":
		head = []int{-2, -1}
	case "WatchFrom":
		head = []int{-2, -1} // the kept values published before it, replayed
	}
	// room is how many live values it takes before it is full: its queue
	// length on every read path.
	room := harnessQueue
	why := " (" + hc.read.name + ")"
	first := testutil.Seq(1, room+1)
	switch hc.policy.String() {
	case "Drop", "BlockFor(1s)":
		held = append(head, first...)
		return held, uint64(harnessPub - room), harnessPub, harnessPub, "guarantee 3: a full Drop (or expired BlockFor) watcher keeps the first values; 5/9: the prefix or replay is never dropped and does not count" + why
	case "DropOldest":
		if hc.read.early && len(head) > 0 {
			// Through C(), while the prefix or replay is unread in front of
			// the live values, the new value is dropped instead (Watcher.C).
			held = append(head, first...)
			return held, uint64(harnessPub - room), harnessPub, harnessPub, "guarantee 3 through C(): DropOldest behind an unread prefix or replay drops the new value, never a prefix or replayed one" + why
		}
		held = append(head, testutil.Seq(harnessPub-harnessQueue+1, harnessPub+1)...)
		return held, uint64(harnessPub - room), harnessPub, harnessPub, "guarantee 3: DropOldest keeps the last values, never a prefix or replayed one" + why
	case "Block":
		held = append(head, first...)
		return held, 0, room, room, "guarantee 4: nothing is lost; a TryPublish finds it full and refuses" + why
	case "Evict":
		held = append(head, first...)
		return held, 1, harnessPub, room + 1, "guarantee 10: the value that finds it full is dropped and ends it; it keeps what it holds" + why
	}
	panic("no case for " + hc.policy.String())
}

// TestContractHarness runs the guarantees that hold for every watcher over
// {policy, read path, start}: the registration barrier (1), a watcher that
// never reads holds exactly its queue length under its policy with every
// loss counted (3, 4, 10; the same through C() as through All()), the prefix or replay first and never dropped
// (5, 9), Stop releases a Publish waiting for it (4), sequence numbers and
// Err() (8, 11), and Shutdown leaves what it holds readable (6). Each case
// says which guarantee it checks.
func TestContractHarness(t *testing.T) {
	policies := []broadcast.Policy{broadcast.Drop, broadcast.DropOldest, broadcast.Block, broadcast.BlockFor(time.Second), broadcast.Evict}
	for _, p := range policies {
		for _, rd := range harnessReads {
			for _, start := range []string{"Watch", "WatchWithPrefix", "WatchFrom"} {
				hc := harnessCase{p, rd, start}
				t.Run(fmt.Sprintf("%v/%s/%s", p, rd.name, start), func(t *testing.T) {
					synctest.Test(t, hc.run)
				})
			}
		}
	}
}

func (hc harnessCase) run(t *testing.T) {
	held, dropped, published, publishedTo, reason := hc.want()
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
	if hc.read.early {
		w.C()
	}
	first := b.Stats().Published
	start := time.Now()
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
	// Only BlockFor waits: 1s for each value it drops.
	var waited time.Duration
	if hc.policy == broadcast.BlockFor(time.Second) {
		waited = time.Duration(dropped) * time.Second
	}
	if d := time.Since(start); d != waited {
		t.Errorf("publishing took %v, want %v (%s)", d, waited, reason)
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
		// Read what it holds first: Stop discards what All would read.
		got := hc.read.rp.take(t, w, len(held))
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
	var got []int
	var seqs []uint64
	switch {
	case hc.read.name == "All":
		shutdown(t, b)
		for s, v := range w.Seq() {
			got, seqs = append(got, v), append(seqs, s)
		}
	default:
		// Nothing reads while Shutdown runs; C() holds everything after
		// it, then is closed (guarantee 6).
		shutdown(t, b)
		got = testutil.Drain(t, w.C(), guard)
	}
	if d := diff(held, got); d != "" {
		t.Errorf("read (-want +got), %s:\n%s", reason, d)
	}
	if hc.policy != broadcast.Evict {
		publishedTo = int(b.Stats().Published - first)
	}
	if live := uint64(len(got) - 2*btoi(hc.start != "Watch")); live+w.Dropped() != uint64(publishedTo) {
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
