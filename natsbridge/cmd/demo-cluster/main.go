// Command demo-cluster runs three processes on one machine that share one
// stream of values through NATS: it starts an embedded nats-server, then
// three copies of itself, each a natsbridge.Node. Every node publishes
// three greetings; every node's watcher prints all nine, its own included,
// each origin's in order.
//
//	go run ./cmd/demo-cluster            # core NATS (Out and In)
//	go run ./cmd/demo-cluster -stream    # a JetStream stream (OutStream and InStream)
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// Greeting is the value the nodes share.
type Greeting struct {
	From string `json:"from"`
	N    int    `json:"n"`
	Text string `json:"text"`
}

const (
	nodes   = 3
	perNode = 3
	subject = "demo.greetings"
	stream  = "DEMO"
	nodeEnv = "DEMO_CLUSTER_NODE"
	timeout = 30 * time.Second
)

func main() {
	if name := os.Getenv(nodeEnv); name != "" {
		if err := node(name); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
			os.Exit(1)
		}
		return
	}
	useStream := flag.Bool("stream", false, "share the values through a JetStream stream")
	flag.Parse()
	if err := run(*useStream); err != nil {
		fmt.Fprintln(os.Stderr, "demo-cluster:", err)
		os.Exit(1)
	}
}

func run(useStream bool) error {
	dir, err := os.MkdirTemp("", "demo-cluster")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := natstest.Start(natstest.Config{StoreDir: dir})
	if err != nil {
		return err
	}
	defer srv.Stop()
	mode, label := "core", "core NATS"
	if useStream {
		mode, label = "stream", "a JetStream stream"
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			return err
		}
		js, _ := jetstream.New(nc)
		_, err = js.CreateStream(context.Background(), jetstream.StreamConfig{Name: stream, Subjects: []string{"demo.>"}})
		nc.Close()
		if err != nil {
			return err
		}
	}
	fmt.Printf("nats-server at %s; starting %d processes sharing values through %s\n", srv.URL(), nodes, label)

	var out sync.Mutex // one line at a time on stdout
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		ready chan struct{}
		done  chan struct{}
	}
	var procs []*proc
	for i := range nodes {
		name := fmt.Sprintf("node-%d", i)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), nodeEnv+"="+name, "DEMO_CLUSTER_URL="+srv.URL(), "DEMO_CLUSTER_MODE="+mode)
		cmd.Stderr = os.Stderr
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			return err
		}
		p := &proc{cmd: cmd, stdin: stdin, ready: make(chan struct{}), done: make(chan struct{})}
		procs = append(procs, p)
		go func() {
			defer close(p.done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if sc.Text() == "ready" {
					close(p.ready)
					continue
				}
				out.Lock()
				fmt.Printf("[pid %d] %s\n", cmd.Process.Pid, sc.Text())
				out.Unlock()
			}
		}()
	}
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	}()
	// Everyone subscribes before anyone publishes: core NATS keeps nothing
	// for a subscriber that is not there yet.
	for _, p := range procs {
		select {
		case <-p.ready:
		case <-time.After(timeout):
			return fmt.Errorf("a process did not start")
		}
	}
	for _, p := range procs {
		_, _ = io.WriteString(p.stdin, "go\n")
	}
	failed := false
	for _, p := range procs {
		<-p.done
		if err := p.cmd.Wait(); err != nil {
			failed = true
		}
	}
	if failed {
		return fmt.Errorf("a process failed")
	}
	fmt.Printf("every process received all %d greetings, each origin's in order\n", nodes*perNode)
	return nil
}

// node is one process: a natsbridge.Node, a watcher that prints what
// arrives, and three greetings published.
func node(name string) error {
	nc, err := nats.Connect(os.Getenv("DEMO_CLUSTER_URL"), nats.Name(name))
	if err != nil {
		return err
	}
	defer nc.Close()
	codec := natsbridge.JSON[Greeting]()
	var n *natsbridge.Node[Greeting]
	if os.Getenv("DEMO_CLUSTER_MODE") == "stream" {
		js, err := jetstream.New(nc)
		if err != nil {
			return err
		}
		n, err = natsbridge.NewStreamNode(js, stream, subject, 0, codec)
		if err != nil {
			return err
		}
	} else if n, err = natsbridge.NewNode(nc, subject, codec); err != nil {
		return err
	}
	w, err := n.Watch(broadcast.WithPolicy(broadcast.Block))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	if line, _ := bufio.NewReader(os.Stdin).ReadString('\n'); strings.TrimSpace(line) != "go" {
		return fmt.Errorf("not started")
	}
	for k := 1; k <= perNode; k++ {
		if err := n.Publish(Greeting{From: name, N: k, Text: fmt.Sprintf("hello #%d from %s", k, name)}); err != nil {
			return err
		}
	}
	next := map[string]int{}
	deadline := time.After(timeout)
	for got := 0; got < nodes*perNode; got++ {
		select {
		case g := <-w.C():
			next[g.From]++
			order := "in order"
			if g.N != next[g.From] {
				order = fmt.Sprintf("OUT OF ORDER (want #%d)", next[g.From])
			}
			fmt.Printf("%s got %q (%s)\n", name, g.Text, order)
			if g.N != next[g.From] {
				return fmt.Errorf("out of order")
			}
		case <-deadline:
			return fmt.Errorf("only %d of %d greetings arrived", got, nodes*perNode)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return n.Close(ctx)
}
