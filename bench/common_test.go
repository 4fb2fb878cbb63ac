package bench

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/heraldgo/herald/broadcast"
)

// queueLength is the per-watcher queue of every workload: client-go's
// event-recording value, and herald's default.
const queueLength = 1000

// ringSize distinct objects are published in turn, so that every watcher can
// check that it got every value in order at the cost of one interface
// comparison, the same for both systems.
const ringSize = 1024

var ring = func() (r [ringSize]watch.Event) {
	for i := range r {
		r[i] = watch.Event{
			Type:   watch.Added,
			Object: &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "ev-" + strconv.Itoa(i)}},
		}
	}
	return r
}()

// eventAt is the i-th published value.
func eventAt(i int) watch.Event { return ring[i&(ringSize-1)] }

// errEarlyClose is reported by a reader whose stream ended before it had
// received everything it waited for.
var errEarlyClose = errors.New("stream ended early")

// newK8s is the reference broadcaster: the one client-go's event recording
// uses (NewLongQueueBroadcaster, whose incoming queue is as long as a
// watcher's). On fan-out and Publish it is as fast as NewBroadcaster (incoming
// queue 25) within noise, a little faster at 1 watcher; BenchmarkChurn uses
// NewBroadcaster, which is the faster one there.
func newK8s(full watch.FullChannelBehavior) *watch.Broadcaster {
	return watch.NewLongQueueBroadcaster(queueLength, full)
}

// newHerald is herald's broadcaster with the same queue length.
func newHerald(p broadcast.Policy) *broadcast.Broadcaster[watch.Event] {
	return broadcast.New[watch.Event](broadcast.WithQueueLength(queueLength), broadcast.WithPolicy(p))
}

// shutdownHerald shuts hb down with a generous deadline and fails b if it
// cannot.
func shutdownHerald(b *testing.B, hb *broadcast.Broadcaster[watch.Event]) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := hb.Shutdown(ctx); err != nil {
		b.Fatalf("herald Shutdown: %v", err)
	}
}

// A reader drains one herald watcher, the way a user would: through C() or
// through All(). open is called during setup, before the clock starts (so
// that C()'s switch to channel mode, with its queue-sized channel, is not
// timed: k8s makes its channel in Watch, also untimed); the function it
// returns runs in the watcher's goroutine, stops after want values and
// reports how many it got.
type reader struct {
	name string
	open func(w *broadcast.Watcher[watch.Event]) readFunc
}

type readFunc func(want int, each func(i int, ev watch.Event) error) (int, error)

var (
	readC = reader{"herald-C", func(w *broadcast.Watcher[watch.Event]) readFunc {
		return readChan(w.C())
	}}
	readAll = reader{"herald-All", func(w *broadcast.Watcher[watch.Event]) readFunc {
		return readSeq(w.All())
	}}
	readers = []reader{readC, readAll}
)

// readChan is a reader's loop over a channel: it stops after want values
// and reports how many it got.
func readChan(ch <-chan watch.Event) readFunc {
	return func(want int, each func(int, watch.Event) error) (int, error) {
		got := 0
		for ev := range ch {
			if err := each(got, ev); err != nil {
				return got, err
			}
			got++
			if got == want {
				return got, nil
			}
		}
		return got, errEarlyClose
	}
}

// readSeq is the same loop over an iterator.
func readSeq(seq iter.Seq[watch.Event]) readFunc {
	return func(want int, each func(int, watch.Event) error) (int, error) {
		got := 0
		for ev := range seq {
			if err := each(got, ev); err != nil {
				return got, err
			}
			got++
			if got == want {
				return got, nil
			}
		}
		return got, errEarlyClose
	}
}

// readK8s is the same loop over a k8s watcher's ResultChan.
func readK8s(w watch.Interface, want int, each func(i int, ev watch.Event) error) (int, error) {
	got := 0
	for ev := range w.ResultChan() {
		if err := each(got, ev); err != nil {
			return got, err
		}
		got++
		if got == want {
			return got, nil
		}
	}
	return got, errEarlyClose
}

// inOrder is the per-value check every lossless reader makes.
func inOrder(i int, ev watch.Event) error {
	if want := eventAt(i); ev.Object != want.Object || ev.Type != want.Type {
		return fmt.Errorf("value %d out of order", i)
	}
	return nil
}

// firstError returns the first error sent on errs, which it drains.
func firstError(errs chan error) error {
	close(errs)
	var first error
	for err := range errs {
		if first == nil {
			first = err
		}
	}
	return first
}

// envInt reads a positive integer from the environment, for the knobs that
// the driver's smoke mode turns down.
func envInt(name string, def int) int {
	if s := os.Getenv(name); s != "" {
		if n, err := strconv.Atoi(s); err == nil && n > 0 {
			return n
		}
	}
	return def
}
