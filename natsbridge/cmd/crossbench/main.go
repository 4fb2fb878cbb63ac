// Command crossbench measures fan-out across processes: values/s and
// p50/p99 latency from Publish in this process to a watcher in a child
// process (this program re-executed), through natsbridge (Out and In, one
// hop through herald's broadcasters on each side) against a bare nats.go
// publisher and subscriber with the same codec, and through JetStream
// (OutStream and InStream), side by side: the modes run interleaved,
// round after round, against one embedded nats-server, and the table shows
// the median of the rounds.
//
// Each run has two phases. Throughput: N values published back to back;
// values/s is N over the time from the first Publish to the last value
// received. Latency: L values published one every gap (well under
// capacity, so that queueing does not dominate); each value carries the
// time its Publish began, and the child takes the time its watcher (or
// bare subscriber) receives it.
//
//	go run ./cmd/crossbench                 # 7 rounds, the figures in README.md
//	go run ./cmd/crossbench -smoke          # one tiny round: the harness works (CI)
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// sample is the value sent: its number, the phase, and when its Publish began.
type sample struct {
	Seq   uint64 `json:"s"`
	Phase int    `json:"p"`
	T     int64  `json:"t"` // unix nanoseconds
}

var codec = natsbridge.JSON[sample]()

const (
	childEnv = "CROSSBENCH_CHILD"
	subject  = "bench.values"
	stream   = "BENCH"
)

type result struct {
	Mode      string  `json:"mode"`
	Received1 int     `json:"received1"` // throughput phase
	LastRecv  int64   `json:"last_recv"` // unix ns of the last value of phase 1
	Received2 int     `json:"received2"`
	P50       float64 `json:"p50_us"`
	P99       float64 `json:"p99_us"`
	Rate      float64 `json:"-"`
}

