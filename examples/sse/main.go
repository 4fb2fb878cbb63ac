// Command sse fans a stream out to Server-Sent-Events clients over HTTP,
// with Last-Event-ID resume: a client that reconnects gets every value it
// missed that the broadcaster still keeps, then the live stream, with no
// gap and no duplicate.
//
//	go run ./examples/sse -addr localhost:8080
//	curl -N localhost:8080/events                           # live
//	curl -N -H 'Last-Event-ID: 5' localhost:8080/events     # from 6 on
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/heraldgo/herald/broadcast"
)

// Handler serves the values of a broadcaster as Server-Sent Events: each
// value is an event whose id is its sequence number.
type Handler struct {
	B *broadcast.Broadcaster[string]
	// QueueLength is each client's queue; a client that falls that far
	// behind is evicted and reconnects with Last-Event-ID (browsers do so
	// by themselves). 0 means 256.
	QueueLength int
}

// ServeHTTP streams events until the client goes away, the client falls
// too far behind (then it should reconnect), or the broadcaster shuts down.
// A Last-Event-ID header resumes after that event; 410 Gone if it is no
// longer kept.
func (h *Handler) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	flusher, ok := rw.(http.Flusher)
	if !ok {
		http.Error(rw, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	qlen := h.QueueLength
	if qlen == 0 {
		qlen = 256
	}
	opts := []broadcast.Option{
		broadcast.WithContext(r.Context()), // the watcher ends with the request
		broadcast.WithPolicy(broadcast.Evict),
		broadcast.WithQueueLength(qlen),
	}
	var w *broadcast.Watcher[string]
	var err error
	if id := r.Header.Get("Last-Event-ID"); id != "" {
		last, perr := strconv.ParseUint(id, 10, 64)
		if perr != nil {
			http.Error(rw, "bad Last-Event-ID", http.StatusBadRequest)
			return
		}
		if last == math.MaxUint64 {
			// last+1 would wrap to 0, which WatchFrom reads as "everything
			// kept": no event has that ID, so it is a bad header.
			http.Error(rw, "bad Last-Event-ID", http.StatusBadRequest)
			return
		}
		w, err = h.B.WatchFrom(last+1, opts...)
	} else {
		w, err = h.B.Watch(opts...)
	}
	switch {
	case errors.Is(err, broadcast.ErrOutOfRange):
		http.Error(rw, err.Error(), http.StatusGone)
		return
	case err != nil:
		http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer w.Stop()

	rw.Header().Set("Content-Type", "text/event-stream")
	rw.Header().Set("Cache-Control", "no-cache")
	rw.WriteHeader(http.StatusOK)
	flusher.Flush()
	for seq, v := range w.Seq() {
		if _, err := fmt.Fprintf(rw, "id: %d\ndata: %s\n\n", seq, v); err != nil {
			return // the client went away
		}
		if w.Len() == 0 {
			flusher.Flush() // caught up: send what is buffered
		}
	}
	flusher.Flush()
}

func main() {
	addr := flag.String("addr", "localhost:8080", "listen address")
	every := flag.Duration("every", time.Second, "how often the demo publishes a value")
	flag.Parse()

	b := broadcast.New[string](broadcast.WithHistory(1000))
	srv := &http.Server{Addr: *addr, Handler: http.NewServeMux()}
	srv.Handler.(*http.ServeMux).Handle("/events", &Handler{B: b})

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	go func() {
		t := time.NewTicker(*every)
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				b.Publish(fmt.Sprintf("tick %d at %s", n, now.Format(time.TimeOnly)))
			}
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		b.Shutdown(sctx) // ends every stream
		srv.Shutdown(sctx)
	}()
	log.Printf("serving Server-Sent Events on http://%s/events", *addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
