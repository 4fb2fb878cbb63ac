package bench

import (
	"fmt"
	"iter"
	"sync"
	"testing"

	cskr "github.com/cskr/pubsub/v2"
	moby "github.com/moby/pubsub"
	"k8s.io/apimachinery/pkg/watch"
	"tailscale.com/util/eventbus"
)

// A peer is a Go fan-out library a user would pick instead of herald, set up
// in its documented lossless mode with herald's queue length. start returns
// subscribe (called once per watcher during setup, before the clock starts;
// the readFunc it returns runs in the watcher's goroutine and uses bench's
// own reader loops), publish and stop.
type peer struct {
	name  string
	start func() (subscribe func() readFunc, publish func(watch.Event), stop func())
}

var peers = []peer{
	// chan: a buffered channel per subscriber, written by the publisher
	// itself, blocking when a subscriber's channel is full.
	{"chan", func() (func() readFunc, func(watch.Event), func()) {
		var chans []chan watch.Event
		return func() readFunc {
				ch := make(chan watch.Event, queueLength)
				chans = append(chans, ch)
				return readChan(ch)
			}, func(ev watch.Event) {
				for _, ch := range chans {
					ch <- ev
				}
			}, func() {
				for _, ch := range chans {
					close(ch)
				}
			}
	}},
	// cskr/pubsub v2: Pub blocks until every subscriber's channel (of the
	// capacity given to New) has room; one topic.
	{"cskr-pubsub", func() (func() readFunc, func(watch.Event), func()) {
		ps := cskr.New[string, watch.Event](queueLength)
		return func() readFunc { return readChan(ps.Sub("t")) },
			func(ev watch.Event) { ps.Pub(ev, "t") },
			ps.Shutdown
	}},
	// moby/pubsub: a publish timeout of 0 waits for every subscriber; its
	// channels carry interface{}, read through readSeq with a type
	// assertion per value.
	{"moby-pubsub", func() (func() readFunc, func(watch.Event), func()) {
		p := moby.NewPublisher(0, queueLength)
		return func() readFunc { return readSeq(asEvents(p.Subscribe())) },
			func(ev watch.Event) { p.Publish(ev) },
			p.Close
	}},
	// tailscale.com/util/eventbus v1.102.5: a Client per watcher (its
	// delivery order is per Client), read through Subscriber.Events; its
	// queues are unbounded, so nothing is lost and Publish never waits
	// for a subscriber.
	{"eventbus", func() (func() readFunc, func(watch.Event), func()) {
		bus := eventbus.New()
		pub := eventbus.Publish[watch.Event](bus.Client("publisher"))
		return func() readFunc {
				return readChan(eventbus.Subscribe[watch.Event](bus.Client("watcher")).Events())
			},
			pub.Publish,
			bus.Close
	}},
}

// asEvents is a channel of interface{} as an iterator of events.
func asEvents(ch <-chan any) iter.Seq[watch.Event] {
	return func(yield func(watch.Event) bool) {
		for v := range ch {
			if !yield(v.(watch.Event)) {
				return
			}
		}
	}
}

// BenchmarkPeerFanout is workload 1 (BenchmarkFanout) on the peer libraries:
// the same warm-up, the same clock, every value checked in order.
func BenchmarkPeerFanout(b *testing.B) {
	for _, p := range peers {
		b.Run(p.name, func(b *testing.B) {
			for _, n := range watcherCounts {
				b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { fanoutPeer(b, n, p) })
			}
		})
	}
}

func fanoutPeer(b *testing.B, n int, p peer) {
	subscribe, publish, stop := p.start()
	want := b.N + 1
	errs := make(chan error, n)
	var wg, warm sync.WaitGroup
	warm.Add(n)
	for range n {
		read := subscribe()
		each, warmed := warmThenInOrder(&warm)
		wg.Go(func() {
			defer warmed()
			if got, err := read(want, each); err != nil {
				errs <- fmt.Errorf("%s watcher: %d of %d: %w", p.name, got, want, err)
			}
		})
	}
	publish(eventAt(0))
	warm.Wait()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 1; i < want; i++ {
		publish(eventAt(i))
	}
	wg.Wait()
	b.StopTimer()
	stop()
	if err := firstError(errs); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/delivery")
}
