// Command live is herald's live demo: a counter published a few times a
// second into a broadcaster, watched by Server-Sent Events streams in a web
// page (one panel per watcher policy: lossless Block, lossy Drop with a slow
// reader, DropOldest with a slower one), with each watcher's drop counter,
// a burst button, and the Prometheus figures at /metrics.
//
//	go run ./examples/live            # from this directory's module: go run .
//	go run . -addr 127.0.0.1:9000
//
// It prints the URL to open. Every browser tab opens its own watchers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "address to listen on (port 0: any free port)")
	flag.Parse()

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	d := newDemo(defaultConfig())
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 5 * time.Second}
	fmt.Printf("herald live demo: http://%s/  (metrics: http://%s/metrics; Ctrl-C stops)\n", ln.Addr(), ln.Addr())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	select {
	case <-ctx.Done():
	case err := <-served:
		log.Fatal(err)
	}

	// Shutting the broadcaster down first ends the event streams, so that
	// the HTTP server's Shutdown does not wait for them.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := d.Close(sctx); err != nil {
		log.Print(err)
	}
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
	}
}
