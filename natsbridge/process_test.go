package natsbridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// childEnv names the role of a child process: the test binary re-executed
// by a cross-process test runs runChild instead of the tests.
const childEnv = "NATSBRIDGE_TEST_CHILD"

// runChild is a child's main: one node of the outbox/inbox pattern. It
// says "ready" once its links are live, waits for "go" on stdin, publishes
// its values, prints every value its watcher receives ("v <json>") until it
// has all of them, closes and says "done".
func runChild(role string) int {
	if role != "node" {
		fmt.Fprintln(os.Stderr, "unknown role", role)
		return 2
	}
	env := func(k string) string { return os.Getenv("NATSBRIDGE_" + k) }
	count, _ := strconv.Atoi(env("COUNT"))
	total, _ := strconv.Atoi(env("TOTAL"))
	name := env("NAME")
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, name+":", err)
		return 1
	}
	nc, err := nats.Connect(env("URL"), nats.UserInfo(env("USER"), env("PASS")))
	if err != nil {
		return fail(err)
	}
	defer nc.Close()
	var node *natsbridge.Node[val]
	if env("MODE") == "stream" {
		js, err := jetstream.New(nc)
		if err != nil {
			return fail(err)
		}
		node, err = natsbridge.NewStreamNode(js, "HERALD", "herald.values", 0, codec)
		if err != nil {
			return fail(err)
		}
	} else {
		node, err = natsbridge.NewNode(nc, "herald.values", codec)
		if err != nil {
			return fail(err)
		}
	}
	w, err := node.Watch(broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(total))
	if err != nil {
		return fail(err)
	}
	fmt.Println("ready")
	if line, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil || line != "go\n" {
		return fail(fmt.Errorf("no go: %q %v", line, err))
	}
	go func() {
		for k := 1; k <= count; k++ {
			if err := node.Publish(val{Origin: name, N: k}); err != nil {
				fmt.Fprintln(os.Stderr, name+": publish:", err)
				return
			}
		}
	}()
	out := bufio.NewWriter(os.Stdout)
	timeout := time.After(guard)
	for got := 0; got < total; got++ {
		select {
		case v := <-w.C():
			data, _ := json.Marshal(v)
			fmt.Fprintf(out, "v %s\n", data)
		case <-timeout:
			out.Flush()
			return fail(fmt.Errorf("timed out after %d of %d values", got, total))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	if err := node.Close(ctx); err != nil {
		return fail(err)
	}
	s := node.Out().Stats()
	fmt.Fprintf(out, "done sent=%d failed=%d\n", s.Sent, s.Failed)
	out.Flush()
	return 0
}

type child struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines *bufio.Scanner
}

// startChild runs the test binary as a node in a child process.
func startChild(t *testing.T, env ...string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{childEnv + "=node"}, env...)...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	return &child{cmd: cmd, stdin: stdin, lines: sc}
}

func (c *child) expectLine(t *testing.T, prefix string) string {
	t.Helper()
	for c.lines.Scan() {
		if l := c.lines.Text(); strings.HasPrefix(l, prefix) {
			return l
		}
	}
	t.Fatalf("%s: output ended before %q: %v", c.name, prefix, c.lines.Err())
	return ""
}

// Guarantee 15 across processes: two and three child processes (this test
// binary re-executed), each a node on one subject, core NATS and JetStream,
// on a server with auth on. Every process receives every origin's values,
// its own included, each origin's in order, nothing twice.
func TestAcrossProcesses(t *testing.T) {
	for _, mode := range []string{"core", "stream"} {
		for _, n := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s/processes=%d", mode, n), func(t *testing.T) {
				srv := startServer(t, natstest.Config{User: "u", Pass: "p"})
				if mode == "stream" {
					nc := connect(t, srv.URL(), nats.UserInfo("u", "p"))
					makeStream(t, newJS(t, nc), "HERALD", "herald.>")
				}
				const count = 300
				want := map[string]int{}
				var children []*child
				for i := range n {
					name := fmt.Sprintf("p%d", i)
					want[name] = count
					c := startChild(t, "NATSBRIDGE_URL="+srv.URL(), "NATSBRIDGE_USER=u", "NATSBRIDGE_PASS=p",
						"NATSBRIDGE_NAME="+name, "NATSBRIDGE_MODE="+mode,
						"NATSBRIDGE_COUNT="+strconv.Itoa(count), "NATSBRIDGE_TOTAL="+strconv.Itoa(n*count))
					c.name = name
					children = append(children, c)
				}
				for _, c := range children {
					c.expectLine(t, "ready")
				}
				for _, c := range children {
					if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
						t.Fatal(err)
					}
				}
				for _, c := range children {
					var got []val
					for c.lines.Scan() {
						l := c.lines.Text()
						if strings.HasPrefix(l, "done") {
							if l != fmt.Sprintf("done sent=%d failed=0", count) {
								t.Errorf("%s: %s", c.name, l)
							}
							break
						}
						var v val
						if err := json.Unmarshal([]byte(strings.TrimPrefix(l, "v ")), &v); err != nil {
							t.Fatalf("%s: bad line %q", c.name, l)
						}
						got = append(got, v)
					}
					if err := checkPerOrigin(got, want); err != nil {
						t.Errorf("%s: %v", c.name, err)
					}
					if err := c.cmd.Wait(); err != nil {
						t.Errorf("%s: %v", c.name, err)
					}
				}
			})
		}
	}
}
