// Command crossbench measures fan-out across processes: values/s and
// p50/p99 latency from Publish in this process to a watcher in a child
// process (this program re-executed), through natsbridge (Out and In: one
// herald broadcaster on each side) against a bare nats.go publisher and
// subscriber with the same codec, and through JetStream (OutStream and
// InStream), side by side against one embedded nats-server.
//
// Throughput: per round, each mode in turn (the order reversed every other
// round) publishes N values back to back to a fresh child; values/s is N
// over the time from the first Publish to the last value received. The
// "vs bare" ratio is the median of each round's ratio.
//
// Latency: per round, one child listens on every mode at once and the
// modes take turns value by value (bare, natsbridge, jetstream, bare, ...),
// one every gap: well under capacity, so that queueing does not dominate,
// and every mode sees the same moments of the machine's load. Each value
// carries the time its Publish began; the child takes the time its watcher
// (or the bare subscriber) receives it. p50 and p99 are per round, then
// the median of the rounds.
//
//	go run ./cmd/crossbench                 # 9 rounds, the figures in README.md
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
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/heraldgo/herald/broadcast"
	"github.com/heraldgo/herald/natsbridge"
	"github.com/heraldgo/herald/natsbridge/internal/natstest"
)

// sample is the value sent: its number and when its Publish began.
type sample struct {
	Seq uint64 `json:"s"`
	T   int64  `json:"t"` // unix nanoseconds
}

var codec = natsbridge.JSON[sample]()

const (
	childEnv = "CROSSBENCH_CHILD"
	stream   = "BENCH"
)

var allModes = []string{"bare", "natsbridge", "jetstream"}

// outQueue is the queue length of the natsbridge mode's Out watcher;
// natsbridge-deep (not in the default modes) gives it deepQueue, more than
// a throughput run publishes, so that its publisher never waits.
var outQueue = broadcast.DefaultQueueLength

const deepQueue = 1 << 20

// subject gives each mode its own subject; only jetstream's is in the stream.
func subject(mode string) string {
	if mode == "jetstream" {
		return "benchjs.values"
	}
	return "bench." + mode
}

// report is what a child measured for one mode.
type report struct {
	Received int       `json:"received"`
	LastRecv int64     `json:"last_recv"` // unix ns
	Lat      []float64 `json:"-"`
	P50      float64   `json:"p50_us"`
	P99      float64   `json:"p99_us"`
}

