package k8s_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/heraldgo/herald/events"
	"github.com/heraldgo/herald/k8s"
)

var quiet = k8s.WithEventsOptions(events.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))

func pod(ns, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
}

// shutdownLostInvalid shuts b down and checks that Shutdown reports the
// one invalid event the test recorded as lost.
func shutdownLostInvalid(t *testing.T, b record.EventBroadcaster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := b.(*k8s.Broadcaster).ShutdownContext(ctx)
	var lost *events.LostError
	if !errors.As(err, &lost) || !errors.Is(err, events.ErrLost) || lost.Invalid != 1 {
		t.Fatalf("ShutdownContext: %v, want a LostError with 1 invalid event", err)
	}
}

func shutdown(t *testing.T, b record.EventBroadcaster) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.(*k8s.Broadcaster).ShutdownContext(ctx); err != nil {
		t.Fatalf("ShutdownContext: %v", err)
	}
}

func stored(t *testing.T, c *fake.Clientset, ns string) map[string]corev1.Event {
	t.Helper()
	l, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]corev1.Event{}
	for _, e := range l.Items {
		m[e.InvolvedObject.Name+"/"+e.Reason] = e
	}
	return m
}

// TestBroadcasterRecordsToSink: through client-go's EventSinkImpl on a
// fake clientset, repeats become one event with a count, references are
// resolved through the scheme (kind and API version of a typed object
// without TypeMeta), annotations and the source are kept, and an object
// whose name makes an invalid event name still gets one event, counted.
func TestBroadcasterRecordsToSink(t *testing.T) {
	c := fake.NewClientset()
	b := k8s.NewBroadcaster(quiet)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl", Host: "node-1"})
	p := pod("prod", "web-0")
	rec.Eventf(p, corev1.EventTypeWarning, "BackOff", "restarting %s", "app")
	rec.Eventf(p, corev1.EventTypeWarning, "BackOff", "restarting %s", "app")
	rec.AnnotatedEventf(p, map[string]string{"k": "v"}, corev1.EventTypeNormal, "Pulled", "image %q", "nginx")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:controller:x", UID: "uid-role"}}
	rec.Event(role, corev1.EventTypeNormal, "Updated", "rules changed")
	rec.Event(role, corev1.EventTypeNormal, "Updated", "rules changed")
	shutdown(t, b)

	got := stored(t, c, "prod")
	backoff := got["web-0/BackOff"]
	if backoff.Count != 2 || backoff.Message != "restarting app" || backoff.Type != corev1.EventTypeWarning {
		t.Errorf("BackOff: count %d message %q type %q", backoff.Count, backoff.Message, backoff.Type)
	}
	want := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "prod", Name: "web-0", UID: "uid-web-0"}
	if backoff.InvolvedObject != want {
		t.Errorf("involved object %+v, want %+v", backoff.InvolvedObject, want)
	}
	if backoff.Source != (corev1.EventSource{Component: "ctrl", Host: "node-1"}) ||
		backoff.ReportingController != "ctrl" || backoff.ReportingInstance != "node-1" {
		t.Errorf("source %+v, reporting %q %q", backoff.Source, backoff.ReportingController, backoff.ReportingInstance)
	}
	if pulled := got["web-0/Pulled"]; pulled.Annotations["k"] != "v" || pulled.Message != `image "nginx"` {
		t.Errorf("Pulled: annotations %v message %q", pulled.Annotations, pulled.Message)
	}
	roleEvents := stored(t, c, metav1.NamespaceDefault)
	updated, ok := roleEvents["system:controller:x/Updated"]
	if !ok || len(roleEvents) != 1 {
		t.Fatalf("ClusterRole events in default: %v", roleEvents)
	}
	if errs := validation.NameIsDNSSubdomain(updated.Name, false); len(errs) > 0 || updated.Count != 2 {
		t.Errorf("ClusterRole event %q count %d: %v", updated.Name, updated.Count, errs)
	}
	if updated.InvolvedObject.Kind != "ClusterRole" || updated.InvolvedObject.APIVersion != "rbac.authorization.k8s.io/v1" {
		t.Errorf("ClusterRole reference %+v", updated.InvolvedObject)
	}
}

// capture is a logr.Logger that keeps what it is given.
type capture struct {
	mu    sync.Mutex
	lines []string
}

func (c *capture) logger(verbosity int) logr.Logger {
	return funcr.New(func(prefix, args string) {
		c.mu.Lock()
		c.lines = append(c.lines, args)
		c.mu.Unlock()
	}, funcr.Options{Verbosity: verbosity})
}

func (c *capture) text() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Join(c.lines, "\n")
}

