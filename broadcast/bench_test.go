package broadcast

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// event has the size of Kubernetes' watch.Event (a string and an interface),
// so that figures here compare with the bench/ module's.
type event struct {
	Type   string
	Object any
}

// BenchmarkPublish measures Publish alone: no watcher, or watchers that are
// full Drop watchers nobody reads (the publisher's worst steady state).
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{0, 1, 100} {
		b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) {
			br := New[event]()
			for range n {
				if _, err := br.Watch(WithQueueLength(10)); err != nil {
					b.Fatal(err)
				}
			}
			ev := event{Type: "ADDED"}
			b.ReportAllocs()
			for b.Loop() {
				_ = br.Publish(ev)
			}
			_ = br.Shutdown(context.Background())
		})
	}
}

// BenchmarkFanout: one publisher, n lossless watchers each drained by its own
// goroutine; ns/op is per published value, until every watcher has it.
func BenchmarkFanout(b *testing.B) {
	for _, read := range []string{"All", "C"} {
		for _, n := range []int{1, 10, 100, 1000} {
			b.Run(fmt.Sprintf("read=%s/watchers=%d", read, n), func(b *testing.B) {
				benchFanout(b, n, read == "C")
			})
		}
	}
}

func benchFanout(b *testing.B, n int, useC bool) {
	br := New[event](WithPolicy(Block), WithQueueLength(1000))
	var wg sync.WaitGroup
	counts := make([]int, n)
	for i := range n {
		w, err := br.Watch()
		if err != nil {
			b.Fatal(err)
		}
		wg.Add(1)
		if useC {
			ch := w.C()
			go func() {
				defer wg.Done()
				for range ch {
					counts[i]++
				}
			}()
		} else {
			go func() {
				defer wg.Done()
				for range w.All() {
					counts[i]++
				}
			}()
		}
	}
	ev := event{Type: "ADDED"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		_ = br.Publish(ev)
	}
	_ = br.Shutdown(context.Background())
	wg.Wait()
	b.StopTimer()
	for i, c := range counts {
		if c != b.N {
			b.Fatalf("watcher %d got %d of %d", i, c, b.N)
		}
	}
}

// BenchmarkWatchStop registers and stops a watcher while a publisher runs.
func BenchmarkWatchStop(b *testing.B) {
	br := New[event]()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		ev := event{Type: "ADDED"}
		for {
			select {
			case <-stop:
				return
			default:
				_ = br.Publish(ev)
			}
		}
	}()
	b.ReportAllocs()
	for b.Loop() {
		w, err := br.Watch()
		if err != nil {
			b.Fatal(err)
		}
		w.Stop()
	}
	close(stop)
	<-done
	_ = br.Shutdown(context.Background())
}

// BenchmarkChannelBaseline is the floor: one buffered channel send and
// receive per value, one reader.
func BenchmarkChannelBaseline(b *testing.B) {
	ch := make(chan event, 1000)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	ev := event{Type: "ADDED"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		ch <- ev
	}
	close(ch)
	<-done
}

func TestPublishAllocs(t *testing.T) {
	br := New[event]()
	w, _ := br.Watch(WithQueueLength(10))
	wc, _ := br.Watch(WithQueueLength(10), WithPolicy(DropOldest))
	_ = wc.C()
	ev := event{Type: "ADDED"}
	for range 100 {
		_ = br.Publish(ev)
	}
	if a := testing.AllocsPerRun(1000, func() { _ = br.Publish(ev) }); a != 0 {
		t.Errorf("Publish allocates %v times per call in steady state, want 0", a)
	}
	w.Stop()
	wc.Stop() // nobody reads its channel: Shutdown would wait for a reader
	_ = br.Shutdown(context.Background())
}

// BenchmarkDropOldestFull: Publish with one full, never-read DropOldest
// watcher, ring mode and channel mode (with and without an unread prefix),
// at a queue that fits the ring and at ones that do not. The cost must not
// grow with the queue length: a full DropOldest watcher does not slow the
// publisher down. It did (found by the soak, issue 5): dropping the oldest
// shifted the whole private queue (deque.removeAt), 52 us per Publish at a
// queue of 10 000 and 554 us at 100 000; now the shorter side shifts.
func BenchmarkDropOldestFull(b *testing.B) {
	for _, mode := range []string{"All", "C", "C+prefix"} {
		for _, q := range []int{1000, 10_000, 100_000} {
			b.Run(fmt.Sprintf("%s/queue=%d", mode, q), func(b *testing.B) {
				br := New[int]()
				var prefix []int
				if mode == "C+prefix" {
					prefix = []int{-1}
				}
				w, err := br.WatchWithPrefix(prefix, WithPolicy(DropOldest), WithQueueLength(q))
				if err != nil {
					b.Fatal(err)
				}
				if mode != "All" {
					w.C()
				}
				for v := range q {
					_ = br.Publish(v)
				}
				b.ResetTimer()
				for b.Loop() {
					_ = br.Publish(0)
				}
				b.StopTimer()
				w.Stop()
				_ = br.Shutdown(context.Background())
			})
		}
	}
}
