package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/heraldgo/herald/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape serves reg through promhttp on a test server, GETs it once and
// parses the text exposition.
func scrape(t *testing.T, reg *prometheus.Registry) map[string]*dto.MetricFamily {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s: %s", resp.Status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("scrape: Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parsing the scrape: %v\n%s", err, body)
	}
	return mfs
}

// flatten turns families into "name{l="v",...}" -> value.
func flatten(mfs map[string]*dto.MetricFamily) map[string]float64 {
	out := make(map[string]float64)
	for name, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			key := name + "{" + strings.Join(ls, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			default:
				out[key] = -1 // a type herald never exports: fails the comparison
			}
		}
	}
	return out
}

// promWant is the workload's exposition: every series with its value.
func promWant(w *workload) map[string]float64 {
	want := map[string]float64{
		`herald_broadcast_published_total{broadcaster="orders"}`:                        10,
		`herald_broadcast_dropped_total{broadcaster="orders"}`:                          15,
		`herald_broadcast_watchers{broadcaster="orders"}`:                               2,
		`herald_broadcast_watcher_dropped_total{broadcaster="orders",watcher="lossy"}`:  7,
		`herald_broadcast_watcher_dropped_total{broadcaster="orders",watcher="latest"}`: 8,
		`herald_broadcast_watcher_dropped_total{broadcaster="other",watcher="fake"}`:    5,
		`herald_broadcast_watcher_queued{broadcaster="other",watcher="fake"}`:           2,
		`herald_broadcast_watcher_ended{broadcaster="other",watcher="fake"}`:            1,
		`herald_events_recorded_total{broadcaster="recorder"}`:                          2,
		`herald_events_invalid_total{broadcaster="recorder"}`:                           1,
		`herald_events_dropped_total{broadcaster="recorder"}`:                           0,
		`herald_events_skipped_total{broadcaster="recorder"}`:                           0,
		`herald_events_aggregated_total{broadcaster="recorder"}`:                        0,
		`herald_events_written_total{broadcaster="recorder"}`:                           0,
		`herald_events_failed_total{broadcaster="recorder"}`:                            0,
		`herald_events_abandoned_total{broadcaster="recorder"}`:                         0,
		`herald_events_handled_total{broadcaster="recorder"}`:                           2,
	}
	// Once broadcast.Watcher has Len and Err, the real watchers get
	// these series too: a never-read watcher holds its queue length.
	if hasLen(w.lossy) {
		want[`herald_broadcast_watcher_queued{broadcaster="orders",watcher="lossy"}`] = 3
		want[`herald_broadcast_watcher_queued{broadcaster="orders",watcher="latest"}`] = 2
	}
	if hasErr(w.lossy) {
		want[`herald_broadcast_watcher_ended{broadcaster="orders",watcher="lossy"}`] = 0
		want[`herald_broadcast_watcher_ended{broadcaster="orders",watcher="latest"}`] = 0
	}
	return want
}

func TestPrometheusScrape(t *testing.T) {
	w := newWorkload(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w.c)
	mfs := scrape(t, reg)

	if diff := cmp.Diff(promWant(w), flatten(mfs)); diff != "" {
		t.Errorf("series (-want +got):\n%s", diff)
	}

	// Names, types and help, family by family.
	type meta struct {
		Type dto.MetricType
		Help string
	}
	counter := func(help string) meta { return meta{dto.MetricType_COUNTER, help} }
	gauge := func(help string) meta { return meta{dto.MetricType_GAUGE, help} }
	wantMeta := map[string]meta{
		"herald_broadcast_published_total":       counter("Values the broadcaster accepted (Publish, PublishContext, TryPublish)."),
		"herald_broadcast_dropped_total":         counter("Deliveries lost to the watchers' policies, over all watchers, stopped ones included."),
		"herald_broadcast_watchers":              gauge("Watchers currently registered."),
		"herald_broadcast_watcher_dropped_total": counter("Values this watcher lost to its policy."),
		"herald_broadcast_watcher_queued":        gauge("Values queued for this watcher and not yet received."),
		"herald_broadcast_watcher_ended":         gauge("1 once the watcher was ended by eviction, Shutdown or its context (its Err is not nil), else 0."),
		"herald_events_recorded_total":           counter("Events the Recorders accepted."),
		"herald_events_invalid_total":            counter("Events the Recorders refused as invalid (a type other than Normal or Warning, for one)."),
		"herald_events_dropped_total":            counter("Events lost before a watcher or sink saw them (a full queue, or recorded after Shutdown)."),
		"herald_events_skipped_total":            counter("Events the spam filter kept from a sink."),
		"herald_events_aggregated_total":         counter("Events written as part of an aggregate event."),
		"herald_events_written_total":            counter("Events a sink stored."),
		"herald_events_failed_total":             counter("Events a sink did not store, or a watcher did not handle: rejected, out of tries, given up, or discarded at Stop."),
		"herald_events_abandoned_total":          counter("Events still queued or being retried when Shutdown's context ended."),
		"herald_events_handled_total":            counter("Events given to the handlers of StartEventWatcher, StartLogging and StartStructuredLogging."),
	}
	gotMeta := make(map[string]meta)
	for name, mf := range mfs {
		gotMeta[name] = meta{mf.GetType(), mf.GetHelp()}
	}
	if diff := cmp.Diff(wantMeta, gotMeta); diff != "" {
		t.Errorf("families (-want +got):\n%s", diff)
	}
}

