package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/nats-io/nats.go"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine is left behind: run closes its
// links, broadcasters and connection, and the tests stop their server.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestTraceContextTravels runs the program's flow with a span recorder:
// every received order's span is a child of the span that sent it (same
// trace, the sender's span as its remote parent), and the order sent
// outside any span arrives with no parent, in a trace of its own.
func TestTraceContextTravels(t *testing.T) {
	srv, err := startServer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })

	items := make([]string, 20)
	for i := range items {
		items[i] = fmt.Sprint("item ", i+1)
	}
	if err := run(srv.ClientURL(), tp.Tracer("test"), items); err != nil {
		t.Fatal(err)
	}

	sent := map[int64]sdktrace.ReadOnlySpan{}
	received := map[int64]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		id := orderID(t, s)
		byID := map[string]map[int64]sdktrace.ReadOnlySpan{"send": sent, "receive": received}[s.Name()]
		if byID == nil {
			t.Fatalf("unexpected span %q", s.Name())
		}
		if byID[id] != nil {
			t.Fatalf("two %q spans for order %d", s.Name(), id)
		}
		byID[id] = s
	}
	n := int64(len(items))
	if len(sent) != int(n) || len(received) != int(n)+1 {
		t.Fatalf("%d send and %d receive spans, want %d and %d", len(sent), len(received), n, n+1)
	}

	traces := map[trace.TraceID]bool{}
	for id := int64(1); id <= n; id++ {
		s, r := sent[id], received[id]
		if s == nil || r == nil {
			t.Fatalf("order %d: send span %v, receive span %v", id, s != nil, r != nil)
		}
		sc := s.SpanContext()
		if traces[sc.TraceID()] {
			t.Fatalf("order %d: trace %s already used by another order", id, sc.TraceID())
		}
		traces[sc.TraceID()] = true
		p := r.Parent()
		if r.SpanContext().TraceID() != sc.TraceID() || p.TraceID() != sc.TraceID() || p.SpanID() != sc.SpanID() || !p.IsRemote() {
			t.Errorf("order %d: receive span in trace %s with parent %s/%s (remote %v), want a child of the send span %s/%s",
				id, r.SpanContext().TraceID(), p.TraceID(), p.SpanID(), p.IsRemote(), sc.TraceID(), sc.SpanID())
		}
	}
	r := received[n+1]
	if r == nil {
		t.Fatal("the order sent outside any span: no receive span")
	}
	if r.Parent().IsValid() {
		t.Errorf("the order sent outside any span arrived with parent %s/%s (remote %v), want none",
			r.Parent().TraceID(), r.Parent().SpanID(), r.Parent().IsRemote())
	}
	if traces[r.SpanContext().TraceID()] {
		t.Errorf("the order sent outside any span is in a sender's trace %s", r.SpanContext().TraceID())
	}
}

func orderID(t *testing.T, s sdktrace.ReadOnlySpan) int64 {
	t.Helper()
	for _, a := range s.Attributes() {
		if a.Key == "order.id" {
			return a.Value.AsInt64()
		}
	}
	t.Fatalf("span %q without order.id", s.Name())
	return 0
}

// TestNatsHeader: the carrier writes the W3C names as they are and reads
// them in any case (a sender that used propagation.HeaderCarrier writes
// "Traceparent"); no header at all (a foreign message) gives no parent.
func TestNatsHeader(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	ctx := propagator.Extract(context.Background(), propagation.MapCarrier{"traceparent": tp})
	want := trace.SpanContextFromContext(ctx)
	if !want.IsValid() {
		t.Fatal("test traceparent not valid")
	}

	h := nats.Header{}
	injectTrace(Order{ctx: ctx}, h)
	if got := h.Get("traceparent"); got != tp {
		t.Errorf("injected traceparent %q, want %q (headers %v)", got, tp, h)
	}

	canon := http.Header{}
	propagation.HeaderCarrier(canon).Set("traceparent", tp)
	for _, h := range []nats.Header{h, nats.Header(canon)} {
		got := trace.SpanContextFromContext(extractTrace(h, Order{}).Context())
		if !got.Equal(want) {
			t.Errorf("extracted from %v: %v, want %v", h, got, want)
		}
	}

	if sc := trace.SpanContextFromContext(extractTrace(nil, Order{}).Context()); sc.IsValid() {
		t.Errorf("no headers: extracted %v, want nothing", sc)
	}
	h = nats.Header{}
	injectTrace(Order{}, h)
	if len(h) != 0 {
		t.Errorf("a value without a span injected %v", h)
	}
}
