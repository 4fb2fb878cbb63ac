package natsbridge_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// lossBound is the bound on loss detection that guarantee 22 allows (the
// links document 2 s).
const lossBound = 5 * time.Second

// gaps returns, per origin, how many of the numbers 1..want[origin] are
// missing from got, and an error if an origin's values are repeated or out
// of order.
func gaps(got []val, want map[string]int) (map[string]int, error) {
	last := map[string]int{}
	seen := map[string]int{}
	for _, v := range got {
		n, ok := want[v.Origin]
		if !ok {
			return nil, fmt.Errorf("value from unknown origin %q", v.Origin)
		}
		if v.N <= last[v.Origin] || v.N > n {
			return nil, fmt.Errorf("origin %s: %d after %d (repeated, out of order or unknown)", v.Origin, v.N, last[v.Origin])
		}
		last[v.Origin] = v.N
		seen[v.Origin]++
	}
	missing := map[string]int{}
	for o, n := range want {
		missing[o] = n - seen[o]
	}
	return missing, nil
}

// collect reads w in a goroutine until it ends; values returns what it
// read so far.
type collector struct {
	mu   sync.Mutex
	got  []val
	done chan struct{}
}

func collect(w *broadcast.Watcher[val]) *collector {
	c := &collector{done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for v := range w.All() {
			c.mu.Lock()
			c.got = append(c.got, v)
			c.mu.Unlock()
		}
	}()
	return c
}

func (c *collector) values() []val {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]val(nil), c.got...)
}

