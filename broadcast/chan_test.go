package broadcast_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/internal/testutil"
)

// TestQueueReadableAfterShutdown: guarantees 3 and 6 on both read paths. A
// watcher nobody reads holds exactly its queue length, the same values
// through C() as through All(), Len() counts exactly those, and Shutdown,
// with nothing reading while it runs, returns nil within its deadline and
// leaves every one of them readable; then C() is closed and All() ends.
func TestQueueReadableAfterShutdown(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  broadcast.Policy
		qlen    int
		publish int
		want    []int // what the watcher holds, in order
		dropped uint64
		// why this case is here
		reason string
	}{
		{"Block, queue 100", broadcast.Block, 100, 100, testutil.Seq(0, 100), 0,
			"issue 27: through C() only 63 of 100 survived a Shutdown nobody read through, 37 counted dropped"},
		{"Block, queue 1", broadcast.Block, 1, 1, []int{0}, 0,
			"issue 27: with queue length 1 C()'s channel had no buffer and nothing survived"},
		{"Drop, queue 10, 30 published", broadcast.Drop, 10, 30, testutil.Seq(0, 10), 20,
			"Drop keeps the first values, as many as the queue length, on both paths"},
		{"DropOldest, queue 10, 30 published", broadcast.DropOldest, 10, 30, testutil.Seq(20, 30), 20,
			"issue 27: through C() DropOldest kept value 1 and then 21..28, the oldest held by the forwarder"},
		{"Evict, queue 10, 30 published", broadcast.Evict, 10, 30, testutil.Seq(0, 10), 1,
			"an evicted watcher keeps what it held, readable after Shutdown; the value that found it full is counted, later ones are not for it"},
	} {
		for _, path := range []string{"C", "All"} {
			t.Run(tc.name+"/"+path, func(t *testing.T) {
				b := broadcast.New[int]()
				w, err := b.Watch(broadcast.WithPolicy(tc.policy), broadcast.WithQueueLength(tc.qlen))
				if err != nil {
					t.Fatal(err)
				}
				var ch <-chan int
				if path == "C" {
					ch = w.C()
				}
				for i := range tc.publish {
					if err := b.Publish(i); err != nil {
						t.Fatalf("Publish(%d): %v", i, err)
					}
				}
				if got := w.Len(); got != len(tc.want) {
					t.Errorf("Len() before Shutdown = %d, want %d (%s)", got, len(tc.want), tc.reason)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				defer cancel()
				if err := b.Shutdown(ctx); err != nil {
					t.Errorf("Shutdown with nobody reading = %v, want nil (%s)", err, tc.reason)
				}
				if got := w.Len(); got != len(tc.want) {
					t.Errorf("Len() after Shutdown = %d, want %d (%s)", got, len(tc.want), tc.reason)
				}
				var got []int
				if path == "C" {
					got = testutil.Drain(t, ch, 10*time.Second) // ends only if C() is closed after the values
				} else {
					got = testutil.CollectSeq(t, w.All(), -1, 10*time.Second)
				}
				if diff := cmp.Diff(tc.want, got); diff != "" {
					t.Errorf("values read after Shutdown (-want +got):\n%s(%s)", diff, tc.reason)
				}
				wantDropped := tc.dropped
				if d := w.Dropped(); d != wantDropped {
					t.Errorf("Dropped() = %d, want %d", d, wantDropped)
				}
				if s := b.Stats(); s.Dropped != wantDropped {
					t.Errorf("Stats().Dropped = %d, want %d", s.Dropped, wantDropped)
				}
				if got := w.Len(); got != 0 {
					t.Errorf("Len() once read = %d, want 0", got)
				}
			})
		}
	}
}
