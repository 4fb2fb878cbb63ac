package integration

import (
	"context"
	"errors"
	"fmt"
	"github.com/google/go-cmp/cmp"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// sinkConcurrency makes the option that lets a sink have n calls in
// flight; HERALD_STORM_CONCURRENCY=n adds a row with it.
var sinkConcurrency = events.WithSinkConcurrency

// stormConfig is the storm's workload: events recorded as fast as one
// goroutine can, over objects, most of them distinct.
type stormConfig struct {
	events, objects int
	repeat          int // one event in repeat is an exact repeat of an earlier one
}

func (sc stormConfig) play(rec []record.EventRecorder, ns string) time.Duration {
	pods := make([]*corev1.Pod, sc.objects)
	for i := range pods {
		pods[i] = pod(ns, fmt.Sprint("storm-", i))
	}
	start := time.Now()
	for i := range sc.events {
		o, j := i%sc.objects, i/sc.objects
		if sc.repeat > 0 && (o+j)%sc.repeat == sc.repeat-1 && j > 0 {
			// The same event as this object's previous one (which was
			// not a repeat itself).
			j--
		}
		// A source per round of 20, so that no source records more than
		// the spam filter's burst (25) about one object: what is not
		// stored is lost, not filtered by design.
		rec[j/20].Eventf(pods[o], corev1.EventTypeNormal, "Step"+strconv.Itoa(j), "step %d of object %d", j, o)
	}
	return time.Since(start)
}

func (sc stormConfig) sources() int { return (sc.events/sc.objects)/20 + 1 }

// stormRow is one pipeline's result.
type stormRow struct {
	name        string
	recordTime  time.Duration
	objects     int   // Event objects stored
	occurrences int64 // sum of their counts
	writeTime   time.Duration
	herald      *events.Stats
	stored      []stored // herald rows: the Events stored, sorted
}

// storedIn sums the counts of the events stored in ns.
func storedIn(t *testing.T, c kubernetes.Interface, ns string) (objects int, occurrences int64) {
	got := list(t, c, ns)
	for _, e := range got {
		occurrences += int64(e.Count)
	}
	return len(got), occurrences
}

// idleSink records when its last call returned.
type idleSink struct {
	record.EventSink
	mu   sync.Mutex
	last time.Time
}

func (s *idleSink) touch() { s.mu.Lock(); s.last = time.Now(); s.mu.Unlock() }
func (s *idleSink) lastCall() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}
func (s *idleSink) Create(e *corev1.Event) (*corev1.Event, error) {
	defer s.touch()
	return s.EventSink.Create(e)
}
func (s *idleSink) Patch(e *corev1.Event, d []byte) (*corev1.Event, error) {
	defer s.touch()
	return s.EventSink.Patch(e, d)
}

func runClientGo(t *testing.T, s *apiservertest.Server, sc stormConfig) stormRow {
	c := s.Clientset()
	ns := s.Namespace(t)
	b := record.NewBroadcaster()
	sink := &idleSink{EventSink: sinkFor(c)}
	b.StartRecordingToSink(sink)
	var rec []record.EventRecorder
	for i := range sc.sources() {
		rec = append(rec, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fmt.Sprint("storm-", i)}))
	}
	start := time.Now()
	row := stormRow{name: "client-go record.NewBroadcaster", recordTime: sc.play(rec, ns)}
	// client-go cannot flush: wait until its sink has been idle for 3 s.
	for {
		time.Sleep(500 * time.Millisecond)
		if last := sink.lastCall(); !last.IsZero() && time.Since(last) > 3*time.Second {
			row.writeTime = last.Sub(start)
			break
		}
	}
	b.Shutdown()
	row.objects, row.occurrences = storedIn(t, c, ns)
	return row
}

func runHerald(t *testing.T, s *apiservertest.Server, sc stormConfig, name string, opts ...k8s.Option) stormRow {
	c := s.Clientset()
	ns := s.Namespace(t)
	b := k8s.NewBroadcaster(append([]k8s.Option{quiet}, opts...)...)
	b.StartRecordingToSink(sinkFor(c))
	var rec []record.EventRecorder
	for i := range sc.sources() {
		rec = append(rec, b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fmt.Sprint("storm-", i)}))
	}
	start := time.Now()
	row := stormRow{name: name, recordTime: sc.play(rec, ns)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Drops at the queue are what the storm measures: counted, not failed.
	if err := b.(*k8s.Broadcaster).ShutdownContext(ctx); err != nil && !errors.Is(err, events.ErrLost) {
		t.Fatalf("%s: Shutdown: %v", name, err)
	}
	row.writeTime = time.Since(start)
	st := b.(*k8s.Broadcaster).Events().Stats()
	row.herald = &st
	row.objects, row.occurrences = storedIn(t, c, ns)
	row.stored = list(t, c, ns)
	return row
}