// Guarantee 22, the scenario: two replicas, each with an Out and
// an In on one subject on its own connection to one server; 1000 values
// each; the server stops for 0.5 s mid-stream and starts again on the same
// port. At each In every value the Outs took is received or counted in
// Lost, per origin, within the bound after the last value; each Out's Sent
// and Failed add up to what it took, with nothing Pending after Close;
// losses are logged at Warn.
func TestLossAcrossRestart(t *testing.T) {
	logs := captureLogs(t)
	srv := startServer(t, natstest.Config{})
	const perOrigin = 1000
	type replica struct {
		name          string
		nc            *nats.Conn
		outbox, inbox *broadcast.Broadcaster[val]
		out, in       *natsbridge.Link
		got           *collector
	}
	var reps []*replica
	for _, name := range []string{"a", "b"} {
		r := &replica{name: name, nc: connect(t, srv.URL()), outbox: broadcast.New[val](), inbox: broadcast.New[val]()}
		var err error
		if r.in, err = natsbridge.In(r.nc, "loss", codec, r.inbox); err != nil {
			t.Fatal(err)
		}
		w, err := r.inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(10_000))
		if err != nil {
			t.Fatal(err)
		}
		r.got = collect(w)
		if r.out, err = natsbridge.Out(r.outbox, r.nc, "loss", codec, broadcast.WithPolicy(broadcast.Block)); err != nil {
			t.Fatal(err)
		}
		reps = append(reps, r)
	}
	// Both publish 1000 values over about 2 s; the server is down from
	// about 0.6 s to 1.1 s.
	var wg sync.WaitGroup
	for _, r := range reps {
		wg.Go(func() {
			for k := 1; k <= perOrigin; k++ {
				if err := r.outbox.Publish(val{Origin: r.name, N: k}); err != nil {
					t.Error(err)
					return
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(600 * time.Millisecond)
	if err := srv.Restart(500 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	last := time.Now()
	want := map[string]int{"a": perOrigin, "b": perOrigin}
	for _, r := range reps {
		eventually(t, "every value received or counted Lost at "+r.name, func() bool {
			s := r.in.Stats()
			return s.Received+s.Lost == 2*perOrigin
		})
		if d := time.Since(last); d > lossBound {
			t.Errorf("In %s: accounted for every value %v after the last one, want at most %v", r.name, d, lossBound)
		}
		s := r.in.Stats()
		// The values that arrived are published on the inbox before
		// Received counts them: wait until the collector has them all.
		eventually(t, "the collector", func() bool { return uint64(len(r.got.values())) == s.Received })
		missing, err := gaps(r.got.values(), want)
		if err != nil {
			t.Fatalf("In %s: %v", r.name, err)
		}
		if m := uint64(missing["a"] + missing["b"]); m != s.Lost || s.Failed != 0 {
			t.Errorf("In %s: stats %+v, values missing per origin %v (sum %d): want Lost == sum, Failed 0", r.name, s, missing, m)
		}
		t.Logf("In %s: %+v, missing per origin %v", r.name, s, missing)
	}
	var lost uint64
	for _, r := range reps {
		lost += r.in.Stats().Lost
		closeLink(t, r.out)
		if s := r.out.Stats(); s.Sent+s.Failed != perOrigin || s.Pending != 0 || s.Dropped != 0 {
			t.Errorf("Out %s: stats %+v, want Sent+Failed %d, Pending 0", r.name, s, perOrigin)
		}
		closeLink(t, r.in)
		shutdown(t, r.outbox)
		shutdown(t, r.inbox)
		<-r.got.done
	}
	if lost > 0 && !strings.Contains(strings.Join(logs.lines(), "\n"), "never arrived") {
		t.Errorf("%d values lost, no Warn line about it:\n%s", lost, strings.Join(logs.lines(), "\n"))
	}
}

// Guarantee 22, the last values before a quiet period: only the heartbeat
// tells the In that they were lost. (1) The In's connection is cut by the
// server and comes back after 0.5 s; the Out sends 5 values meanwhile,
// confirmed by the server, then nothing. (2) The last 2 values cannot be
// encoded: they have numbers, no message.
func TestLossTrailingHeartbeat(t *testing.T) {
	t.Run("transport", func(t *testing.T) {
		logs := captureLogs(t)
		srv := startServer(t, natstest.Config{})
		onc := connect(t, srv.URL())
		inc := connect(t, srv.URL(), nats.ReconnectWait(500*time.Millisecond))
		outbox, inbox := broadcast.New[val](), broadcast.New[val]()
		defer shutdown(t, outbox)
		defer shutdown(t, inbox)
		in, err := natsbridge.In(inc, "trail", codec, inbox)
		if err != nil {
			t.Fatal(err)
		}
		out, err := natsbridge.Out(outbox, onc, "trail", codec, broadcast.WithPolicy(broadcast.Block))
		if err != nil {
			t.Fatal(err)
		}
		w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(100))
		for k := 1; k <= 10; k++ {
			_ = outbox.Publish(val{Origin: "a", N: k})
		}
		if err := checkPerOrigin(receive(t, w, 10), map[string]int{"a": 10}); err != nil {
			t.Fatal(err)
		}
		subs := srv.Running().NumSubscriptions()
		cid, err := inc.GetClientID()
		if err != nil {
			t.Fatal(err)
		}
		if err := srv.Running().DisconnectClientByID(cid); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the In's subscription gone at the server", func() bool { return srv.Running().NumSubscriptions() < subs })
		for k := 11; k <= 15; k++ {
			_ = outbox.Publish(val{Origin: "a", N: k})
		}
		eventually(t, "the 5 confirmed by the server", func() bool { return out.Stats().Sent == 15 })
		sent := time.Now()
		if !inc.IsReconnecting() {
			t.Fatal("the In reconnected before the values were sent: the test shows nothing")
		}
		if s := in.Stats(); s.Lost != 0 {
			t.Fatalf("Lost = %d before the In is back", s.Lost)
		}
		eventually(t, "the 5 counted Lost", func() bool { return in.Stats().Lost == 5 })
		if d := time.Since(sent); d > lossBound {
			t.Errorf("the trailing loss was counted %v after the values were sent, want at most %v", d, lossBound)
		}
		if s := in.Stats(); s.Received != 10 || s.Failed != 0 {
			t.Errorf("In stats %+v, want Received 10, Failed 0", s)
		}
		if !strings.Contains(strings.Join(logs.lines(), "\n"), "5 values of origin") {
			t.Errorf("no Warn line about the 5 lost values:\n%s", strings.Join(logs.lines(), "\n"))
		}
		closeLink(t, out)
		closeLink(t, in)
		w.Stop()
	})
	t.Run("encode", func(t *testing.T) {
		logs := captureLogs(t)
		srv := startServer(t, natstest.Config{})
		nc := connect(t, srv.URL())
		outbox, inbox := broadcast.New[val](), broadcast.New[val]()
		defer shutdown(t, outbox)
		defer shutdown(t, inbox)
		in, err := natsbridge.In(nc, "trail.enc", codec, inbox)
		if err != nil {
			t.Fatal(err)
		}
		out, err := natsbridge.Out(outbox, nc, "trail.enc", failingCodec{codec}, broadcast.WithPolicy(broadcast.Block))
		if err != nil {
			t.Fatal(err)
		}
		w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(100))
		for _, n := range []int{1, 2, 3, -4, -5} {
			_ = outbox.Publish(val{Origin: "a", N: n})
		}
		if err := checkPerOrigin(receive(t, w, 3), map[string]int{"a": 3}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "both failures at the Out", func() bool { return out.Stats().Failed == 2 })
		failed := time.Now()
		eventually(t, "the 2 counted Lost", func() bool { return in.Stats().Lost == 2 })
		if d := time.Since(failed); d > lossBound {
			t.Errorf("the trailing loss was counted %v after the values, want at most %v", d, lossBound)
		}
		if !strings.Contains(strings.Join(logs.lines(), "\n"), "2 values of origin") {
			t.Errorf("no Warn line about the 2 lost values:\n%s", strings.Join(logs.lines(), "\n"))
		}
		closeLink(t, out)
		if s := out.Stats(); s.Sent != 3 || s.Failed != 2 || s.Pending != 0 {
			t.Errorf("Out stats %+v, want Sent 3, Failed 2", s)
		}
		closeLink(t, in)
		w.Stop()
	})
}

// Guarantee 23: the connection closes for good (2 reconnect attempts, 300
// ms apart, to a server that is gone). Both links die: Err says why, Done
// is closed, it is logged; a publisher waiting on the Out's full Block
// watcher goes on; what was Pending (in the reconnect buffer) is counted
// in Failed.
func TestClosedForGood(t *testing.T) {
	logs := captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL(), nats.MaxReconnects(2), nats.ReconnectWait(300*time.Millisecond))
	outbox, inbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, outbox)
	defer shutdown(t, inbox)
	in, err := natsbridge.In(nc, "dead", codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	slow := slowCodec{Codec: codec, d: 20 * time.Millisecond}
	out, err := natsbridge.Out(outbox, nc, "dead", slow, broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(1))
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 3; k++ {
		_ = outbox.Publish(val{Origin: "a", N: k})
	}
	eventually(t, "the first values sent", func() bool { return out.Stats().Sent == 3 })
	srv.Stop()
	eventually(t, "disconnect", func() bool { return !nc.IsConnected() })
	// Block publishers: the watcher holds 1, the codec takes 20 ms a value,
	// so this goroutine waits on the Out most of the time, until it dies.
	published := make(chan int)
	go func() {
		k := 3
		for k < 1000 {
			k++
			if err := outbox.Publish(val{Origin: "a", N: k}); err != nil {
				break
			}
			select {
			case <-out.Done():
				published <- k
				return
			default:
			}
		}
		published <- k
	}()
	// While nats.go tries to reconnect, what the Out hands it is Pending.
	var pendingSeen uint64
	eventually(t, "values Pending while disconnected", func() bool {
		pendingSeen = out.Stats().Pending
		return pendingSeen > 0
	})
	for _, l := range []*natsbridge.Link{out, in} {
		select {
		case <-l.Done():
		case <-time.After(guard):
			t.Fatalf("%s: Done not closed after the connection closed for good", l.Subject())
		}
		if !errors.Is(l.Err(), nats.ErrConnectionClosed) {
			t.Errorf("Err = %v, want nats.ErrConnectionClosed", l.Err())
		}
	}
	var total int
	select {
	case total = <-published:
	case <-time.After(guard):
		t.Fatal("a Block publisher still waits for the dead Out")
	}
	if total >= 1000 {
		t.Fatal("the Out died only after every value: the test shows nothing")
	}
	// Every value the watcher received is Sent or Failed once the link
	// has settled; nothing stays Pending.
	eventually(t, "nothing Pending", func() bool { return out.Stats().Pending == 0 })
	s := out.Stats()
	t.Logf("Out stats %+v, %d published", s, total)
	if s.Sent != 3 || s.Failed < pendingSeen || s.Dropped != 0 {
		t.Errorf("Out stats %+v: want Sent 3, the values since the outage Failed (%d were Pending)", s, pendingSeen)
	}
	if s.Sent+s.Failed > uint64(total) || s.Sent+s.Failed < uint64(total)-1 {
		// The last Publish may have come after the watcher stopped.
		t.Errorf("Out stats %+v: Sent+Failed want %d (or one less)", s, total)
	}
	closeLink(t, out)
	closeLink(t, in)
	// The losses are logged at Warn (at once or in the summary at Close),
	// the death at Error.
	text := strings.Join(logs.lines(), "\n")
	if !strings.Contains(text, "level=ERROR") || !strings.Contains(text, "stopped for good") || !strings.Contains(text, "not confirmed by the server") {
		t.Errorf("log lines:\n%s", text)
	}
	if s2 := out.Stats(); s2 != s {
		t.Errorf("Close changed the dead link's stats: %+v, then %+v", s, s2)
	}
}

// Guarantee 23: Close during an outage returns within its ctx (plus a
// short bound), counting in Failed what the server did not confirm.
func TestCloseDuringOutage(t *testing.T) {
	logs := captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	inc := connect(t, srv.URL())
	outbox, inbox := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, outbox)
	defer shutdown(t, inbox)
	out, err := natsbridge.Out(outbox, nc, "outage", codec, broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		t.Fatal(err)
	}
	in, err := natsbridge.In(inc, "outage", codec, inbox)
	if err != nil {
		t.Fatal(err)
	}
	w, _ := inbox.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(100))
	for k := 1; k <= 5; k++ {
		_ = outbox.Publish(val{Origin: "a", N: k})
	}
	receive(t, w, 5)
	eventually(t, "the first values sent", func() bool { return out.Stats().Sent == 5 })
	srv.Stop()
	eventually(t, "disconnect", func() bool { return !nc.IsConnected() && !inc.IsConnected() })
	for k := 6; k <= 25; k++ {
		_ = outbox.Publish(val{Origin: "a", N: k})
	}
	eventually(t, "the 20 handed to nats.go", func() bool { return out.Stats().Pending == 20 })
	const wait = 300 * time.Millisecond
	for name, l := range map[string]*natsbridge.Link{"Out": out, "In": in} {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		start := time.Now()
		err := l.Close(ctx)
		overrun := time.Since(start) - wait
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) && l == out {
			t.Errorf("Out.Close during an outage = %v, want DeadlineExceeded", err)
		}
		if overrun > time.Second {
			t.Errorf("%s: Close returned %v after its ctx ended, want under 1 s", name, overrun)
		}
		t.Logf("%s: Close overran its ctx by %v (err %v)", name, overrun, err)
		select {
		case <-l.Done():
		default:
			t.Error("Done not closed after Close")
		}
		if l.Err() != nil {
			t.Errorf("Err after Close = %v, want nil", l.Err())
		}
	}
	if s := out.Stats(); s.Sent != 5 || s.Failed != 20 || s.Pending != 0 {
		t.Errorf("Out stats %+v, want Sent 5, Failed 20, Pending 0", s)
	}
	if !strings.Contains(strings.Join(logs.lines(), "\n"), "20 values not confirmed") {
		t.Errorf("no Warn line about the 20 values:\n%s", strings.Join(logs.lines(), "\n"))
	}
	w.Stop()
}

