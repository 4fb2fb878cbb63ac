// Command tracing shows W3C trace context travelling with values through
// natsbridge: the sender's span context goes out in each message's headers
// (traceparent) and comes back into the received value, where the receiver
// starts a child span from it.
//
// It runs an embedded nats-server on a random loopback port, sends a few
// orders, each in its own span, and one outside any span, and prints every
// span as it ends: each "receive" span has the trace ID of its "send" span
// and that span's ID as its (remote) parent; the order sent outside any
// span starts a trace of its own.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
)

// Order is the value the processes share. ctx is its trace context:
// unexported, so the JSON codec leaves it out; the two hooks below carry
// it in the message headers instead.
type Order struct {
	ID   int    `json:"id"`
	Item string `json:"item"`
	ctx  context.Context
}

// Context is the order's trace context (context.Background if it has none).
func (o Order) Context() context.Context {
	if o.ctx == nil {
		return context.Background()
	}
	return o.ctx
}

var propagator = propagation.TraceContext{}

// injectTrace is Options.Headers: run by the outgoing link for every value
// it sends, it writes the value's span context into the message's headers
// (nothing if the value has none).
func injectTrace(o Order, h nats.Header) {
	propagator.Inject(o.Context(), natsHeader(h))
}

// extractTrace is Options.FromHeaders: run by the incoming link for every
// value it decodes, it puts the span context found in the headers into the
// value that the inbox publishes.
func extractTrace(h nats.Header, o Order) Order {
	o.ctx = propagator.Extract(context.Background(), natsHeader(h))
	return o
}

// natsHeader is a propagation.TextMapCarrier over a message's headers.
// NATS header names are case-sensitive: it writes them as the propagator
// spells them ("traceparent", as W3C does) and reads them in any case
// (propagation.HeaderCarrier, through http.Header, writes "Traceparent").
type natsHeader nats.Header

func (h natsHeader) Get(key string) string {
	if v := nats.Header(h).Get(key); v != "" {
		return v
	}
	for k, v := range h {
		if strings.EqualFold(k, key) && len(v) > 0 {
			return v[0]
		}
	}
	return ""
}

func (h natsHeader) Set(key, value string) { nats.Header(h).Set(key, value) }
func (h natsHeader) Keys() []string        { return slices.Collect(maps.Keys(h)) }

func main() {
	srv, err := startServer()
	if err != nil {
		log.Fatal(err)
	}
	// Spans are printed as they end (WithSyncer: no goroutine of its own).
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(printer{os.Stdout}))
	err = run(srv.ClientURL(), tp.Tracer("herald-tracing-example"), []string{"tea", "milk", "bread"})
	err = errors.Join(err, tp.Shutdown(context.Background()))
	srv.Shutdown()
	srv.WaitForShutdown()
	if err != nil {
		log.Fatal(err)
	}
}

// startServer runs an embedded nats-server on a random loopback port.
func startServer() (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, NoLog: true, NoSigs: true})
	if err != nil {
		return nil, err
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, errors.New("nats-server: not ready")
	}
	return srv, nil
}

// run bridges an outbox to an inbox through the NATS server at url, on one
// subject, and sends one order per item, each in its own "send" span, then
// one more outside any span. Each order the inbox receives is handled in a
// "receive" span started from the order's context. It waits for each order
// before sending the next, so that the spans end (and print) in order.
func run(url string, tracer trace.Tracer, items []string) (err error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()

	codec := natsbridge.JSON[Order]()
	outbox, inbox := broadcast.New[Order](), broadcast.New[Order]()
	out, err := natsbridge.OutWith(outbox, nc, "orders", codec, natsbridge.Options[Order]{
		Watch:   []broadcast.Option{broadcast.WithPolicy(broadcast.Block)},
		Headers: injectTrace,
	})
	if err != nil {
		return err
	}
	in, err := natsbridge.InWith(nc, "orders", codec, inbox, natsbridge.Options[Order]{
		FromHeaders: extractTrace,
	})
	if err != nil {
		out.Close(context.Background())
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err = errors.Join(err, out.Close(ctx), in.Close(ctx), outbox.Shutdown(ctx), inbox.Shutdown(ctx))
	}()
	w, err := inbox.Watch()
	if err != nil {
		return err
	}

	receive := func() error {
		select {
		case o := <-w.C():
			handle(tracer, o)
			return nil
		case <-time.After(5 * time.Second):
			return errors.New("an order was not received")
		}
	}
	for i, item := range items {
		ctx, span := tracer.Start(context.Background(), "send",
			trace.WithAttributes(attribute.Int("order.id", i+1)))
		err := outbox.Publish(Order{ID: i + 1, Item: item, ctx: ctx})
		span.End()
		if err != nil {
			return err
		}
		if err := receive(); err != nil {
			return err
		}
	}
	if err := outbox.Publish(Order{ID: len(items) + 1, Item: "no span"}); err != nil {
		return err
	}
	return receive()
}

// handle is the receiver's work on an order, in a span that continues the
// sender's trace when the order carries one.
func handle(tracer trace.Tracer, o Order) {
	_, span := tracer.Start(o.Context(), "receive",
		trace.WithAttributes(attribute.Int("order.id", o.ID)))
	defer span.End()
	// ... the order's processing, with the span's context passed on.
}

// printer is a span exporter that prints each span: its order, trace ID,
// span ID and parent span ID.
type printer struct{ w io.Writer }

func (p printer) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	for _, s := range spans {
		parent := "none"
		if s.Parent().IsValid() {
			parent = s.Parent().SpanID().String()
			if s.Parent().IsRemote() {
				parent += " (remote)"
			}
		}
		id := ""
		for _, a := range s.Attributes() {
			if a.Key == "order.id" {
				id = a.Value.String()
			}
		}
		fmt.Fprintf(p.w, "%-7s order %s  trace %s  span %s  parent %s\n",
			s.Name(), id, s.SpanContext().TraceID(), s.SpanContext().SpanID(), parent)
	}
	return nil
}

func (printer) Shutdown(context.Context) error { return nil }
