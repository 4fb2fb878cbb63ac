package bench

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	cskr "github.com/cskr/pubsub/v2"
	moby "github.com/moby/pubsub"
	corev1 "k8s.io/api/core/v1"
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
	// moby/pubsub: it has no mode that waits for ever. A publish timeout
	// of 0 drops a value when a subscriber's buffer is full
	// (Publisher.sendTopic's select with default); with a timeout it waits
	// that long, with a timer per subscriber per value, then drops. An
	// hour is its lossless mode here (a drop would fail the order check).
	// Its channels carry interface{}, read through readSeq with a type
	// assertion per value.
	{"moby-pubsub", func() (func() readFunc, func(watch.Event), func()) {
		p := moby.NewPublisher(time.Hour, queueLength)
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
	// watermill v1.5.1's gochannel: ordered per subscriber only with
	// BlockPublishUntilSubscriberAck (otherwise every message is sent by
	// goroutines of its own, which race), so one message is in flight at a
	// time and each is acked by its reader. Payloads are []byte: a value's
	// index in the ring, mapped back to the value on receipt.
	{"watermill", func() (func() readFunc, func(watch.Event), func()) {
		g := gochannel.NewGoChannel(gochannel.Config{
			OutputChannelBuffer:            queueLength,
			BlockPublishUntilSubscriberAck: true,
		}, watermill.NopLogger{})
		return func() readFunc {
				msgs, err := g.Subscribe(context.Background(), "t")
				if err != nil {
					panic(err)
				}
				return readSeq(fromMessages(msgs))
			}, func(ev watch.Event) {
				if err := g.Publish("t", message.NewMessage("", ringPayload[ringIndex(ev)])); err != nil {
					panic(err)
				}
			}, func() {
				if err := g.Close(); err != nil {
					panic(err)
				}
			}
	}},
}

// pumpModel is not a library but the design C() did not take (issue 27): a
// goroutine per watcher that fills the watcher's channel from what the
// publisher queued for it, as the old core's forwarders and tailscale's
// eventbus subscriber pumps do. Here the publisher queues into a channel
// per watcher (the pump's inbox) and the pump moves each value into the
// reader's channel: the same wake-ups as a pump reading a shared ring
// (the publisher wakes the pump, the pump wakes the reader), so it models
// that design's one-value latency. Its throughput is not the design's (a
// ring read in batches: the floor-chan rows of workload 1), so it runs in
// BenchmarkPeerLatency only.
var pumpModel = peer{"pump", func() (func() readFunc, func(watch.Event), func()) {
	var inboxes []chan watch.Event
	var wg sync.WaitGroup
	return func() readFunc {
			in, out := make(chan watch.Event, queueLength), make(chan watch.Event, queueLength)
			inboxes = append(inboxes, in)
			wg.Go(func() {
				defer close(out)
				for ev := range in {
					out <- ev
				}
			})
			return readChan(out)
		}, func(ev watch.Event) {
			for _, in := range inboxes {
				in <- ev
			}
		}, func() {
			for _, in := range inboxes {
				close(in)
			}
			wg.Wait()
		}
}}

// ringPayload is each ring value's index as a watermill payload.
var ringPayload = func() (p [ringSize][]byte) {
	for i := range p {
		p[i] = []byte(strconv.Itoa(i))
	}
	return p
}()

// ringIndex is ev's index in the ring (its name is "ev-<index>").
func ringIndex(ev watch.Event) int {
	i, err := strconv.Atoi(ev.Object.(*corev1.Event).Name[len("ev-"):])
	if err != nil {
		panic(err)
	}
	return i
}

// fromMessages acks each message and yields the ring value it names.
func fromMessages(msgs <-chan *message.Message) iter.Seq[watch.Event] {
	return func(yield func(watch.Event) bool) {
		for m := range msgs {
			m.Ack()
			i, err := strconv.Atoi(string(m.Payload))
			if err != nil || i < 0 || i >= ringSize {
				return
			}
			if !yield(ring[i]) {
				return
			}
		}
	}
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
			got, err := read(want, each)
			if err == nil {
				return
			}
			errs <- fmt.Errorf("%s watcher: %d of %d: %w", p.name, got, want, err)
			// The peers are lossless: a watcher that stopped reading would
			// stall the publisher, and wg.Wait with it, for good. Read the
			// rest unchecked (the failing value was consumed), so that the
			// run ends and reports the error.
			if rest := want - got - 1; rest > 0 && !errors.Is(err, errEarlyClose) {
				read(rest, func(int, watch.Event) error { return nil })
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

// BenchmarkPeerLatency is workload 6 (BenchmarkLatency) on the peer
// libraries: one value in flight, p50-ns and p99-ns over every (watcher,
// value) pair, every value checked in order.
func BenchmarkPeerLatency(b *testing.B) {
	for _, p := range append(peers[:len(peers):len(peers)], pumpModel) {
		b.Run(p.name, func(b *testing.B) {
			for _, n := range latencyWatcherCounts {
				b.Run(fmt.Sprintf("watchers=%d", n), func(b *testing.B) { latencyPeer(b, n, p) })
			}
		})
	}
}

func latencyPeer(b *testing.B, n int, p peer) {
	r := newLatencyRun(b, n)
	subscribe, publish, stop := p.start()
	for k := range n {
		each, read := r.receiver(k), subscribe()
		r.wg.Go(func() {
			if got, err := read(b.N, each); err != nil {
				r.fail(fmt.Errorf("%s watcher: %d of %d: %w", p.name, got, b.N, err))
			}
		})
	}
	r.drive(func(i int) error { publish(eventAt(i)); return nil })
	r.finish()
	stop()
}
