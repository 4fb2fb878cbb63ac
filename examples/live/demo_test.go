package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// testConfig: a tick slow enough that the lossy reader (4 values of queue,
// 10 ms per value) always catches up between ticks, so that only a burst
// makes it drop and the drop count is final once a value published after
// the burst arrives.
func testConfig() config {
	return config{
		Tick:  200 * time.Millisecond,
		Burst: 100,
		Kinds: kinds(4, 10*time.Millisecond, 50*time.Millisecond),
	}
}

// startDemo serves a demo on a random loopback port until the test ends.
func startDemo(t *testing.T) (*demo, *httptest.Server) {
	t.Helper()
	d := newDemo(testConfig())
	srv := httptest.NewServer(d.handler())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := d.Close(ctx); err != nil {
			t.Errorf("demo Close: %v", err)
		}
		srv.Close()
	})
	return d, srv
}

// sseStream reads one Server-Sent Events stream.
type sseStream struct {
	body      io.Closer
	sc        *bufio.Scanner
	maxQueued int // the largest queue depth a value event reported
}

func openStream(t *testing.T, ctx context.Context, url string) *sseStream {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("GET %s: %s, Content-Type %q", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	t.Cleanup(func() { resp.Body.Close() })
	return &sseStream{body: resp.Body, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next event's type and data.
func (s *sseStream) next(t *testing.T) (event, data string) {
	t.Helper()
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if event != "" {
				return event, data
			}
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
	t.Fatalf("stream ended: %v", s.sc.Err())
	return "", ""
}

type valueEvent struct {
	Value   uint64 `json:"value"`
	Dropped uint64 `json:"dropped"`
	Queued  int    `json:"queued"`
}

func (s *sseStream) hello(t *testing.T) string {
	t.Helper()
	ev, data := s.next(t)
	if ev != "hello" {
		t.Fatalf("first event %q, want hello", ev)
	}
	var h struct{ Watcher string }
	if err := json.Unmarshal([]byte(data), &h); err != nil {
		t.Fatal(err)
	}
	return h.Watcher
}

func (s *sseStream) value(t *testing.T) valueEvent {
	t.Helper()
	ev, data := s.next(t)
	if ev != "value" {
		t.Fatalf("event %q, want value", ev)
	}
	var v valueEvent
	if err := json.Unmarshal([]byte(data), &v); err != nil {
		t.Fatal(err)
	}
	if v.Queued < 0 {
		t.Fatalf("value %d reports a queue depth of %d", v.Value, v.Queued)
	}
	s.maxQueued = max(s.maxQueued, v.Queued)
	return v
}

// readPast reads values until one greater than last arrives and returns
// how many arrived, the gaps between them and the last event.
func (s *sseStream) readPast(t *testing.T, last uint64) (received, gaps uint64, ev valueEvent) {
	t.Helper()
	var prev uint64
	for {
		ev = s.value(t)
		received++
		if prev != 0 {
			if ev.Value <= prev {
				t.Fatalf("value %d after %d: out of order or repeated", ev.Value, prev)
			}
			gaps += ev.Value - prev - 1
		}
		prev = ev.Value
		if ev.Value > last {
			return received, gaps, ev
		}
	}
}

func burst(t *testing.T, srv *httptest.Server) (first, last uint64) {
	t.Helper()
	resp, err := http.Post(srv.URL+"/burst", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b struct{ First, Last uint64 }
	if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
		t.Fatal(err)
	}
	return b.First, b.Last
}

// scrapeMetrics GETs /metrics and returns "name{watcher}" or "name" ->
// value for the demo broadcaster's series.
func scrapeMetrics(t *testing.T, srv *httptest.Server) map[string]float64 {
	t.Helper()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]float64)
	for name, mf := range mfs {
		if !strings.HasPrefix(name, "herald_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				if l.GetName() == "watcher" {
					key += "{" + l.GetValue() + "}"
				}
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[key] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestStreamsAndMetrics drives the demo without a browser: a lossless and a
// lossy stream, a burst, then the streams' counts against /metrics.
func TestStreamsAndMetrics(t *testing.T) {
	_, srv := startDemo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lossless := openStream(t, ctx, srv.URL+"/events?kind=lossless")
	lossy := openStream(t, ctx, srv.URL+"/events?kind=lossy")
	losslessName, lossyName := lossless.hello(t), lossy.hello(t)

	// Both watchers are registered (hello is sent after Watch returned),
	// so each receives the whole burst or counts what it lost.
	first, last := burst(t, srv)
	if last-first+1 != 100 {
		t.Fatalf("burst published %d-%d, want 100 values", first, last)
	}

	lr, lgaps, lev := lossless.readPast(t, last)
	if lgaps != 0 || lev.Dropped != 0 {
		t.Errorf("lossless: %d gaps, %d dropped; want none", lgaps, lev.Dropped)
	}
	if lr < 100 {
		t.Errorf("lossless received %d values, want the burst's 100 at least", lr)
	}
	_, gaps, ev := lossy.readPast(t, last)
	if ev.Dropped == 0 {
		t.Errorf("lossy: no drop after a burst of 100 into a queue of 4")
	}
	if gaps != ev.Dropped {
		t.Errorf("lossy: %d values missing between those received, %d counted as dropped", gaps, ev.Dropped)
	}
	// The burst filled the lossy watcher's queue of 4: the value read next
	// left 3 or 4 behind it, and no value ever reports more than the queue.
	if lossy.maxQueued < 3 || lossy.maxQueued > 4 {
		t.Errorf("lossy: largest queue depth reported %d, want 3 or 4 (a full queue of 4, less the value read)", lossy.maxQueued)
	}
	if lossless.maxQueued > 1000 {
		t.Errorf("lossless: queue depth %d beyond its queue length of 1000", lossless.maxQueued)
	}

	got := scrapeMetrics(t, srv)
	for key, want := range map[string]float64{
		"herald_broadcast_watcher_dropped_total{" + lossyName + "}":    float64(ev.Dropped),
		"herald_broadcast_watcher_dropped_total{" + losslessName + "}": 0,
		"herald_broadcast_watchers":                                    2,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("/metrics %s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	if p := got["herald_broadcast_published_total"]; p < float64(ev.Value) {
		t.Errorf("/metrics published %v, below the value %d received", p, ev.Value)
	}
}

func TestBadKind(t *testing.T) {
	_, srv := startDemo(t)
	resp, err := http.Get(srv.URL + "/events?kind=nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("unknown kind: %s, want 400", resp.Status)
	}
	if got := scrapeMetrics(t, srv)["herald_broadcast_watchers"]; got != 0 {
		t.Errorf("watchers after a refused stream = %v, want 0", got)
	}
}