// TestRecorderUnresolvableObject: an object the scheme cannot resolve is
// not recorded; the recorder's logger (WithLogger) says why.
func TestRecorderUnresolvableObject(t *testing.T) {
	c := fake.NewClientset()
	b := k8s.NewBroadcaster(quiet)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
	var logged capture
	rec := b.NewRecorder(runtime.NewScheme(), corev1.EventSource{Component: "ctrl"}).WithLogger(logged.logger(0))
	rec.Eventf(pod("prod", "web-0"), corev1.EventTypeNormal, "Started", "started %d", 1)
	shutdown(t, b)
	if n := len(stored(t, c, "prod")); n != 0 {
		t.Errorf("%d events stored for an object the scheme does not know", n)
	}
	if text := logged.text(); !strings.Contains(text, "Could not construct reference") || !strings.Contains(text, "started 1") {
		t.Errorf("logged %q", text)
	}
	if s := b.(*k8s.Broadcaster).Events().Stats(); s.Recorded != 0 {
		t.Errorf("Stats %+v, want nothing recorded", s)
	}
}

// TestStartEventWatcher: the handler gets core/v1 events with valid names;
// Stop closes the watch's ResultChan and Shutdown the others'.
func TestStartEventWatcher(t *testing.T) {
	b := k8s.NewBroadcaster(quiet)
	got := make(chan *corev1.Event, 10)
	w1 := b.StartEventWatcher(func(e *corev1.Event) { got <- e })
	w2 := b.StartEventWatcher(func(*corev1.Event) {})
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl"})
	rec.Event(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "system:x"}}, corev1.EventTypeNormal, "Updated", "m")
	e := <-got
	if e.InvolvedObject.Kind != "ClusterRole" || e.Reason != "Updated" || e.Namespace != metav1.NamespaceDefault || e.Count != 1 {
		t.Errorf("handler got %+v", e)
	}
	if errs := validation.NameIsDNSSubdomain(e.Name, false); len(errs) > 0 {
		t.Errorf("handler got the invalid name %q", e.Name)
	}
	w1.Stop()
	if _, ok := <-w1.ResultChan(); ok {
		t.Fatal("ResultChan delivered a value")
	}
	shutdown(t, b)
	if _, ok := <-w2.ResultChan(); ok {
		t.Fatal("ResultChan delivered a value")
	}
	w2.Stop() // after Shutdown: no panic
}

// TestStartLoggingAsClientGo: StartLogging writes the line client-go
// writes for the same event.
func TestStartLoggingAsClientGo(t *testing.T) {
	lines := func(b record.EventBroadcaster) string {
		got := make(chan string, 1)
		w := b.StartLogging(func(format string, args ...any) { got <- fmt.Sprintf(format, args...) })
		defer w.Stop()
		b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl"}).
			Eventf(pod("prod", "web-0"), corev1.EventTypeWarning, "BackOff", "restarting %d", 3)
		return <-got
	}
	kb := record.NewBroadcaster()
	want := lines(kb)
	kb.Shutdown()
	hb := k8s.NewBroadcaster(quiet)
	got := lines(hb)
	shutdown(t, hb)
	if got != want {
		t.Fatalf("StartLogging wrote\n%s\nclient-go wrote\n%s", got, want)
	}
}

// setKlog makes klog write to a capture for the rest of the test.
func setKlog(t *testing.T, verbosity int) *capture {
	c := &capture{}
	// Contextual: klog.Background() is then this logger, with its own
	// verbosity, instead of klog's flags.
	klog.SetLoggerWithOptions(c.logger(verbosity), klog.ContextualLogger(true))
	t.Cleanup(klog.ClearLogger)
	return c
}

// TestStartStructuredLogging: "Event occurred" at the given verbosity, as
// client-go logs it.
func TestStartStructuredLogging(t *testing.T) {
	logged := setKlog(t, 3)
	b := k8s.NewBroadcaster(quiet)
	b.StartStructuredLogging(3)
	b.StartStructuredLogging(4) // above the logger's verbosity: nothing
	b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl"}).
		Event(pod("prod", "web-0"), corev1.EventTypeNormal, "Started", "up")
	shutdown(t, b)
	text := logged.text()
	for _, want := range []string{`"msg"="Event occurred"`, `"object"={"name"="web-0" "namespace"="prod"}`, `"kind"="Pod"`, `"reason"="Started"`, `"message"="up"`} {
		if !strings.Contains(text, want) {
			t.Errorf("logged %s, want %s", text, want)
		}
	}
	if n := strings.Count(text, "Event occurred"); n != 1 {
		t.Errorf("logged %d times, want once (V(4) is above the logger's verbosity)", n)
	}
}

// TestReportsGoToKlog: without events.WithLogger, herald's reports go to
// klog: an invalid type (Error) always, a spam-filtered event (a routine
// decision, logged at Debug) at V(6) only.
func TestReportsGoToKlog(t *testing.T) {
	for _, verbosity := range []int{0, 2, 6} {
		logged := setKlog(t, verbosity)
		c := fake.NewClientset()
		b := k8s.NewBroadcaster()
		b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: c.CoreV1().Events("")})
		rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl"})
		rec.Event(pod("prod", "web-0"), "Bogus", "R", "m")
		for i := range 30 { // the spam filter lets 25 through
			rec.Eventf(pod("prod", "web-0"), corev1.EventTypeNormal, "R", "m%d", i%5)
		}
		shutdownLostInvalid(t, b)
		text := logged.text()
		if !strings.Contains(text, "Bogus") {
			t.Errorf("verbosity %d: the invalid type was not reported to klog: %s", verbosity, text)
		}
		if skipped := strings.Contains(text, "spam filter skipped"); skipped != (verbosity >= 6) {
			t.Errorf("verbosity %d: spam filter reported %v: %s", verbosity, skipped, text)
		}
		klog.ClearLogger()
	}
}