// Guarantee 22: In takes only messages with the bridge's headers unless
// AcceptForeign is set; the JSON codec refuses empty and null payloads.
func TestForeignMessages(t *testing.T) {
	logs := captureLogs(t)
	srv := startServer(t, natstest.Config{})
	nc := connect(t, srv.URL())
	strict, open := broadcast.New[val](), broadcast.New[val]()
	defer shutdown(t, strict)
	defer shutdown(t, open)
	sin, err := natsbridge.In(nc, "foreign", codec, strict)
	if err != nil {
		t.Fatal(err)
	}
	oin, err := natsbridge.InWith(nc, "foreign", codec, open, natsbridge.Options[val]{AcceptForeign: true})
	if err != nil {
		t.Fatal(err)
	}
	sw, _ := strict.Watch(broadcast.WithQueueLength(100))
	ow, _ := open.Watch(broadcast.WithQueueLength(100))
	for _, raw := range []string{`{"o":"f","n":1}`, "", "null", " null\n", `{"o":"f","n":2}`} {
		if err := nc.Publish("foreign", []byte(raw)); err != nil {
			t.Fatal(err)
		}
	}
	// A bridged null is refused too.
	publishBridged(t, nc, "foreign", "x", 1, []byte("null"))
	publishBridged(t, nc, "foreign", "x", 2, []byte(`{"o":"x","n":1}`))
	if err := checkPerOrigin(receive(t, ow, 3), map[string]int{"f": 2, "x": 1}); err != nil {
		t.Error(err)
	}
	if err := checkPerOrigin(receive(t, sw, 1), map[string]int{"x": 1}); err != nil {
		t.Error(err)
	}
	closeLink(t, sin)
	closeLink(t, oin)
	if s := sin.Stats(); s.Received != 1 || s.Failed != 6 || s.Lost != 0 {
		t.Errorf("strict In stats %+v, want Received 1, Failed 6 (5 foreign, 1 null)", s)
	}
	if s := oin.Stats(); s.Received != 3 || s.Failed != 4 || s.Lost != 0 {
		t.Errorf("AcceptForeign In stats %+v, want Received 3, Failed 4 (empty and null)", s)
	}
	text := strings.Join(logs.lines(), "\n")
	for _, want := range []string{"without the bridge's headers", "empty payload", "null payload"} {
		if !strings.Contains(text, want) {
			t.Errorf("no log line with %q:\n%s", want, text)
		}
	}
	sw.Stop()
	ow.Stop()
}

// The JSON codec refuses to encode a value as null, and to decode an empty
// or null payload.
func TestJSONRefusesNull(t *testing.T) {
	pc := natsbridge.JSON[*val]()
	if _, err := pc.Marshal(nil); err == nil {
		t.Error("Marshal(nil pointer): no error")
	}
	if data, err := pc.Marshal(&val{N: 1}); err != nil || string(data) != `{"o":"","n":1}` {
		t.Errorf("Marshal = %s, %v", data, err)
	}
	for _, raw := range []string{"", " \t\r\n", "null", "  null "} {
		if v, err := pc.Unmarshal([]byte(raw)); err == nil {
			t.Errorf("Unmarshal(%q) = %v, want an error", raw, v)
		}
		if v, err := codec.Unmarshal([]byte(raw)); err == nil {
			t.Errorf("Unmarshal(%q) = %v, want an error", raw, v)
		}
	}
	if v, err := pc.Unmarshal([]byte(`{"n":2}`)); err != nil || v.N != 2 {
		t.Errorf("Unmarshal = %v, %v", v, err)
	}
}
