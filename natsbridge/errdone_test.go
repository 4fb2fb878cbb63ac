package natsbridge_test

import (
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// TestInConnectionClosedForGood: when the connection closes for good, In
// stops: Done is closed and Err says why.
func TestInConnectionClosedForGood(t *testing.T) {
	s := startServer(t, natstest.Config{})
	nc := connect(t, s.URL())
	b := broadcast.New[val]()
	defer shutdown(t, b)
	l, err := natsbridge.In(nc, "errdone.in", codec, b)
	if err != nil {
		t.Fatal(err)
	}
	if l.Err() != nil {
		t.Fatalf("Err while running: %v", l.Err())
	}
	select {
	case <-l.Done():
		t.Fatal("Done closed while running")
	default:
	}
	nc.Close()
	select {
	case <-l.Done():
	case <-time.After(guard):
		t.Fatal("Done not closed after the connection closed for good")
	}
	if !errors.Is(l.Err(), nats.ErrConnectionClosed) {
		t.Fatalf("Err = %v, want nats.ErrConnectionClosed", l.Err())
	}
	closeLink(t, l)
}

// TestDoneAfterClose: after Close, Done is closed and Err is nil.
func TestDoneAfterClose(t *testing.T) {
	s := startServer(t, natstest.Config{})
	nc := connect(t, s.URL())
	b := broadcast.New[val]()
	defer shutdown(t, b)
	in, err := natsbridge.In(nc, "errdone.close", codec, b)
	if err != nil {
		t.Fatal(err)
	}
	ob := broadcast.New[val]()
	defer shutdown(t, ob)
	out, err := natsbridge.Out(ob, nc, "errdone.close", codec)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []*natsbridge.Link{in, out} {
		closeLink(t, l)
		select {
		case <-l.Done():
		default:
			t.Fatalf("%s: Done not closed after Close", l.Subject())
		}
		if l.Err() != nil {
			t.Fatalf("Err after Close = %v", l.Err())
		}
	}
}

// TestOutConnectionClosedForGood: an Out whose connection closed for good
// stops at its next value: Done is closed and Err says why.
func TestOutConnectionClosedForGood(t *testing.T) {
	s := startServer(t, natstest.Config{})
	nc := connect(t, s.URL())
	b := broadcast.New[val]()
	defer shutdown(t, b)
	l, err := natsbridge.Out(b, nc, "errdone.out", codec)
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	b.Publish(val{N: 1})
	select {
	case <-l.Done():
	case <-time.After(guard):
		t.Fatal("Done not closed after the connection closed for good")
	}
	if !errors.Is(l.Err(), nats.ErrConnectionClosed) {
		t.Fatalf("Err = %v, want nats.ErrConnectionClosed", l.Err())
	}
	if st := l.Stats(); st.Failed != 1 {
		t.Fatalf("Failed = %d, want 1", st.Failed)
	}
	closeLink(t, l)
}
