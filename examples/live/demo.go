package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/metrics"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

//go:embed static
var static embed.FS

// broadcasterName is the broadcaster label of the demo's stream in /metrics.
const broadcasterName = "ticks"

// A kind is one panel of the page: a watcher policy and how fast its
// reader (the server side of the Server-Sent Events stream) reads.
type kind struct {
	Policy string // shown on the page
	opts   []broadcast.Option
	Queue  int           // queue length, shown on the page
	Delay  time.Duration // the reader's pause after each value: a slow reader
}

// config sets the demo's pace.
type config struct {
	Tick  time.Duration // one value published per Tick
	Burst int           // values published at once by the burst button
	Kinds map[string]kind
}

// defaultConfig: 5 values a second. The lossy reader keeps up with that
// (one value per 150 ms) but not with a burst; the latest reader reads two
// values a second and so always loses some.
func defaultConfig() config {
	return config{
		Tick:  200 * time.Millisecond,
		Burst: 200,
		Kinds: kinds(5, 150*time.Millisecond, 500*time.Millisecond),
	}
}

// kinds returns the three panels: lossless (Block, the default queue, a
// fast reader), lossy (Drop, a small queue, a slow reader) and latest
// (DropOldest, a queue of one, a slower reader).
func kinds(lossyQueue int, lossyDelay, latestDelay time.Duration) map[string]kind {
	return map[string]kind{
		"lossless": {Policy: "Block", Queue: 1000,
			opts: []broadcast.Option{broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1000)}},
		"lossy": {Policy: "Drop", Queue: lossyQueue, Delay: lossyDelay,
			opts: []broadcast.Option{broadcast.WithPolicy(broadcast.Drop), broadcast.WithQueueLength(lossyQueue)}},
		"latest": {Policy: "DropOldest", Queue: 1, Delay: latestDelay,
			opts: []broadcast.Option{broadcast.WithPolicy(broadcast.DropOldest), broadcast.WithQueueLength(1)}},
	}
}

// demo publishes a counter into a broadcaster and serves it: the page,
// one Server-Sent Events stream per watcher, a burst button and /metrics.
type demo struct {
	cfg      config
	b        *broadcast.Broadcaster[uint64]
	col      *metrics.Collector
	registry *prometheus.Registry
	ids      atomic.Uint64 // numbers the watchers' names

	pubMu sync.Mutex // serializes publishing, so that values arrive in counter order
	next  uint64     // the last value published; guarded by pubMu

	cancel context.CancelFunc
	done   chan struct{} // closed when the ticker goroutine has exited
}

// newDemo starts the ticker. Close stops it.
func newDemo(cfg config) *demo {
	d := &demo{
		cfg:      cfg,
		b:        broadcast.New[uint64](),
		col:      metrics.NewCollector(),
		registry: prometheus.NewRegistry(),
		done:     make(chan struct{}),
	}
	d.col.Add(broadcasterName, d.b)
	d.registry.MustRegister(d.col, collectors.NewGoCollector())
	ctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go d.tick(ctx)
	return d
}

func (d *demo) tick(ctx context.Context) {
	defer close(d.done)
	t := time.NewTicker(d.cfg.Tick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, _, err := d.publish(ctx, 1); err != nil {
				return
			}
		}
	}
}

// publish publishes the next n counter values and returns the first and
// last published.
func (d *demo) publish(ctx context.Context, n int) (first, last uint64, err error) {
	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	first = d.next + 1
	for range n {
		if err := d.b.PublishContext(ctx, d.next+1); err != nil {
			return first, d.next, err
		}
		d.next++
	}
	return first, d.next, nil
}

// Close stops the ticker and shuts the broadcaster down, which ends every
// event stream (their handlers return); then the HTTP server can be shut
// down.
func (d *demo) Close(ctx context.Context) error {
	d.cancel()
	<-d.done
	return d.b.Shutdown(ctx)
}

// handler serves the page, the streams, the burst button, /stats and
// /metrics.
func (d *demo) handler() http.Handler {
	page, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	mux := http.NewServeMux()
	mux.Handle("GET /", http.FileServerFS(page))
	mux.HandleFunc("GET /events", d.serveEvents)
	mux.HandleFunc("POST /burst", d.serveBurst)
	mux.HandleFunc("GET /stats", d.serveStats)
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.registry, promhttp.HandlerOpts{}))
	return mux
}

// serveEvents streams the broadcaster to one new watcher of the kind given
// in ?kind= as Server-Sent Events: a "hello" event naming the watcher, then
// one "value" event per value, carrying the watcher's drop count and how
// many values it still holds (its queue depth). The
// watcher is registered with the metrics Collector while the stream lasts.
func (d *demo) serveEvents(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("kind")
	k, ok := d.cfg.Kinds[name]
	if !ok {
		http.Error(w, fmt.Sprintf("unknown kind %q", name), http.StatusBadRequest)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	wt, err := d.b.Watch(k.opts...)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer wt.Stop()
	// The client going away stops the watcher, which ends the loop below
	// even while it waits for a value.
	defer context.AfterFunc(r.Context(), wt.Stop)()

	watcher := name + "-" + strconv.FormatUint(d.ids.Add(1), 10)
	d.col.AddWatcher(broadcasterName, watcher, wt)
	defer d.col.RemoveWatcher(broadcasterName, watcher)

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	hello, _ := json.Marshal(map[string]any{
		"watcher": watcher, "policy": k.Policy, "queue": k.Queue, "delayMs": k.Delay.Milliseconds(),
	})
	fmt.Fprintf(w, "event: hello\ndata: %s\n\n", hello)
	flusher.Flush()

	var pause *time.Timer
	if k.Delay > 0 {
		pause = time.NewTimer(k.Delay)
		defer pause.Stop()
	}
	for v := range wt.All() {
		// queued: what the watcher holds after this value (Len), the depth
		// the page plots.
		if _, err := fmt.Fprintf(w, "id: %d\nevent: value\ndata: {\"value\":%d,\"dropped\":%d,\"queued\":%d}\n\n", v, v, wt.Dropped(), wt.Len()); err != nil {
			return
		}
		flusher.Flush()
		if pause != nil {
			pause.Reset(k.Delay)
			select {
			case <-pause.C:
			case <-r.Context().Done():
				return
			}
		}
	}
}

// serveBurst publishes Burst values at once.
func (d *demo) serveBurst(w http.ResponseWriter, r *http.Request) {
	first, last, err := d.publish(r.Context(), d.cfg.Burst)
	if err != nil && !errors.Is(err, context.Canceled) {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]uint64{"first": first, "last": last})
}

// serveStats returns the broadcaster's Stats as JSON, for the page's header.
func (d *demo) serveStats(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(d.b.Stats())
}