// blockingSink is a record.EventSink whose calls wait for release.
type blockingSink struct{ release chan struct{} }

func (s blockingSink) Create(e *corev1.Event) (*corev1.Event, error) { <-s.release; return e, nil }
func (s blockingSink) Update(e *corev1.Event) (*corev1.Event, error) { <-s.release; return e, nil }
func (s blockingSink) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) {
	<-s.release
	return e, nil
}

// TestShutdownBound: Shutdown gives up after WithShutdownTimeout (and by
// default after DefaultShutdownTimeout) on a sink that does not return;
// the event is counted as abandoned.
func TestShutdownBound(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []k8s.Option
		want time.Duration
	}{
		{"default", nil, k8s.DefaultShutdownTimeout},
		{"WithShutdownTimeout", []k8s.Option{k8s.WithShutdownTimeout(3 * time.Second)}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := k8s.NewBroadcaster(append([]k8s.Option{quiet}, tc.opts...)...)
				sink := blockingSink{release: make(chan struct{})}
				b.StartRecordingToSink(sink)
				rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl"})
				rec.Event(pod("prod", "web-0"), corev1.EventTypeNormal, "Started", "up") // in the sink
				// Queued: about the same object, so it waits for the first
				// whatever the sink concurrency.
				rec.Event(pod("prod", "web-0"), corev1.EventTypeNormal, "Killing", "down")
				start := time.Now()
				b.Shutdown()
				if took := time.Since(start); took != tc.want {
					t.Errorf("Shutdown took %v, want %v", took, tc.want)
				}
				close(sink.release)
				synctest.Wait() // the worker exits once the sink call returns
				if s := b.(*k8s.Broadcaster).Events().Stats(); s.Abandoned != 1 || s.Written != 1 {
					t.Errorf("Stats %+v, want 1 written (the call in progress), 1 abandoned", s)
				}
			})
		})
	}
}

// TestAfterShutdown: the Start methods return a closed, stoppable watch;
// recording neither panics nor blocks.
func TestAfterShutdown(t *testing.T) {
	b := k8s.NewBroadcaster(quiet)
	rec := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl"})
	shutdown(t, b)
	b.Shutdown() // again: no panic, returns
	logged := setKlog(t, 0)
	for _, w := range []interface{ Stop() }{
		b.StartEventWatcher(func(*corev1.Event) {}),
		b.StartRecordingToSink(blockingSink{}),
		b.StartLogging(func(string, ...any) {}),
		b.StartStructuredLogging(0),
	} {
		w.Stop()
	}
	if n := strings.Count(logged.text(), "Unable start event watcher"); n != 4 {
		t.Errorf("%d errors logged for 4 Starts after Shutdown: %s", n, logged.text())
	}
	rec.Event(pod("prod", "web-0"), corev1.EventTypeNormal, "Late", "m")
	if s := b.(*k8s.Broadcaster).Events().Stats(); s.Dropped != 1 {
		t.Errorf("Stats %+v, want the late event dropped", s)
	}
}

func TestConfigurationPanics(t *testing.T) {
	for name, f := range map[string]func(){
		"WithShutdownTimeout(0)":    func() { k8s.WithShutdownTimeout(0) },
		"StartRecordingToSink(nil)": func() { k8s.NewBroadcaster().StartRecordingToSink(nil) },
		"StartEventWatcher(nil)":    func() { k8s.NewBroadcaster().StartEventWatcher(nil) },
		"StartLogging(nil)":         func() { k8s.NewBroadcaster().StartLogging(nil) },
	} {
		func() {
			defer func() {
				if r, _ := recover().(string); !strings.HasPrefix(r, "k8s: ") {
					t.Errorf("%s: recovered %q, want a k8s: panic", name, r)
				}
			}()
			f()
		}()
	}
}

// TestWithShutdownTimeoutIsRemoved: NewBroadcaster takes its own option out
// before handing the rest to herald, where it would stand for
// events.WithLogger(nil) and replace the logger given before it.
func TestWithShutdownTimeoutIsRemoved(t *testing.T) {
	var buf strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return buf.Write(p)
	}), nil))
	b := k8s.NewBroadcaster(k8s.WithEventsOptions(events.WithLogger(logger)), k8s.WithShutdownTimeout(time.Second))
	b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ctrl"}).Event(pod("prod", "web-0"), "Bogus", "R", "m")
	shutdownLostInvalid(t, b)
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(buf.String(), "Bogus") {
		t.Fatalf("the logger given before WithShutdownTimeout got %q, want the invalid event reported", buf.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