// TestPrometheusLint runs client_golang's linter (promlint) over the
// exposition: counters end in _total, no unit problems, help present.
func TestPrometheusLint(t *testing.T) {
	w := newWorkload(t)
	problems, err := testutil.CollectAndLint(w.c)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestPrometheusFollowsTheSources checks that figures are read at scrape
// time, not at Add, and that removed sources disappear.
func TestPrometheusFollowsTheSources(t *testing.T) {
	w := newWorkload(t)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w.c)

	for i := range 5 {
		if err := w.b.Publish(100 + i); err != nil {
			t.Fatal(err)
		}
	}
	got := flatten(scrape(t, reg))
	for key, want := range map[string]float64{
		`herald_broadcast_published_total{broadcaster="orders"}`:                        15,
		`herald_broadcast_dropped_total{broadcaster="orders"}`:                          25,
		`herald_broadcast_watcher_dropped_total{broadcaster="orders",watcher="lossy"}`:  12,
		`herald_broadcast_watcher_dropped_total{broadcaster="orders",watcher="latest"}`: 13,
	} {
		if got[key] != want {
			t.Errorf("after 5 more values: %s = %v, want %v", key, got[key], want)
		}
	}

	w.lossy.Stop()
	got = flatten(scrape(t, reg))
	if v := got[`herald_broadcast_watchers{broadcaster="orders"}`]; v != 1 {
		t.Errorf("after Stop: watchers = %v, want 1", v)
	}

	w.c.Remove("orders")
	w.c.RemoveWatcher("orders", "lossy")
	w.c.RemoveEvents("recorder")
	w.c.Remove("never added") // a no-op
	got = flatten(scrape(t, reg))
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	want := []string{
		`herald_broadcast_watcher_dropped_total{broadcaster="orders",watcher="latest"}`,
		`herald_broadcast_watcher_dropped_total{broadcaster="other",watcher="fake"}`,
		`herald_broadcast_watcher_ended{broadcaster="other",watcher="fake"}`,
		`herald_broadcast_watcher_queued{broadcaster="other",watcher="fake"}`,
	}
	if hasLen(w.latest) {
		want = append(want, `herald_broadcast_watcher_queued{broadcaster="orders",watcher="latest"}`)
	}
	if hasErr(w.latest) {
		want = append(want, `herald_broadcast_watcher_ended{broadcaster="orders",watcher="latest"}`)
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("after Remove (-want +got):\n%s", diff)
	}
}

// TestPrometheusPanickingSource checks that a source that panics fails the
// scrape with a clear error (promhttp's default) and, with ContinueOnError,
// leaves the other sources' series in it.
func TestPrometheusPanickingSource(t *testing.T) {
	w := newWorkload(t)
	w.c.Add("broken", panicSource{})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(w.c)

	mfs, err := reg.Gather()
	if err == nil || !strings.Contains(err.Error(), "metrics: a source panicked during collection: boom") {
		t.Fatalf("Gather error = %v, want the source's panic", err)
	}
	byName := make(map[string]*dto.MetricFamily)
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	got := flatten(byName)
	if diff := cmp.Diff(promWant(w), got); diff != "" {
		t.Errorf("the other sources (-want +got):\n%s", diff)
	}
}

func TestAddPanics(t *testing.T) {
	c := metrics.NewCollector()
	c.Add("a", panicSource{})
	c.AddWatcher("a", "w", &fakeWatcher{})
	c.AddEvents("e", nil2events{})
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"empty name", func() { c.Add("", panicSource{}) }, "metrics: Add: the name must not be empty"},
		{"nil source", func() { c.Add("b", nil) }, "metrics: Add: the source must not be nil"},
		{"twice", func() { c.Add("a", panicSource{}) }, `metrics: Add: a broadcaster named "a" was already added`},
		{"watcher empty", func() { c.AddWatcher("a", "", &fakeWatcher{}) }, "metrics: AddWatcher: the names must not be empty"},
		{"watcher nil", func() { c.AddWatcher("a", "x", nil) }, "metrics: AddWatcher: the watcher must not be nil"},
		{"watcher twice", func() { c.AddWatcher("a", "w", &fakeWatcher{}) }, `metrics: AddWatcher: a watcher named "w" of broadcaster "a" was already added`},
		{"events empty", func() { c.AddEvents("", nil2events{}) }, "metrics: AddEvents: the name must not be empty"},
		{"events nil", func() { c.AddEvents("f", nil) }, "metrics: AddEvents: the source must not be nil"},
		{"events twice", func() { c.AddEvents("e", nil2events{}) }, `metrics: AddEvents: an event broadcaster named "e" was already added`},
		{"nil meter", func() { _, _ = c.RegisterOTel(nil) }, "metrics: RegisterOTel: the Meter must not be nil"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if got := fmt.Sprint(recover()); got != tc.want {
					t.Errorf("panic = %q, want %q", got, tc.want)
				}
			}()
			tc.f()
		})
	}
	// The same names are free again after a Remove.
	c.Remove("a")
	c.Add("a", panicSource{})
	c.RemoveWatcher("a", "w")
	c.AddWatcher("a", "w", &fakeWatcher{})
	c.RemoveEvents("e")
	c.AddEvents("e", nil2events{})
}
