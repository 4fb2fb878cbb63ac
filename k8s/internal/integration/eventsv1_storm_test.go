package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	clientevents "k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
	"github.com/heraldgo/herald/k8s/internal/apiservertest"
)

// v1Storm is the events.k8s.io storm's workload: events recorded as fast as
// one goroutine can, over objects, no two isomorphic (each object's events
// differ in reason), so that every one is an Event object of its own.
type v1Storm struct{ events, objects int }

func (sc v1Storm) play(rec clientevents.EventRecorder, ns string) time.Duration {
	pods := make([]*corev1.Pod, sc.objects)
	for i := range pods {
		pods[i] = pod(ns, fmt.Sprint("storm-", i))
	}
	start := time.Now()
	for i := range sc.events {
		o, j := i%sc.objects, i/sc.objects
		rec.Eventf(pods[o], nil, corev1.EventTypeNormal, "Step"+strconv.Itoa(j), "Storm", "step %d of object %d", j, o)
	}
	return time.Since(start)
}

// v1StormRow is one pipeline's result.
type v1StormRow struct {
	name       string
	recordTime time.Duration
	writeTime  time.Duration // first Eventf to the last write's return
	stored     int           // Event objects in the namespace at the end
	peak       int           // peak goroutines above those before the run
	peakHerald int           // peak goroutines running herald's code
	stats      *k8s.EventStats
	errors     map[string]int // client-go: its sink's failed calls by reason
}

// peakGoroutines samples runtime.NumGoroutine every millisecond until
// stop is called, which returns the peak above the count before the run
// and, if own, the peak number of goroutines with a herald function on
// their stack (read from a goroutine profile every 20 ms).
func peakGoroutines(own bool) (stop func() (all, herald int)) {
	base := runtime.NumGoroutine()
	var peak, peakOwn int
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for i := 0; ; i++ {
			peak = max(peak, runtime.NumGoroutine())
			if own && i%20 == 0 {
				peakOwn = max(peakOwn, heraldGoroutines())
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() (int, int) {
		close(done)
		wg.Wait()
		return peak - base - 1, peakOwn // -1: the sampler itself
	}
}

// heraldGoroutines is the number of goroutines with a function of one of
// herald's library packages (k8s, events, broadcast) on their stack.
func heraldGoroutines() int {
	var buf bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&buf, 1); err != nil {
		panic(err)
	}
	n := 0
	for _, rec := range strings.Split(buf.String(), "\n\n") {
		count, _, ok := strings.Cut(rec, " @ ")
		if !ok || !(strings.Contains(rec, "herald/k8s.") || strings.Contains(rec, "herald/events.") || strings.Contains(rec, "herald/broadcast.")) {
			continue
		}
		c, err := strconv.Atoi(strings.TrimSpace(count[strings.LastIndex(count, "\n")+1:]))
		if err == nil {
			n += c
		}
	}
	return n
}

// lastWriteSink is a tools/events sink that records when its last
// successful call returned.
type lastWriteSink struct {
	clientevents.EventSink
	mu     sync.Mutex
	last   time.Time
	ok     int
	errors map[string]int // failed calls by reason
}

func (s *lastWriteSink) done(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil {
		s.last, s.ok = time.Now(), s.ok+1
		return
	}
	if s.errors == nil {
		s.errors = map[string]int{}
	}
	reason := string(apierrors.ReasonForError(err))
	if reason == "" {
		reason = err.Error()
		if i := strings.LastIndex(reason, ": "); i >= 0 {
			reason = reason[i+2:]
		}
	}
	s.errors[reason]++
}

func (s *lastWriteSink) state() (time.Time, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.ok
}

func (s *lastWriteSink) Create(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	r, err := s.EventSink.Create(ctx, e)
	s.done(err)
	return r, err
}

func (s *lastWriteSink) Update(ctx context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	r, err := s.EventSink.Update(ctx, e)
	s.done(err)
	return r, err
}

func (s *lastWriteSink) Patch(ctx context.Context, e *eventsv1.Event, d []byte) (*eventsv1.Event, error) {
	r, err := s.EventSink.Patch(ctx, e, d)
	s.done(err)
	return r, err
}

// v1Count is the number of Events in ns, read in pages; a page the
// server, still busy with a storm's writes, does not answer in time is
// asked for again, up to 10 times.
func v1Count(t testing.TB, c kubernetes.Interface, ns string) int {
	t.Helper()
	n, cont := 0, ""
	for {
		var l *eventsv1.EventList
		var err error
		for try := 0; try < 10; try++ {
			if l, err = c.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{Limit: 5000, Continue: cont}); err == nil {
				break
			}
			time.Sleep(5 * time.Second)
		}
		if err != nil {
			t.Fatal(err)
		}
		n += len(l.Items)
		if cont = l.Continue; cont == "" {
			return n
		}
	}
}

func runV1ClientGo(t *testing.T, s *apiservertest.Server, sc v1Storm) v1StormRow {
	c := s.Clientset()
	ns := s.Namespace(t)
	sink := &lastWriteSink{EventSink: v1SinkFor(c)}
	b := clientevents.NewBroadcaster(sink)
	ctx, cancel := context.WithCancel(context.Background())
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(scheme.Scheme, "storm")
	base := runtime.NumGoroutine()
	stop := peakGoroutines(false)
	start := time.Now()
	row := v1StormRow{name: "client-go tools/events NewBroadcaster", recordTime: sc.play(rec, ns)}
	// client-go cannot flush: wait until every event is written, or until
	// its goroutine per event has ended (written, or given up after 12
	// tries 10 s apart), at most 5 minutes.
	for deadline := time.Now().Add(5 * time.Minute); time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		if _, ok := sink.state(); ok >= sc.events || runtime.NumGoroutine() < base+100 {
			break
		}
	}
	last, _ := sink.state()
	row.writeTime = last.Sub(start)
	sink.mu.Lock()
	row.errors = sink.errors
	sink.mu.Unlock()
	row.peak, _ = stop()
	cancel()
	b.Shutdown()
	row.stored = v1Count(t, c, ns)
	return row
}