func main() {
	if os.Getenv(childEnv) != "" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	rounds := flag.Int("rounds", 9, "rounds; each runs every mode")
	n := flag.Int("n", 200_000, "values per throughput run")
	l := flag.Int("lat", 5_000, "values per mode in a latency run")
	gap := flag.Duration("gap", 100*time.Microsecond, "pause between values in a latency run")
	modesFlag := flag.String("modes", strings.Join(allModes, ","), "modes, comma-separated (bare first)")
	smoke := flag.Bool("smoke", false, "one tiny round: check the harness, not the figures")
	flag.IntVar(&outQueue, "outq", outQueue, "queue length of the natsbridge mode's Out watcher (Block)")
	flag.Parse()
	if *smoke {
		*rounds, *n, *l = 1, 2_000, 100
	}
	if err := run(*rounds, *n, *l, *gap, strings.Split(*modesFlag, ",")); err != nil {
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
	admin, err := nats.Connect(srv.URL())
	if err != nil {
		return err
	}
	defer admin.Close()
	ajs, _ := jetstream.New(admin)
	freshStream := func() error {
		_ = ajs.DeleteStream(context.Background(), stream)
		_, err := ajs.CreateStream(context.Background(), jetstream.StreamConfig{
			Name: stream, Subjects: []string{"benchjs.>"}, Storage: jetstream.FileStorage,
		})
		return err
	}

	rate := map[string][]float64{}
	p50 := map[string][]float64{}
	p99 := map[string][]float64{}
	for r := 0; r < rounds; r++ {
		order := slices.Clone(modes)
		if r%2 == 1 {
			slices.Reverse(order)
		}
		for _, mode := range order {
			if err := freshStream(); err != nil {
				return err
			}
			start, reps, err := runChild(srv.URL(), []string{mode}, n, 0, func(publish func(int, sample) error) error {
				for i := 1; i <= n; i++ {
					if err := publish(0, sample{Seq: uint64(i), T: time.Now().UnixNano()}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return fmt.Errorf("%s throughput, round %d: %w", mode, r+1, err)
			}
			rep := reps[0]
			vps := float64(rep.Received) / (float64(rep.LastRecv-start.UnixNano()) / 1e9)
			rate[mode] = append(rate[mode], vps)
			fmt.Fprintf(os.Stderr, "round %d %-10s %9.0f values/s (received %d/%d)\n", r+1, mode, vps, rep.Received, n)
		}
		if err := freshStream(); err != nil {
			return err
		}
		_, reps, err := runChild(srv.URL(), modes, l, gap, func(publish func(int, sample) error) error {
			for i := 1; i <= l; i++ {
				for m := range modes {
					if err := publish(m, sample{Seq: uint64(i), T: time.Now().UnixNano()}); err != nil {
						return err
					}
					time.Sleep(gap)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("latency, round %d: %w", r+1, err)
		}
		for i, mode := range modes {
			p50[mode] = append(p50[mode], reps[i].P50)
			p99[mode] = append(p99[mode], reps[i].P99)
			fmt.Fprintf(os.Stderr, "round %d %-10s p50 %7.1f µs  p99 %7.1f µs (received %d/%d)\n", r+1, mode, reps[i].P50, reps[i].P99, reps[i].Received, l)
		}
	}

	fmt.Printf("crossbench, %s: %d rounds; throughput %d values back to back per run; latency %d values per mode, modes taking turns, one value every %v\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), rounds, n, l, gap)
	fmt.Println("| mode | values/s | vs bare | p50 µs | p99 µs | p99 vs bare |")
	fmt.Println("| --- | ---: | ---: | ---: | ---: | ---: |")
	ratio := func(xs, base []float64) string {
		if len(xs) != len(base) || len(xs) == 0 {
			return "-"
		}
		rs := make([]float64, len(xs))
		for i := range xs {
			rs[i] = xs[i] / base[i]
		}
		return fmt.Sprintf("%.2f", median(rs))
	}
	for _, mode := range modes {
		fmt.Printf("| %s | %.0f | %s | %.1f | %.1f | %s |\n", mode,
			median(rate[mode]), ratio(rate[mode], rate["bare"]),
			median(p50[mode]), median(p99[mode]), ratio(p99[mode], p99["bare"]))
	}
	return nil
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// sender is the publishing side of one mode, on its own connection.
type sender struct {
	publish func(sample) error
	close   func() error
}

func newSender(url, mode string) (*sender, error) {
	nc, err := nats.Connect(url)
	if err != nil {
		return nil, err
	}
	subj := subject(mode)
	switch mode {
	case "bare":
		return &sender{
			publish: func(s sample) error {
				data, err := codec.Marshal(s)
				if err != nil {
					return err
				}
				return nc.Publish(subj, data)
			},
			close: func() error { defer nc.Close(); return nc.Flush() },
		}, nil
	case "natsbridge", "natsbridge-deep", "jetstream":
		outbox := broadcast.New[sample]()
		var link *natsbridge.Link
		if q := outQueue; mode != "jetstream" {
			if mode == "natsbridge-deep" {
				q = deepQueue
			}
			link, err = natsbridge.Out(outbox, nc, subj, codec, broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(q))
		} else {
			var js jetstream.JetStream
			if js, err = jetstream.New(nc); err == nil {
				link, err = natsbridge.OutStream(outbox, js, stream, subj, codec, broadcast.WithPolicy(broadcast.Block))
			}
		}
		if err != nil {
			nc.Close()
			return nil, err
		}
		return &sender{
			publish: outbox.Publish,
			close: func() error {
				defer nc.Close()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := link.Close(ctx); err != nil {
					return err
				}
				return outbox.Shutdown(ctx)
			},
		}, nil
	}
	nc.Close()
	return nil, fmt.Errorf("unknown mode %q", mode)
}

// runChild starts a child listening on modes, each expecting want values,
// runs load with a publish function per mode index, and returns when the
// load began and the child's reports, one per mode.
func runChild(url string, modes []string, want int, gap time.Duration, load func(publish func(int, sample) error) error) (time.Time, []report, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", "CROSSBENCH_URL="+url,
		"CROSSBENCH_MODES="+strings.Join(modes, ","), "CROSSBENCH_WANT="+strconv.Itoa(want))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return time.Time{}, nil, err
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 1<<20)
	expect := func(prefix string) (string, error) {
		for lines.Scan() {
			if t := lines.Text(); strings.HasPrefix(t, prefix) {
				return strings.TrimPrefix(t, prefix), nil
			}
		}
		return "", fmt.Errorf("child output ended before %q", prefix)
	}
	if _, err := expect("ready"); err != nil {
		return time.Time{}, nil, err
	}
	senders := make([]*sender, len(modes))
	for i, m := range modes {
		s, err := newSender(url, m)
		if err != nil {
			return time.Time{}, nil, err
		}
		senders[i] = s
	}
	start := time.Now()
	err := load(func(i int, s sample) error { return senders[i].publish(s) })
	for _, s := range senders {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return start, nil, err
	}
	line, err := expect("result ")
	if err != nil {
		return start, nil, err
	}
	_, _ = io.WriteString(stdin, "bye\n")
	var reps []report
	if err := json.Unmarshal([]byte(line), &reps); err != nil {
		return start, nil, err
	}
	return start, reps, nil
}

// child listens on every mode in CROSSBENCH_MODES, each on its own
// connection, until each has CROSSBENCH_WANT values or none came for 2 s,
// then prints "result [reports]".
func child() error {
	modes := strings.Split(os.Getenv("CROSSBENCH_MODES"), ",")
	want, _ := strconv.Atoi(os.Getenv("CROSSBENCH_WANT"))
	url := os.Getenv("CROSSBENCH_URL")
	var (
		mu    sync.Mutex // guards reps
		reps  = make([]report, len(modes))
		stops []func()
	)
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	for i, mode := range modes {
		reps[i].Lat = make([]float64, 0, want)
		recv := func(s sample) {
			now := time.Now().UnixNano()
			mu.Lock()
			r := &reps[i]
			r.Received++
			r.LastRecv = now
			r.Lat = append(r.Lat, float64(now-s.T)/1e3)
			mu.Unlock()
		}
		nc, err := nats.Connect(url)
		if err != nil {
			return err
		}
		stops = append(stops, nc.Close)
		switch mode {
		case "bare":
			sub, err := nc.Subscribe(subject(mode), func(m *nats.Msg) {
				if s, err := codec.Unmarshal(m.Data); err == nil {
					recv(s)
				}
			})
			if err != nil {
				return err
			}
			_ = sub.SetPendingLimits(-1, -1)
		case "natsbridge", "natsbridge-deep", "jetstream":
			inbox := broadcast.New[sample]()
			w, err := inbox.Watch(broadcast.WithPolicy(broadcast.Block))
			if err != nil {
				return err
			}
			var link *natsbridge.Link
			if mode != "jetstream" {
				if link, err = natsbridge.In(nc, subject(mode), codec, inbox); err == nil {
					err = link.SetPendingLimits(-1, -1)
				}
			} else {
				var js jetstream.JetStream
				if js, err = jetstream.New(nc); err == nil {
					link, err = natsbridge.InStream(js, stream, subject(mode), 0, codec, inbox)
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
			stops = append(stops, func() {
				_ = link.Close(context.Background())
				_ = inbox.Shutdown(context.Background())
				<-done
			})
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		if err := nc.Flush(); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		t := 0
		for _, r := range reps {
			t += r.Received
		}
		return t
	}
	last, idleSince := -1, time.Now()
	for {
		time.Sleep(2 * time.Millisecond)
		got := total()
		if got >= want*len(modes) {
			break
		}
		if got != last {
			last, idleSince = got, time.Now()
		} else if time.Since(idleSince) > 2*time.Second {
			break
		}
	}
	mu.Lock()
	for i := range reps {
		lat := reps[i].Lat
		slices.Sort(lat)
		if len(lat) > 0 {
			reps[i].P50 = lat[len(lat)/2]
			reps[i].P99 = lat[len(lat)*99/100]
		}
	}
	data, _ := json.Marshal(reps)
	mu.Unlock()
	fmt.Printf("result %s\n", data)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return nil
}
