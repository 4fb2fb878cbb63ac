package broadcast_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/heraldgo/herald/broadcast"
)

// TestPublishWithoutLockKeepsBounds: below the attention bound a publish
// commits without the broadcaster's mutex; a watcher that registers
// meanwhile lowers the bound, and no publish may go past it unvisited.
// Four publishers run flat out while watchers of queue length 1 (Drop,
// never read) come and go: every look at one finds at most one value
// queued, and its drops account for the rest.
func TestPublishWithoutLockKeepsBounds(t *testing.T) {
	b := broadcast.New[int](broadcast.WithPolicy(broadcast.Drop), broadcast.WithQueueLength(1))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := b.Publish(i); err != nil {
					t.Error(err)
					return
				}
				if i%64 == 0 {
					runtime.Gosched() // with one processor, let the watchers come and go
				}
			}
		})
	}
	for range 500 {
		w, err := b.Watch()
		if err != nil {
			t.Fatal(err)
		}
		from := b.Stats().Published
		for range 4 {
			if l := w.Len(); l > 1 {
				t.Fatalf("Len() = %d for a Drop watcher of queue length 1", l)
			}
			runtime.Gosched()
		}
		// Every value up to to was held or dropped before to was stored.
		to := b.Stats().Published
		if d, l := w.Dropped(), w.Len(); to > from && uint64(l)+d < to-from {
			t.Fatalf("holds %d and dropped %d of at least %d values published after it registered", l, d, to-from)
		}
		w.Stop()
	}
	close(stop)
	wg.Wait()
}