func runV1Herald(t *testing.T, s *apiservertest.Server, sc v1Storm, name string, opts ...k8s.Option) v1StormRow {
	c := s.Clientset()
	ns := s.Namespace(t)
	b := k8s.NewEventBroadcaster(v1SinkFor(c), append([]k8s.Option{quiet}, opts...)...).(*k8s.EventBroadcaster)
	if err := b.StartRecordingToSinkWithContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	rec := b.NewRecorder(scheme.Scheme, "storm")
	stop := peakGoroutines(true)
	start := time.Now()
	row := v1StormRow{name: name, recordTime: sc.play(rec, ns)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Drops at the queue are what the storm measures: counted, not failed.
	if err := b.ShutdownContext(ctx); err != nil && !errors.Is(err, events.ErrLost) {
		t.Fatalf("%s: Shutdown: %v", name, err)
	}
	row.writeTime = time.Since(start)
	row.peak, row.peakHerald = stop()
	st := b.Stats()
	row.stats = &st
	row.stored = v1Count(t, c, ns)
	return row
}

// TestEventsV1Storm: 20,000 events over 500 objects, no two isomorphic,
// recorded as fast as one goroutine can, through client-go's tools/events
// NewBroadcaster and herald's NewEventBroadcaster, one after the other,
// each into a namespace of its own on one API server, through client-go's
// own EventSinkImpl (herald's default: 16 writes in flight) and one client
// without a rate limit. It prints, per pipeline: Eventf calls per second,
// the Event objects stored, stored per second (first Eventf to last write),
// the events lost, and the peak number of goroutines above those before the
// run (client-go starts one per event; herald's are bounded by its sink
// concurrency).
//
// It checks what a drop-in must do: with its defaults (a queue of
// DefaultEventsV1QueueLength) herald stores every event; its peak number
// of goroutines running its code stays within a bound that does not grow
// with the rate; every event lost is counted in Stats (the third row, with
// tools/record's queue of 1000, drops most of the burst: counted,
// reported). Stored per second against client-go's is printed, not asserted:
// a timing on a shared machine is a figure, not a test.
//
// It runs only with HERALD_STORM=1 (make storm): it takes minutes.
// HERALD_STORM_ROUNDS repeats the rows.
func TestEventsV1Storm(t *testing.T) {
	if os.Getenv("HERALD_STORM") == "" {
		t.Skip("HERALD_STORM not set: the storm takes minutes (make storm)")
	}
	s := apiservertest.Shared(t)
	sc := v1Storm{events: 20000, objects: 500}
	rounds, _ := strconv.Atoi(os.Getenv("HERALD_STORM_ROUNDS"))
	rounds = max(rounds, 1)
	klog.SetLogger(logr.Discard())
	defer klog.ClearLogger()

	// herald's goroutines in a storm: the sink's writers (at most its
	// concurrency), the sink's worker, the series flusher, the context
	// watchers: a bound that does not grow with the rate.
	bound := k8s.DefaultSinkConcurrency + 8
	var rows []v1StormRow
	for range rounds {
		rows = append(rows,
			runV1ClientGo(t, s, sc),
			runV1Herald(t, s, sc, "herald NewEventBroadcaster (defaults)"),
			runV1Herald(t, s, sc, "herald NewEventBroadcaster, queue 1000",
				k8s.WithEventsOptions(events.WithQueueLength(events.DefaultQueueLength))))
	}
	var out strings.Builder
	fmt.Fprintf(&out, "events.k8s.io storm: %d events over %d objects, none isomorphic, kube-apiserver v%s on loopback\n",
		sc.events, sc.objects, apiservertest.KubeVersion)
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "pipeline\tEventf/s\tEvent objects\tstored/s\tlost\tpeak goroutines\therald's\t")
	for _, r := range rows {
		own := "-"
		if r.stats != nil {
			own = strconv.Itoa(r.peakHerald)
		}
		fmt.Fprintf(w, "%s\t%.0f\t%d\t%.0f\t%d\t%d\t%s\t\n", r.name,
			float64(sc.events)/r.recordTime.Seconds(), r.stored,
			float64(r.stored)/r.writeTime.Seconds(), sc.events-r.stored, r.peak, own)
	}
	w.Flush()
	for _, r := range rows {
		if r.stats == nil {
			fmt.Fprintf(&out, "%s: failed sink calls by reason: %v\n", r.name, r.errors)
			continue
		}
		st := r.stats
		fmt.Fprintf(&out, "%s: %+v\n", r.name, *st)
		if lost := uint64(sc.events - r.stored); lost != st.Dropped+st.Failed+st.Abandoned {
			t.Errorf("%s: %d events lost, but Stats counts %d", r.name, lost, st.Dropped+st.Failed+st.Abandoned)
		}
		if r.peakHerald > bound || r.peakHerald == 0 {
			t.Errorf("%s: a peak of %d goroutines running herald's code, want 1 to %d", r.name, r.peakHerald, bound)
		}
		if strings.Contains(r.name, "(defaults)") && r.stored != sc.events {
			t.Errorf("%s: %d of %d events stored", r.name, r.stored, sc.events)
		}
	}
	fmt.Print(out.String())
}
