// Command quickstart shows herald's broadcast package in one minute: one
// broadcaster, a lossless and a lossy watcher, the registration barrier, and
// a shutdown with a deadline. Run it with `make demo`.
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

func main() {
	b := broadcast.New[int]()

	// Published before anyone watches: nobody will see these.
	for i := range 3 {
		_ = b.Publish(-1 - i)
	}

	// A lossless audit watcher (Block) and a lossy UI watcher that keeps only
	// the latest 5 values (DropOldest) and is slow to read.
	audit, _ := b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(8))
	ui, _ := b.Watch(broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(5))

	var wg sync.WaitGroup
	var audited []int
	wg.Add(1)
	go func() {
		defer wg.Done()
		for v := range audit.All() {
			audited = append(audited, v)
		}
	}()

	// Everything published after Watch returned reaches the audit watcher.
	for i := range 100 {
		_ = b.Publish(i)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := b.Shutdown(ctx) // delivers what was published, then closes watchers
	wg.Wait()

	var shown []int
	for v := range ui.C() { // queued values stay readable after Shutdown
		shown = append(shown, v)
	}
	fmt.Printf("shutdown: %v\n", err)
	fmt.Printf("audit (Block):     got %d values, first %d, last %d, dropped %d\n",
		len(audited), audited[0], audited[len(audited)-1], audit.Dropped())
	fmt.Printf("ui (DropOldest/5): got %v, dropped %d\n", shown, ui.Dropped())
	st := b.Stats()
	fmt.Printf("stats: published %d, dropped %d, watchers %d\n", st.Published, st.Dropped, st.Watchers)
}