func main() {
	if mode := os.Getenv(childEnv); mode != "" {
		if err := child(mode); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	rounds := flag.Int("rounds", 7, "rounds; each runs every mode once")
	n := flag.Int("n", 200_000, "values in the throughput phase")
	l := flag.Int("lat", 10_000, "values in the latency phase")
	gap := flag.Duration("gap", 100*time.Microsecond, "pause between values in the latency phase")
	modes := flag.String("modes", "bare,natsbridge,jetstream", "modes, comma-separated")
	smoke := flag.Bool("smoke", false, "one tiny round: check the harness, not the figures")
	flag.Parse()
	if *smoke {
		*rounds, *n, *l = 1, 2_000, 200
	}
	if err := run(*rounds, *n, *l, *gap, strings.Split(*modes, ",")); err != nil {
		fmt.Fprintln(os.Stderr, "crossbench:", err)
		os.Exit(1)
	}
}

func run(rounds, n, l int, gap time.Duration, modes []string) error {
	dir, err := os.MkdirTemp("", "crossbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := natstest.Start(natstest.Config{StoreDir: dir})
	if err != nil {
		return err
	}
	defer srv.Stop()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	all := map[string][]result{}
	for r := 0; r < rounds; r++ {
		// Every other round runs the modes in reverse, so that no mode
		// always follows another (the machine is shared; load drifts).
		order := slices.Clone(modes)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			if mode == "jetstream" {
				// A fresh stream per run: every run stores the same amount.
				_ = js.DeleteStream(context.Background(), stream)
				if _, err := js.CreateStream(context.Background(), jetstream.StreamConfig{
					Name: stream, Subjects: []string{"bench.>"}, Storage: jetstream.FileStorage,
				}); err != nil {
					return err
				}
			}
			res, err := runOnce(srv.URL(), nc, js, mode, n, l, gap)
			if err != nil {
				return fmt.Errorf("%s round %d: %w", mode, r+1, err)
			}
			fmt.Fprintf(os.Stderr, "round %d %-10s %9.0f values/s  p50 %7.1f µs  p99 %7.1f µs  (received %d/%d, %d/%d)\n",
				r+1, mode, res.Rate, res.P50, res.P99, res.Received1, n, res.Received2, l)
			all[mode] = append(all[mode], res)
		}
	}
	fmt.Printf("%d rounds, medians; N=%d back to back, then %d values one per %v; %s\n\n", rounds, n, l, gap, time.Now().UTC().Format("2006-01-02 15:04 MST"))
	fmt.Println("The ratios are medians of each round's ratio to bare in that round (the runs of one round are seconds apart).")
	fmt.Println()
	fmt.Println("| mode | values/s | vs bare | p50 µs | p99 µs | p99 vs bare |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	median := func(xs []float64) float64 {
		xs = slices.Clone(xs)
		slices.Sort(xs)
		if len(xs)%2 == 1 {
			return xs[len(xs)/2]
		}
		return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
	}
	col := func(rs []result, f func(result) float64) []float64 {
		xs := make([]float64, len(rs))
		for i, r := range rs {
			xs[i] = f(r)
		}
		return xs
	}
	bare := all["bare"]
	for _, mode := range modes {
		rs := all[mode]
		rate := col(rs, func(r result) float64 { return r.Rate })
		p50 := col(rs, func(r result) float64 { return r.P50 })
		p99 := col(rs, func(r result) float64 { return r.P99 })
		rateRatio, p99Ratio := "-", "-"
		if len(bare) == len(rs) {
			rr, pr := make([]float64, len(rs)), make([]float64, len(rs))
			for i := range rs {
				rr[i] = rs[i].Rate / bare[i].Rate
				pr[i] = rs[i].P99 / bare[i].P99
			}
			rateRatio, p99Ratio = fmt.Sprintf("%.2f", median(rr)), fmt.Sprintf("%.2f", median(pr))
		}
		fmt.Printf("| %s | %.0f | %s | %.1f | %.1f | %s |\n", mode, median(rate), rateRatio, median(p50), median(p99), p99Ratio)
	}
	return nil
}

// runOnce starts a child receiving in mode, publishes both phases, and
// returns what the child measured.
func runOnce(url string, nc *nats.Conn, js jetstream.JetStream, mode string, n, l int, gap time.Duration) (result, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "CROSSBENCH_URL="+url,
		"CROSSBENCH_N="+strconv.Itoa(n), "CROSSBENCH_L="+strconv.Itoa(l))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	expect := func(prefix string) (string, error) {
		for lines.Scan() {
			if t := lines.Text(); strings.HasPrefix(t, prefix) {
				return strings.TrimPrefix(t, prefix), nil
			}
		}
		return "", fmt.Errorf("child output ended before %q", prefix)
	}
	if _, err := expect("ready"); err != nil {
		return result{}, err
	}

	// The publishing side of each mode.
	var publish func(sample) error
	var closeFn func() error
	switch mode {
	case "bare":
		publish = func(s sample) error {
			data, err := codec.Marshal(s)
			if err != nil {
				return err
			}
			return nc.Publish(subject, data)
		}
		closeFn = nc.Flush
	case "natsbridge", "jetstream":
		outbox := broadcast.New[sample]()
		var link *natsbridge.Link
		var err error
		if mode == "natsbridge" {
			link, err = natsbridge.Out(outbox, nc, subject, codec, broadcast.WithPolicy(broadcast.Block))
		} else {
			link, err = natsbridge.OutStream(outbox, js, stream, subject, codec, broadcast.WithPolicy(broadcast.Block))
		}
		if err != nil {
			return result{}, err
		}
		publish = outbox.Publish
		closeFn = func() error {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			return joinErr(link.Close(ctx), outbox.Shutdown(ctx))
		}
	default:
		return result{}, fmt.Errorf("unknown mode %q", mode)
	}

	start := time.Now()
	for i := 1; i <= n; i++ {
		if err := publish(sample{Seq: uint64(i), Phase: 1, T: time.Now().UnixNano()}); err != nil {
			return result{}, err
		}
	}
	if _, err := expect("phase1"); err != nil {
		return result{}, err
	}
	for i := 1; i <= l; i++ {
		if err := publish(sample{Seq: uint64(i), Phase: 2, T: time.Now().UnixNano()}); err != nil {
			return result{}, err
		}
		time.Sleep(gap)
	}
	if err := closeFn(); err != nil {
		return result{}, err
	}
	line, err := expect("result ")
	if err != nil {
		return result{}, err
	}
	_, _ = io.WriteString(stdin, "bye\n")
	var res result
	if err := json.Unmarshal([]byte(line), &res); err != nil {
		return result{}, err
	}
	res.Rate = float64(res.Received1) / (float64(res.LastRecv-start.UnixNano()) / 1e9)
	return res, nil
}

func joinErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// child receives in mode and reports: "ready", "phase1" when the
// throughput phase is over (all values in, or none for a second), then
// "result {json}" after the latency phase.
func child(mode string) error {
	n, _ := strconv.Atoi(os.Getenv("CROSSBENCH_N"))
	l, _ := strconv.Atoi(os.Getenv("CROSSBENCH_L"))
	nc, err := nats.Connect(os.Getenv("CROSSBENCH_URL"))
	if err != nil {
		return err
	}
	defer nc.Close()
	// recv is called for every value the watcher (or bare subscriber) gets,
	// on one goroutine; the counters are read by this one.
	var (
		recv1, recv2, lastRecv atomic.Int64
		mu                     sync.Mutex // guards lats
		lats                   = make([]float64, 0, l)
	)
	recv := func(s sample) {
		now := time.Now().UnixNano()
		if s.Phase == 1 {
			lastRecv.Store(now)
			recv1.Add(1)
			return
		}
		mu.Lock()
		lats = append(lats, float64(now-s.T)/1e3)
		mu.Unlock()
		recv2.Add(1)
	}
	var stop func()
	switch mode {
	case "bare":
		sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
			s, err := codec.Unmarshal(m.Data)
			if err != nil {
				return
			}
			recv(s)
		})
		if err != nil {
			return err
		}
		_ = sub.SetPendingLimits(-1, -1)
		stop = func() { _ = sub.Unsubscribe() }
	case "natsbridge", "jetstream":
		inbox := broadcast.New[sample]()
		w, err := inbox.Watch(broadcast.WithPolicy(broadcast.Block))
		if err != nil {
			return err
		}
		var link *natsbridge.Link
		if mode == "natsbridge" {
			link, err = natsbridge.In(nc, subject, codec, inbox)
			if err == nil {
				err = link.SetPendingLimits(-1, -1)
			}
		} else {
			var js jetstream.JetStream
			if js, err = jetstream.New(nc); err == nil {
				link, err = natsbridge.InStream(js, stream, subject, 0, codec, inbox)
			}
		}
		if err != nil {
			return err
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for s := range w.All() {
				recv(s)
			}
		}()
		stop = func() {
			_ = link.Close(context.Background())
			_ = inbox.Shutdown(context.Background())
			<-done
		}
	}
	if err := nc.Flush(); err != nil {
		return err
	}
	fmt.Println("ready")
	// wait returns when want values of a phase are in, or none came for 2 s.
	wait := func(c *atomic.Int64, want int64) {
		last, idleSince := int64(-1), time.Now()
		for {
			time.Sleep(2 * time.Millisecond)
			got := c.Load()
			if got >= want {
				return
			}
			if got != last {
				last, idleSince = got, time.Now()
			} else if time.Since(idleSince) > 2*time.Second {
				return
			}
		}
	}
	wait(&recv1, int64(n))
	fmt.Println("phase1")
	wait(&recv2, int64(l))
	stop()
	res := result{Mode: mode, Received1: int(recv1.Load()), LastRecv: lastRecv.Load(), Received2: int(recv2.Load())}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lats)
	if len(lats) > 0 {
		res.P50 = lats[len(lats)/2]
		res.P99 = lats[len(lats)*99/100]
	}
	data, _ := json.Marshal(res)
	fmt.Printf("result %s\n", data)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return nil
}
