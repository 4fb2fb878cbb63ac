package natsbridge_test

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
)

// The deployment an operator runs: three NATS servers on loopback, routes
// between them, JetStream clustered (a stream with three replicas). A
// publisher is connected to one node, watchers to the others, and the
// node a client is connected to is killed mid-stream.

// cluster is three embedded servers routed to each other.
type cluster struct {
	nodes [3]*server.Server
	urls  [3]string
}

// freePorts returns n loopback ports free at the time of the call: the
// routes of every node must name the others' cluster ports up front.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, n)
	ls := make([]net.Listener, n)
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls[i], ports[i] = l, l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func startCluster(t testing.TB) *cluster {
	t.Helper()
	ports := freePorts(t, 6) // client ports, then cluster ports
	var routes []*url.URL
	for i := range 3 {
		routes = append(routes, &url.URL{Scheme: "nats-route", Host: "127.0.0.1:" + strconv.Itoa(ports[3+i])})
	}
	c := &cluster{}
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range 3 {
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i),
			Host:       "127.0.0.1",
			Port:       ports[i],
			NoLog:      true,
			NoSigs:     true,
			JetStream:  true,
			StoreDir:   t.TempDir(),
			Cluster:    server.ClusterOpts{Name: "herald", Host: "127.0.0.1", Port: ports[3+i]},
			Routes:     routes,
		}
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes[i] = s
		c.urls[i] = "nats://127.0.0.1:" + strconv.Itoa(ports[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.Start()
			if !s.ReadyForConnections(guard) {
				errs[i] = fmt.Errorf("node %d not ready", i)
			}
		}()
	}
	wg.Wait()
	t.Cleanup(c.stop)
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Routes up and a JetStream meta leader elected: a stream can be made.
	nc := connect(t, c.urls[0])
	js := newJS(t, nc)
	eventually(t, "a JetStream meta leader", func() bool {
		for _, s := range c.nodes {
			if s.NumRoutes() < 2 {
				return false
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	nc.Close()
	return c
}

// kill stops node i at once, as a crash would look to its clients.
func (c *cluster) kill(i int) {
	if s := c.nodes[i]; s != nil {
		s.Shutdown()
		s.WaitForShutdown()
		c.nodes[i] = nil
	}
}

func (c *cluster) stop() {
	for i := range c.nodes {
		c.kill(i)
	}
}

// dial connects to node i first; the other nodes are in the server list,
// so the client reconnects to one of them when node i dies.
func (c *cluster) dial(t testing.TB, i int) *nats.Conn {
	t.Helper()
	servers := []string{c.urls[i]}
	for j, u := range c.urls {
		if j != i {
			servers = append(servers, u)
		}
	}
	return connect(t, strings.Join(servers, ","), nats.DontRandomize())
}

// TestClusterFailoverCore: an Out connected to one node, an In on each of
// the other two (and one on the Out's own node), the node of one client
// killed mid-stream. At every In, every value the Out took from its
// broadcaster is received or counted Lost (guarantee 22), and what the
// Out could not confirm is counted Failed, never Sent.
func TestClusterFailoverCore(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kill   int
		reason string
	}{
		{"publisher's node", 0, "the Out's connection and the In beside it fail over; messages in the dead node's buffers are lost, so the other Ins must count them"},
		{"a watcher's node", 1, "one In's subscription is gone until it resubscribes on another node; it alone must count what it missed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t)
			const subject, total = "cluster.core", 2000
			type inSide struct {
				b *broadcast.Broadcaster[val]
				w *broadcast.Watcher[val]
				l *natsbridge.Link
			}
			var ins []inSide
			for i := range 3 {
				b := broadcast.New[val]()
				defer shutdown(t, b)
				w, err := b.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(total))
				if err != nil {
					t.Fatal(err)
				}
				l, err := natsbridge.In(c.dial(t, i), subject, codec, b)
				if err != nil {
					t.Fatal(err)
				}
				ins = append(ins, inSide{b, w, l})
			}
			ob := broadcast.New[val]()
			defer shutdown(t, ob)
			out, err := natsbridge.Out(ob, c.dial(t, 0), subject, codec, broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(total))
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= total; n++ {
				if err := ob.Publish(val{Origin: "p", N: n}); err != nil {
					t.Fatal(err)
				}
				if n == total/2 {
					c.kill(tc.kill)
				}
				if n%50 == 0 {
					time.Sleep(time.Millisecond) // a stream, not one burst: the kill lands mid-stream
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			closeErr := out.Close(ctx)
			ost := out.Stats()
			if ost.Sent+ost.Failed != total || ost.Pending != 0 {
				t.Errorf("Out: Sent %d + Failed %d = %d, Pending %d; want %d taken, 0 pending (close: %v)", ost.Sent, ost.Failed, ost.Sent+ost.Failed, ost.Pending, total, closeErr)
			}
			for i, in := range ins {
				// Every value is received or counted Lost within the
				// heartbeat bound (5 s) after the last one.
				deadline := time.Now().Add(10 * time.Second)
				for {
					s := in.l.Stats()
					if s.Received+s.Lost >= total || time.Now().After(deadline) {
						break
					}
					time.Sleep(20 * time.Millisecond)
				}
				s := in.l.Stats()
				if s.Received+s.Lost != total {
					t.Errorf("In on node %d: Received %d + Lost %d = %d, want %d (every value received or counted)", i, s.Received, s.Lost, s.Received+s.Lost, total)
				}
				// What arrived is in order and each once.
				got := receive(t, in.w, int(s.Received))
				last := 0
				for _, v := range got {
					if v.N <= last {
						t.Fatalf("In on node %d: %d after %d (repeated or out of order)", i, v.N, last)
					}
					last = v.N
				}
				t.Logf("In on node %d: received %d, lost %d", i, s.Received, s.Lost)
				closeLink(t, in.l)
			}
			t.Logf("Out: sent %d, failed %d", ost.Sent, ost.Failed)
		})
	}
}

// TestClusterFailoverStream: a stream with three replicas; an OutStream
// connected to one node, an InStream to another, the node of one of them
// killed mid-stream. Nothing acknowledged is lost, nothing is stored
// twice, and the InStream delivers each stored value once.
func TestClusterFailoverStream(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kill   int
		reason string
	}{
		{"publisher's node", 0, "the OutStream's publishes in flight are retried on another node with the same message IDs: stored once"},
		{"consumer's node", 1, "the InStream's consumer is recreated through another node from the sequence after the last one it delivered"},
		{"third node", 2, "a replica that serves neither client: the stream keeps its quorum and nothing is disturbed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t)
			const stream, subject, total = "CLUSTER", "cluster.js", 2000
			js0 := newJS(t, c.dial(t, 0))
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			if _, err := js0.CreateStream(ctx, jetstream.StreamConfig{
				Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage, Replicas: 3,
			}); err != nil {
				t.Fatal(err)
			}
			ib := broadcast.New[val]()
			defer shutdown(t, ib)
			w, err := ib.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(total))
			if err != nil {
				t.Fatal(err)
			}
			in, err := natsbridge.InStream(newJS(t, c.dial(t, 1)), stream, subject, 1, codec, ib)
			if err != nil {
				t.Fatal(err)
			}
			ob := broadcast.New[val]()
			defer shutdown(t, ob)
			out, err := natsbridge.OutStream(ob, js0, stream, subject, codec, broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(total))
			if err != nil {
				t.Fatal(err)
			}
			for n := 1; n <= total; n++ {
				if err := ob.Publish(val{Origin: "p", N: n}); err != nil {
					t.Fatal(err)
				}
				if n == total/2 {
					c.kill(tc.kill)
				}
				if n%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			if err := out.Close(ctx); err != nil {
				t.Fatalf("OutStream.Close: %v (Stats %+v)", err, out.Stats())
			}
			ost := out.Stats()
			if ost.Sent != total || ost.Failed != 0 {
				t.Errorf("OutStream: Sent %d, Failed %d; want every value acknowledged", ost.Sent, ost.Failed)
			}
			// Stored once: the stream holds exactly the values sent.
			alive := 0
			if tc.kill == 0 {
				alive = 1
			}
			jsa := newJS(t, c.dial(t, alive))
			var msgs uint64
			eventually(t, "the stream's state through a live node", func() bool {
				sctx, scancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer scancel()
				st, err := jsa.Stream(sctx, stream)
				if err != nil {
					return false
				}
				msgs = st.CachedInfo().State.Msgs
				return true
			})
			if msgs != total {
				t.Errorf("stream holds %d messages, want %d (each value stored once)", msgs, total)
			}
			// Delivered once each: the InStream's watcher gets 1..total.
			got := receive(t, w, total)
			seen := make(map[int]bool, total)
			for _, v := range got {
				if seen[v.N] {
					t.Fatalf("value %d delivered twice", v.N)
				}
				seen[v.N] = true
			}
			for n := 1; n <= total; n++ {
				if !seen[n] {
					t.Fatalf("value %d acknowledged but never delivered", n)
				}
			}
			closeLink(t, in)
			t.Logf("stream: %d stored, InStream received %d, OutStream failed %d", msgs, in.Stats().Received, ost.Failed)
		})
	}
}