// TestStorm: a burst of 20,000 events over 500 objects (one in ten an
// exact repeat), recorded as fast as one goroutine can, through client-go's
// recorder and herald's drop-in, one after the other, each into a namespace
// of its own on one API server, with the same client (no client-side rate
// limit). It prints, per pipeline: Recorder calls per second, the events
// the server ends up with (objects, and occurrences: the sum of their
// counts), occurrences stored per second (first Recorder call to last
// write), and the occurrences lost. Both pipelines drop what does not fit
// their queues (1000 by default); the third row gives herald a queue of
// the whole burst.
//
// It runs only with HERALD_STORM=1 (make storm): it takes minutes.
// HERALD_STORM_ROUNDS repeats the rows; HERALD_STORM_CONCURRENCY=n adds
// a herald row with n sink calls in flight, once sinkConcurrency is wired.
func TestStorm(t *testing.T) {
	if os.Getenv("HERALD_STORM") == "" {
		t.Skip("HERALD_STORM not set: the storm takes minutes (make storm)")
	}
	s := apiservertest.Shared(t)
	sc := stormConfig{events: 20000, objects: 500, repeat: 10}
	rounds, _ := strconv.Atoi(os.Getenv("HERALD_STORM_ROUNDS"))
	rounds = max(rounds, 1)
	conc, _ := strconv.Atoi(os.Getenv("HERALD_STORM_CONCURRENCY"))
	if conc > 1 && sinkConcurrency == nil {
		t.Fatal("HERALD_STORM_CONCURRENCY set, but sinkConcurrency is not wired to events.WithSinkConcurrency yet")
	}
	// client-go logs every event it drops, at Error; neither pipeline's
	// logging is measured.
	klog.SetLogger(logr.Discard())
	defer klog.ClearLogger()

	var rows []stormRow
	for range rounds {
		rows = append(rows,
			runClientGo(t, s, sc),
			runHerald(t, s, sc, "herald k8s.NewBroadcaster"),
			runHerald(t, s, sc, "herald, queue 20000, 1 sink call", k8s.WithEventsOptions(events.WithQueueLength(sc.events), sinkConcurrency(1))),
			runHerald(t, s, sc, fmt.Sprintf("herald, queue 20000, %d sink calls (default)", k8s.DefaultSinkConcurrency),
				k8s.WithEventsOptions(events.WithQueueLength(sc.events))))
		if conc > 1 {
			rows = append(rows, runHerald(t, s, sc, fmt.Sprintf("herald, queue 20000, %d sink calls", conc),
				k8s.WithEventsOptions(events.WithQueueLength(sc.events), sinkConcurrency(conc))))
		}
		// Guarantee 8 on a real server: with a queue that holds the
		// burst, every sink concurrency stores the same Event objects as
		// one call at a time.
		var one []stored
		for _, r := range rows {
			switch {
			case r.name == "herald, queue 20000, 1 sink call":
				one = r.stored
			case one != nil && strings.HasPrefix(r.name, "herald, queue 20000,"):
				if d := cmp.Diff(one, r.stored); d != "" {
					t.Errorf("%s stored other Events than one sink call (-one +%s):\n%s", r.name, r.name, d)
				}
			}
		}
	}
	var out strings.Builder
	fmt.Fprintf(&out, "storm: %d events over %d objects, 1 in %d a repeat, kube-apiserver v%s on loopback\n",
		sc.events, sc.objects, sc.repeat, apiservertest.KubeVersion)
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "pipeline\trecorded/s\tEvent objects\toccurrences stored\tstored/s\tlost\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.0f\t%d\t%d\t%.0f\t%d\t\n", r.name,
			float64(sc.events)/r.recordTime.Seconds(), r.objects, r.occurrences,
			float64(r.occurrences)/r.writeTime.Seconds(), int64(sc.events)-r.occurrences)
	}
	w.Flush()
	for _, r := range rows {
		if r.herald != nil {
			fmt.Fprintf(&out, "%s: %+v\n", r.name, *r.herald)
			if lost := int64(sc.events) - r.occurrences; uint64(lost) != r.herald.Dropped+r.herald.Failed+r.herald.Abandoned {
				t.Errorf("%s: %d occurrences lost, but Stats counts %d", r.name, lost, r.herald.Dropped+r.herald.Failed+r.herald.Abandoned)
			}
		}
	}
	fmt.Print(out.String())
}
