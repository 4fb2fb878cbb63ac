// Command crossbench measures fan-out across processes: values/s and
// p50/p99 latency from Publish in this process to a watcher in a child
// process (this program re-executed), through natsbridge (Out and In: one
// herald broadcaster on each side) against a bare nats.go publisher and
// subscriber with the same codec, through JetStream (OutStream and
// InStream) against bare nats.go on JetStream, and one subscription fanned
// out to many local watchers against as many bare subscriptions, side by
// side against one embedded nats-server, and prints the verdict against
// natsbridge's targets:
//
//   - issue 28: jetstream at least 0.90 of js-bare's values/s; fanout at
//     least 5 times bare-subs' deliveries/s; natsbridge at least 0.95 of
//     hop-in's values/s (the bridge's own code costs at most 5 % beyond the
//     hop into the receiving broadcaster, which any watcher needs);
//   - issue 16: natsbridge at least 0.90 of bare's values/s, a p99 at most
//     1.15 times bare's;
//   - the floors, beside issue 28's verdicts (which they do not replace):
//     natsbridge at least 0.95 of hop-in-hdr's values/s (hop-in with the
//     bridge's header on every message: what is left is the bridge's own
//     code), jetstream at least 0.90 of js-bare-id's (js-bare with the
//     message IDs OutStream sends).
//
// Modes (-modes, bare first):
//
//	bare        nats.go alone: codec.Marshal + nc.Publish; nc.Subscribe + codec.Unmarshal
//	natsbridge  Out (Block watcher) from an outbox; In into an inbox read by a Block watcher through All()
//	jetstream   OutStream and InStream on a file-backed stream
//	js-bare     nats.go alone on the same stream: js.PublishAsync with at most 256
//	            publishes in flight (OutStream's window), PublishAsyncComplete at the
//	            end; a consumer (explicit ack, nats.go's defaults otherwise) read
//	            through Consume, each message decoded and acked
//	js-bare-id  floor: js-bare with a Nats-Msg-Id per value, as OutStream sends (the
//	            stream's duplicate check)
//	fanout      Out (Block watcher) from an outbox; one In into an inbox with -watchers
//	            Block watchers, each read through All() by its own goroutine
//	bare-subs   what a user writes without natsbridge: bare's publisher; -watchers
//	            nc.Subscribe on one connection in the child, each handler decoding
//	hops        diagnostic: bare's nats.go code plus, written inline without natsbridge,
//	            the two broadcast hops natsbridge has (publisher -> outbox -> a goroutine
//	            reading All() that encodes and publishes; handler -> inbox -> watcher)
//	hop-in      bare plus only the receiving process's broadcast hop, no natsbridge code
//	hop-in-hdr  floor: hop-in whose publisher sets the header an Out sends (HeaderSeq,
//	            "<origin> <seq>", a fresh string per value on a reused message, as Out
//	            does) and whose handler reads it (a message without it is not counted),
//	            so that nats.go and the server do the bridge's header work; no
//	            natsbridge code
//	hop-in-hdr2 diagnostic, not in the defaults: hop-in-hdr with the origin and the
//	            sequence number in two headers (Herald-Origin, Herald-Seq), as Out sent
//	            them before 2026-12-07: what the one header saves
//
// fanout and bare-subs count deliveries (values times watchers) and take
// part in the throughput runs only (-fann values per run); the other modes
// take part in both. Every run checks every delivery: each watcher or
// subscriber must have received every value (and the sending side must have
// had no failure), or crossbench stops with an error, so no mode can gain by
// losing values.
//
// The machine this runs on is shared and noisy, so every comparison is made
// within a round and only then summarized. Throughput: per round, each mode
// publishes N values back to back to a fresh child, twice, in mirrored
// order (A B C C B A, the starting mode rotating from round to round), so
// that a drift of the machine's load during the round touches every mode
// alike; a mode's rate in the round is its values over its time in both
// runs, and the "vs bare" ratio is the median over rounds of each round's
// ratio. Latency: per round, one child listens on every mode at once and
// the modes take turns value by value (each turn in a random order),
// one value every gap: well under capacity, so that queueing does not
// dominate, and every mode sees the same moments of load. Each value
// carries the time its Publish began; the child takes the time its watcher
// (or the bare subscriber) receives it. p50 and p99 are per round, ratios
// per round, then medians over rounds, with the middle half of the rounds'
// ratios beside them.
//
// CPU per value: in the throughput runs, the user and system time both
// processes used (getrusage; the parent's includes the embedded server)
// over the values. Other processes on the machine change it much less than
// they change values/s, so it shows what each mode costs; on a machine
// whose cores are all busy, values/s follows it. The per-run lines on
// standard error split it between the processes and add the voluntary
// context switches per value (threads that went to sleep in the kernel).
//
//	go run .                                # every default mode: the figures in README.md
//	go run . -modes bare,natsbridge,hop-in  # one of the comparisons
//	go run . -smoke                         # one tiny round: the harness works (CI)
//	go run . -profile DIR                   # CPU profiles of the parent and of each child
package main

import (
	"bufio"
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
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

// sample is the value sent: its number and when its Publish began.
type sample struct {
	Seq uint64 `json:"s"`
	T   int64  `json:"t"` // unix nanoseconds
}

var codec = natsbridge.JSON[sample]()

const (
	childEnv   = "CROSSBENCH_CHILD"
	profileEnv = "CROSSBENCH_PROFILE"
	stream     = "BENCH"
)

// The targets natsbridge is held to.
const (
	targetRate   = 0.90 // natsbridge values/s over bare's, at least (issue 16)
	targetP99    = 1.15 // natsbridge p99 over bare's, at most (issue 16)
	targetJS     = 0.90 // jetstream values/s over js-bare's, at least (issue 28)
	targetFanout = 5.0  // fanout deliveries/s over bare-subs', at least (issue 28)
	targetHopIn  = 0.95 // natsbridge values/s over hop-in's, at least (issue 28)

	// The floors: the same targets against the modes that do the bridge's
	// header and message-ID work without its code.
	targetHopInHdr = targetHopIn // natsbridge values/s over hop-in-hdr's
	targetJSID     = targetJS    // jetstream values/s over js-bare-id's
)

var (
	defaultModes = []string{"bare", "natsbridge", "jetstream", "js-bare", "js-bare-id", "fanout", "bare-subs", "hops", "hop-in", "hop-in-hdr"}
	allModes     = append(slices.Clone(defaultModes), "hop-in-hdr2")
	outQueue     = broadcast.DefaultQueueLength
	watchers     = 100
	fanWindow    = 2_000
	loadStart    string
)

// jsWindow is the in-flight window of js-bare: OutStream's (its default).
const jsWindow = 256

// subject gives each mode its own subject; the JetStream modes' are in the
// stream.
func subject(mode string) string {
	if isJS(mode) {
		return "benchjs." + mode
	}
	return "bench." + mode
}

func isJS(mode string) bool {
	return mode == "jetstream" || mode == "js-bare" || mode == "js-bare-id"
}

// isFanout tells the modes whose child has many watchers (or subscribers)
// per value: they run in the throughput runs only, and count deliveries.
func isFanout(mode string) bool { return mode == "fanout" || mode == "bare-subs" }

// width is how many deliveries one value of mode makes in the child.
func width(mode string) int {
	if isFanout(mode) {
		return watchers
	}
	return 1
}

// report is what a child measured for one mode.
type report struct {
	Received int       `json:"received"`  // deliveries, all watchers of the mode
	MinPer   int       `json:"min_per"`   // the fewest values one watcher (or subscriber) received
	LastRecv int64     `json:"last_recv"` // unix ns
	Lat      []float64 `json:"-"`
	P50      float64   `json:"p50_us"`
	P99      float64   `json:"p99_us"`
	CPU      int64     `json:"cpu_ns"` // the child's CPU time from ready to its last value
	Waits    int64     `json:"waits"`  // the child's voluntary context switches meanwhile
}

func main() {
	if os.Getenv(childEnv) != "" {
		if err := child(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		return
	}
	rounds := flag.Int("rounds", 15, "rounds; each runs every mode")
	n := flag.Int("n", 200_000, "values per throughput run (each mode runs twice per round)")
	fann := flag.Int("fann", 10_000, "values per throughput run of fanout and bare-subs (each delivered to -watchers watchers)")
	flag.IntVar(&fanWindow, "fanwin", fanWindow, "fanout and bare-subs: values the publisher may be ahead of the child's slowest watcher")
	flag.IntVar(&watchers, "watchers", watchers, "watchers of fanout, subscriptions of bare-subs")
	l := flag.Int("lat", 5_000, "values per mode in a latency run")
	gap := flag.Duration("gap", 100*time.Microsecond, "pause between values in a latency run (time.Sleep: at least this, about 1 ms on Linux when the process is otherwise idle; the summary prints the mean)")
	modesFlag := flag.String("modes", strings.Join(defaultModes, ","), "modes, comma-separated, bare first: "+strings.Join(allModes, ", "))
	smoke := flag.Bool("smoke", false, "one tiny round: check the harness, not the figures")
	flag.IntVar(&outQueue, "outq", outQueue, "queue length of the Block watcher on the sending side (natsbridge, hops)")
	profile := flag.String("profile", "", "write CPU profiles of this process (parent.pprof) and of each child (child-MODES-PID.pprof) to this directory")
	flag.Parse()
	modes := strings.Split(*modesFlag, ",")
	if modes[0] != "bare" {
		fmt.Fprintln(os.Stderr, "crossbench: -modes must start with bare")
		os.Exit(2)
	}
	for _, m := range modes {
		if !slices.Contains(allModes, m) {
			fmt.Fprintf(os.Stderr, "crossbench: unknown mode %q\n", m)
			os.Exit(2)
		}
	}
	if *smoke {
		*rounds, *n, *l, *fann = 1, 2_000, 100, 200
	}
	stopProfile := func() {}
	if *profile != "" {
		stop, err := startProfile(filepath.Join(*profile, "parent.pprof"))
		if err != nil {
			fmt.Fprintln(os.Stderr, "crossbench:", err)
			os.Exit(1)
		}
		stopProfile = stop
		os.Setenv(profileEnv, *profile)
	}
	err := run(*rounds, *n, *fann, *l, *gap, modes, *smoke)
	stopProfile()
	if err != nil {
		fmt.Fprintln(os.Stderr, "crossbench:", err)
		os.Exit(1)
	}
}

// startProfile starts a CPU profile written to path; the returned function
// stops it.
func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// loadavg returns the machine's load averages, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

func run(rounds, n, fann, l int, gap time.Duration, modes []string, smoke bool) error {
	loadStart = loadavg()
	began := time.Now().UTC()
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

	var latModes []string // the modes of the latency runs: one watcher per value
	for _, m := range modes {
		if !isFanout(m) {
			latModes = append(latModes, m)
		}
	}
	rate := map[string][]float64{} // values/s, deliveries/s for the fanout modes, per round
	cpu := map[string][]float64{}  // CPU µs per value (per delivery), both processes, per round
	p50 := map[string][]float64{}
	p99 := map[string][]float64{}
	var gaps []time.Duration // the mean time between two values of a latency run, per round
	for r := 0; r < rounds; r++ {
		// A B C C B A, starting at a different mode each round.
		order := make([]string, 0, 2*len(modes))
		for i := range modes {
			order = append(order, modes[(i+r)%len(modes)])
		}
		for i := len(modes) - 1; i >= 0; i-- {
			order = append(order, order[i])
		}
		got := map[string]int{}
		took := map[string]time.Duration{}
		spent := map[string]int64{} // CPU ns, parent and child
		for _, mode := range order {
			if err := freshStream(); err != nil {
				return err
			}
			n := n
			wait := func(int) error { return nil }
			if isFanout(mode) {
				n = fann
				pw, err := newWindow(admin)
				if err != nil {
					return err
				}
				defer pw.close()
				wait = pw.wait
			}
			start, reps, pcpu, err := runChildCPU(srv.URL(), []string{mode}, n, func(publish func(int, sample) error) error {
				for i := 1; i <= n; i++ {
					if err := wait(i); err != nil {
						return err
					}
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
			if rep.Received != n*width(mode) || rep.MinPer != n {
				return fmt.Errorf("%s throughput, round %d: received %d of %d (%d watchers; the fewest one watcher got: %d of %d)",
					mode, r+1, rep.Received, n*width(mode), width(mode), rep.MinPer, n)
			}
			d := time.Duration(rep.LastRecv - start.UnixNano())
			got[mode] += rep.Received
			took[mode] += d
			spent[mode] += pcpu[0] + rep.CPU
			units, unit := "values", "value"
			if isFanout(mode) {
				units, unit = "deliveries", "delivery"
			}
			k := float64(rep.Received)
			fmt.Fprintf(os.Stderr, "round %d %-10s %9.0f %s/s; per %s: CPU µs %.2f here + %.2f in the child, thread waits %.3f here + %.3f in the child\n", r+1, mode,
				k/d.Seconds(), units, unit, float64(pcpu[0])/k/1e3, float64(rep.CPU)/k/1e3,
				float64(pcpu[1])/k, float64(rep.Waits)/k)
		}
		for _, mode := range modes {
			rate[mode] = append(rate[mode], float64(got[mode])/took[mode].Seconds())
			cpu[mode] = append(cpu[mode], float64(spent[mode])/float64(got[mode])/1e3)
		}
		if err := freshStream(); err != nil {
			return err
		}
		var sent time.Duration
		_, reps, err := runChild(srv.URL(), latModes, l, func(publish func(int, sample) error) error {
			t0 := time.Now()
			defer func() { sent += time.Since(t0) }()
			// Each turn in a random order: a value still on its way when
			// the next one is sent shares the machine with it, so a mode
			// always followed by the same one (jetstream, whose values cost
			// the most) would have its tail lengthened by that one alone.
			rng := rand.New(rand.NewPCG(uint64(r), 1))
			turn := make([]int, len(latModes))
			for i := 1; i <= l; i++ {
				for k := range turn {
					turn[k] = k
				}
				rng.Shuffle(len(turn), func(a, b int) { turn[a], turn[b] = turn[b], turn[a] })
				for _, m := range turn {
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
		gaps = append(gaps, sent/time.Duration(l*len(latModes)))
		for i, mode := range latModes {
			if reps[i].Received != l {
				return fmt.Errorf("%s latency, round %d: received %d of %d", mode, r+1, reps[i].Received, l)
			}
			p50[mode] = append(p50[mode], reps[i].P50)
			p99[mode] = append(p99[mode], reps[i].P99)
			fmt.Fprintf(os.Stderr, "round %d %-10s p50 %7.1f µs  p99 %7.1f µs\n", r+1, mode, reps[i].P50, reps[i].P99)
		}
	}
	summarize(os.Stdout, began, rounds, n, fann, l, gap, slices.Min(gaps), slices.Max(gaps), modes, rate, cpu, p50, p99, smoke)
	return nil
}

// summarize prints the tables and the verdicts.
func summarize(w io.Writer, began time.Time, rounds, n, fann, l int, gap, minGap, maxGap time.Duration, modes []string, rate, cpu, p50, p99 map[string][]float64, smoke bool) {
	fmt.Fprintf(w, "crossbench, %s, %s, GOMAXPROCS %d, load average %s at the start, %s at the end\n",
		began.Format("2006-01-02 15:04 MST"), runtime.Version(), runtime.GOMAXPROCS(0), loadStart, loadavg())
	fmt.Fprintf(w, "%d rounds; throughput: %d values back to back per run (fanout, bare-subs: %d values to %d watchers), each mode twice per round in mirrored order; latency: %d values per mode per round, modes taking turns in a random order, a pause of %v between values (from one value to the next: %v-%v on average, depending on the round)\n\n",
		rounds, n, fann, watchers, l, gap, minGap.Round(time.Microsecond), maxGap.Round(time.Microsecond))
	fmt.Fprintln(w, "| mode | values/s | vs bare | CPU µs/value | vs bare | p50 µs | p50 vs bare | p99 µs | p99 vs bare |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, mode := range modes {
		if isFanout(mode) {
			continue
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %.2f | %s | %.1f | %s | %.1f | %s |\n", mode,
			median(rate[mode]), spread(ratios(rate[mode], rate["bare"])),
			median(cpu[mode]), spread(ratios(cpu[mode], cpu["bare"])),
			median(p50[mode]), spread(ratios(p50[mode], p50["bare"])),
			median(p99[mode]), spread(ratios(p99[mode], p99["bare"])))
	}
	fanModes := slices.DeleteFunc(slices.Clone(modes), func(m string) bool { return !isFanout(m) })
	if len(fanModes) > 0 {
		fmt.Fprintf(w, "\n| mode (%d watchers) | deliveries/s | vs bare-subs | CPU µs/delivery | vs bare-subs |\n", watchers)
		fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: |")
		for _, mode := range fanModes {
			fmt.Fprintf(w, "| %s | %.0f | %s | %.3f | %s |\n", mode,
				median(rate[mode]), spread(ratios(rate[mode], rate["bare-subs"])),
				median(cpu[mode]), spread(ratios(cpu[mode], cpu["bare-subs"])))
		}
	}
	fmt.Fprintln(w, "\n(ratios: the median over rounds of each round's ratio, with the middle half of the rounds' ratios in brackets; CPU: user and system time of both processes, the embedded server included, in the throughput runs, per value or per delivery)")
	if smoke {
		fmt.Fprintln(w, "\nverdict: none (-smoke checks the harness, it measures nothing)")
		return
	}
	met := func(ok bool) string {
		if ok {
			return "met"
		}
		return "MISSED"
	}
	type target struct {
		what, a, b string
		xs         map[string][]float64
		limit      float64
		atLeast    bool
	}
	targets := []target{
		{"jetstream values/s over js-bare's (issue 28)", "jetstream", "js-bare", rate, targetJS, true},
		{fmt.Sprintf("fanout deliveries/s over bare-subs', %d watchers (issue 28)", watchers), "fanout", "bare-subs", rate, targetFanout, true},
		{"natsbridge values/s over hop-in's (issue 28)", "natsbridge", "hop-in", rate, targetHopIn, true},
		{"natsbridge CPU per value over hop-in's (for the 5 %, not a verdict)", "natsbridge", "hop-in", cpu, 0, false},
		{"floor: natsbridge over hop-in-hdr, values/s (the bridge's own code; the header's work is in both)", "natsbridge", "hop-in-hdr", rate, targetHopInHdr, true},
		{"floor: natsbridge over hop-in-hdr, CPU per value (not a verdict)", "natsbridge", "hop-in-hdr", cpu, 0, false},
		{"floor: jetstream over js-bare-id, values/s (the bridge's own code; message IDs in both)", "jetstream", "js-bare-id", rate, targetJSID, true},
		{"hop-in-hdr values/s over hop-in's (what the header costs without the bridge, not a verdict)", "hop-in-hdr", "hop-in", rate, 0, false},
		{"natsbridge values/s over bare's (issue 16)", "natsbridge", "bare", rate, targetRate, true},
		{"natsbridge p99 over bare's (issue 16)", "natsbridge", "bare", p99, targetP99, false},
	}
	fmt.Fprintln(w, "\n| comparison | measured | target | verdict |")
	fmt.Fprintln(w, "| --- | ---: | ---: | --- |")
	for _, t := range targets {
		if !slices.Contains(modes, t.a) || !slices.Contains(modes, t.b) {
			continue
		}
		rs := ratios(t.xs[t.a], t.xs[t.b])
		m := median(rs)
		switch {
		case t.limit == 0:
			fmt.Fprintf(w, "| %s | %s | - | - |\n", t.what, spread(rs))
		case t.atLeast:
			fmt.Fprintf(w, "| %s | %s | >= %.2f | %s |\n", t.what, spread(rs), t.limit, met(m >= t.limit))
		default:
			fmt.Fprintf(w, "| %s | %s | <= %.2f | %s |\n", t.what, spread(rs), t.limit, met(m <= t.limit))
		}
	}
}

// ratios returns xs[i]/base[i] for each round.
func ratios(xs, base []float64) []float64 {
	if len(xs) != len(base) {
		return nil
	}
	rs := make([]float64, len(xs))
	for i := range xs {
		rs[i] = xs[i] / base[i]
	}
	return rs
}

// spread formats the median of rs and, with 3 or more, its middle half.
func spread(rs []float64) string {
	if len(rs) == 0 {
		return "-"
	}
	s := slices.Sorted(slices.Values(rs))
	if len(s) < 3 {
		return fmt.Sprintf("%.2f", median(s))
	}
	return fmt.Sprintf("%.2f [%.2f-%.2f]", median(s), s[(len(s)-1)/4], s[(3*(len(s)-1)+3)/4])
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	xs = slices.Sorted(slices.Values(xs))
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// progressSubject is where a fanout or bare-subs child reports how many
// values its slowest watcher has received.
const progressSubject = "crossbench.progress"

// window keeps a fanout or bare-subs publisher at most fanWindow values
// ahead of the child's slowest watcher. Without it, 100 bare subscriptions
// on one connection take the server's messages more slowly than it sends
// them (100 per value), its buffer for the child fills and it cuts the
// child off as a slow consumer: at 20 000 values back to back, 28 % of the
// deliveries arrived. The window holds both modes to the same rule, so
// that what is measured is how fast the child delivers, losing nothing.
type window struct {
	sub  *nats.Subscription
	done atomic.Int64  // the slowest watcher's count, as last reported
	kick chan struct{} // a report came
}

func newWindow(nc *nats.Conn) (*window, error) {
	w := &window{kick: make(chan struct{}, 1)}
	sub, err := nc.Subscribe(progressSubject, func(m *nats.Msg) {
		v, err := strconv.ParseInt(string(m.Data), 10, 64)
		if err != nil {
			return
		}
		w.done.Store(v)
		select {
		case w.kick <- struct{}{}:
		default:
		}
	})
	if err != nil {
		return nil, err
	}
	w.sub = sub
	return w, nc.Flush()
}

// wait returns once value number i may be published.
func (w *window) wait(i int) error {
	for int64(i)-w.done.Load() > int64(fanWindow) {
		select {
		case <-w.kick:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("the child's slowest watcher has been at %d values for 10 s", w.done.Load())
		}
	}
	return nil
}

func (w *window) close() { _ = w.sub.Unsubscribe() }

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
	bare := func(s sample) error {
		data, err := codec.Marshal(s)
		if err != nil {
			return err
		}
		return nc.Publish(subj, data)
	}
	block := []broadcast.Option{broadcast.WithPolicy(broadcast.Block), broadcast.WithQueueLength(outQueue)}
	switch mode {
	case "hop-in-hdr", "hop-in-hdr2":
		// bare's publisher with the header an Out sends, made as Out
		// makes it: a reused message, a fresh value string per value.
		origin := make([]byte, 16)
		_, _ = crand.Read(origin)
		prefix := hex.EncodeToString(origin) + " "
		val := make([]string, 1)
		m := &nats.Msg{Subject: subj, Header: nats.Header{natsbridge.HeaderSeq: val}}
		if mode == "hop-in-hdr2" {
			prefix = ""
			m.Header["Herald-Origin"] = []string{hex.EncodeToString(origin)}
		}
		var buf []byte
		return &sender{
			publish: func(s sample) error {
				data, err := codec.Marshal(s)
				if err != nil {
					return err
				}
				buf = strconv.AppendUint(append(buf[:0], prefix...), s.Seq, 10)
				val[0] = string(buf)
				m.Data = data
				return nc.PublishMsg(m)
			},
			close: func() error { defer nc.Close(); return nc.Flush() },
		}, nil
	case "bare", "hop-in", "bare-subs":
		return &sender{
			publish: bare,
			close:   func() error { defer nc.Close(); return nc.Flush() },
		}, nil
	case "hops":
		// The outbox hop without natsbridge: a Block watcher read by one
		// goroutine that does what bare's publisher does.
		outbox := broadcast.New[sample]()
		w, err := outbox.Watch(block...)
		if err != nil {
			nc.Close()
			return nil, err
		}
		done := make(chan error, 1)
		go func() {
			var first error
			for s := range w.All() {
				if err := bare(s); err != nil && first == nil {
					first = err
				}
			}
			done <- first
		}()
		return &sender{
			publish: outbox.Publish,
			close: func() error {
				defer nc.Close()
				if err := outbox.Shutdown(context.Background()); err != nil {
					return err
				}
				if err := <-done; err != nil {
					return err
				}
				return nc.Flush()
			},
		}, nil
	case "js-bare", "js-bare-id":
		// What a user writes on JetStream without natsbridge: PublishAsync
		// with OutStream's window, every acknowledgement awaited at the end.
		var failed atomic.Int64
		js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(jsWindow),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) { failed.Add(1) }))
		if err != nil {
			nc.Close()
			return nil, err
		}
		// A full window waits (as OutStream's does) instead of failing
		// after nats.go's default 200 ms.
		opts := []jetstream.PublishOpt{jetstream.WithStallWait(time.Minute)}
		var id []byte
		return &sender{
			publish: func(s sample) error {
				data, err := codec.Marshal(s)
				if err != nil {
					return err
				}
				o := opts
				if mode == "js-bare-id" {
					id = strconv.AppendUint(append(id[:0], "crossbench-"...), s.Seq, 10)
					o = append(o[:1:1], jetstream.WithMsgID(string(id)))
				}
				_, err = js.PublishAsync(subj, data, o...)
				return err
			},
			close: func() error {
				defer nc.Close()
				select {
				case <-js.PublishAsyncComplete():
				case <-time.After(time.Minute):
					return fmt.Errorf("%s: %d publishes not acknowledged within a minute", mode, js.PublishAsyncPending())
				}
				if f := failed.Load(); f > 0 {
					return fmt.Errorf("%s: %d publishes failed", mode, f)
				}
				return nil
			},
		}, nil
	case "natsbridge", "jetstream", "fanout":
		outbox := broadcast.New[sample]()
		var link *natsbridge.Link
		if mode != "jetstream" {
			link, err = natsbridge.Out(outbox, nc, subj, codec, block...)
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
				if st := link.Stats(); st.Failed+st.Dropped > 0 {
					return fmt.Errorf("%s: %d failed, %d dropped", mode, st.Failed, st.Dropped)
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
func runChild(url string, modes []string, want int, load func(publish func(int, sample) error) error) (time.Time, []report, error) {
	start, reps, _, err := runChildCPU(url, modes, want, load)
	return start, reps, err
}

// runChildCPU is runChild that also returns what this process (publishers
// and the embedded server) used from the start of the load until the
// senders were closed: CPU time and voluntary context switches.
func runChildCPU(url string, modes []string, want int, load func(publish func(int, sample) error) error) (time.Time, []report, [2]int64, error) {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1", "CROSSBENCH_URL="+url,
		"CROSSBENCH_MODES="+strings.Join(modes, ","), "CROSSBENCH_WANT="+strconv.Itoa(want),
		"CROSSBENCH_WATCHERS="+strconv.Itoa(watchers))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return time.Time{}, nil, [2]int64{}, err
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
		return time.Time{}, nil, [2]int64{}, err
	}
	senders := make([]*sender, 0, len(modes))
	defer func() {
		for _, s := range senders {
			_ = s.close()
		}
	}()
	for _, m := range modes {
		s, err := newSender(url, m)
		if err != nil {
			return time.Time{}, nil, [2]int64{}, err
		}
		senders = append(senders, s)
	}
	cpu0, waits0 := usage()
	start := time.Now()
	err := load(func(i int, s sample) error { return senders[i].publish(s) })
	for _, s := range senders {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}
	senders = nil
	cpu1, waits1 := usage()
	if err != nil {
		return start, nil, [2]int64{}, err
	}
	line, err := expect("result ")
	if err != nil {
		return start, nil, [2]int64{}, err
	}
	_, _ = io.WriteString(stdin, "bye\n")
	var reps []report
	if err := json.Unmarshal([]byte(line), &reps); err != nil {
		return start, nil, [2]int64{}, err
	}
	return start, reps, [2]int64{cpu1 - cpu0, waits1 - waits0}, nil
}

// counter counts one fanout watcher's (or bare-subs subscriber's) values
// and when it got the last one it waits for, padded so that the watchers'
// counters do not share a cache line.
type counter struct {
	n    atomic.Int64
	last atomic.Int64 // unix ns of value number want
	_    [48]byte
}

// child listens on every mode in CROSSBENCH_MODES, each on its own
// connection, until each has CROSSBENCH_WANT values (times
// CROSSBENCH_WATCHERS for fanout and bare-subs) or none came for 2 s, then
// prints "result [reports]".
func child() error {
	modes := strings.Split(os.Getenv("CROSSBENCH_MODES"), ",")
	want, _ := strconv.Atoi(os.Getenv("CROSSBENCH_WANT"))
	watchers, _ = strconv.Atoi(os.Getenv("CROSSBENCH_WATCHERS"))
	url := os.Getenv("CROSSBENCH_URL")
	stopProfile := func() {}
	if dir := os.Getenv(profileEnv); dir != "" {
		stop, err := startProfile(filepath.Join(dir, fmt.Sprintf("child-%s-%d.pprof", strings.Join(modes, "+"), os.Getpid())))
		if err != nil {
			return err
		}
		stopProfile = stop
	}
	var (
		mu       sync.Mutex // guards reps
		reps     = make([]report, len(modes))
		counters = make([][]counter, len(modes)) // fanout and bare-subs: one per watcher
		stops    []func()                        // run last first: links close before their connection
	)
	defer func() {
		for _, stop := range slices.Backward(stops) {
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
		if isFanout(mode) {
			counters[i] = make([]counter, watchers)
			reps[i].Lat = nil
		}
		// count records a value for fanout watcher k: no lock shared
		// between watchers, so that the count does not serialize them.
		count := func(k int) {
			c := &counters[i][k]
			if c.n.Add(1) == int64(want) {
				c.last.Store(time.Now().UnixNano())
			}
		}
		// A disconnect or an asynchronous error (a slow consumer) makes
		// values go missing: say so, the count check then fails the run.
		nc, err := nats.Connect(url,
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
				if err != nil {
					fmt.Fprintf(os.Stderr, "child %s: disconnected: %v\n", mode, err)
				}
			}),
			nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
				fmt.Fprintf(os.Stderr, "child %s: %v\n", mode, err)
			}))
		if err != nil {
			return err
		}
		stops = append(stops, nc.Close)
		// watch starts the reader of the inbox that natsbridge, jetstream,
		// fanout and the hop modes deliver into: a Block watcher read
		// through All() by its own goroutine.
		watch := func(inbox *broadcast.Broadcaster[sample], recv func(sample)) (func(), error) {
			w, err := inbox.Watch(broadcast.WithPolicy(broadcast.Block))
			if err != nil {
				return nil, err
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				for s := range w.All() {
					recv(s)
				}
			}()
			return func() { <-done }, nil
		}
		// readers ends the inbox after closeLink, then waits for its readers.
		readers := func(inbox *broadcast.Broadcaster[sample], closeLink func(), waits []func()) {
			stops = append(stops, func() {
				closeLink()
				_ = inbox.Shutdown(context.Background())
				for _, wait := range waits {
					wait()
				}
			})
		}
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
		case "bare-subs":
			// One subscription per would-be watcher, each decoding.
			for k := range watchers {
				sub, err := nc.Subscribe(subject(mode), func(m *nats.Msg) {
					if _, err := codec.Unmarshal(m.Data); err == nil {
						count(k)
					}
				})
				if err != nil {
					return err
				}
				_ = sub.SetPendingLimits(-1, -1)
			}
		case "js-bare", "js-bare-id":
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cons, err := js.CreateConsumer(ctx, stream, jetstream.ConsumerConfig{
				FilterSubject: subject(mode), AckPolicy: jetstream.AckExplicitPolicy,
			})
			cancel()
			if err != nil {
				return err
			}
			cc, err := cons.Consume(func(m jetstream.Msg) {
				if s, err := codec.Unmarshal(m.Data()); err == nil {
					recv(s)
				}
				_ = m.Ack()
			})
			if err != nil {
				return err
			}
			stops = append(stops, cc.Stop)
		case "hops", "hop-in", "hop-in-hdr", "hop-in-hdr2":
			// The inbox hop without natsbridge: bare's handler publishes
			// on a broadcaster instead of recording; hop-in-hdr's reads
			// the bridge's header first.
			inbox := broadcast.New[sample]()
			wait, err := watch(inbox, recv)
			if err != nil {
				return err
			}
			readers(inbox, func() {}, []func(){wait})
			hdr, hdr2 := mode == "hop-in-hdr", mode == "hop-in-hdr2"
			sub, err := nc.Subscribe(subject(mode), func(m *nats.Msg) {
				if (hdr || hdr2) && m.Header.Get(natsbridge.HeaderSeq) == "" ||
					hdr2 && m.Header.Get("Herald-Origin") == "" {
					return // not counted: the run fails
				}
				if s, err := codec.Unmarshal(m.Data); err == nil {
					_ = inbox.Publish(s)
				}
			})
			if err != nil {
				return err
			}
			_ = sub.SetPendingLimits(-1, -1)
		case "natsbridge", "jetstream", "fanout":
			inbox := broadcast.New[sample]()
			var waits []func()
			if mode == "fanout" {
				for k := range watchers {
					wait, err := watch(inbox, func(sample) { count(k) })
					if err != nil {
						return err
					}
					waits = append(waits, wait)
				}
			} else {
				wait, err := watch(inbox, recv)
				if err != nil {
					return err
				}
				waits = append(waits, wait)
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
			if link != nil {
				readers(inbox, func() { _ = link.Close(context.Background()) }, waits)
			} else {
				readers(inbox, func() {}, waits)
			}
			if err != nil {
				return err
			}
		default:
			return fmt.Errorf("unknown mode %q", mode)
		}
		if err := nc.Flush(); err != nil {
			return err
		}
	}
	// gather fills in the fanout modes' reports from their counters.
	gather := func() {
		for i, cs := range counters {
			if cs == nil {
				continue
			}
			r := &reps[i]
			r.Received, r.MinPer, r.LastRecv = 0, want, 0
			for k := range cs {
				c := int(cs[k].n.Load())
				r.Received += c
				r.MinPer = min(r.MinPer, c)
				r.LastRecv = max(r.LastRecv, cs[k].last.Load())
			}
		}
	}
	// The slowest fanout watcher's count goes to the parent's window
	// every 200 µs or so while it changes.
	progressDone := make(chan struct{})
	var progressWG sync.WaitGroup
	defer func() { close(progressDone); progressWG.Wait() }()
	for _, cs := range counters {
		if cs == nil {
			continue
		}
		pnc, err := nats.Connect(url)
		if err != nil {
			return err
		}
		stops = append(stops, pnc.Close)
		progressWG.Go(func() {
			last := int64(-1)
			for {
				select {
				case <-progressDone:
					return
				case <-time.After(200 * time.Microsecond):
				}
				low := int64(want)
				for k := range cs {
					low = min(low, cs[k].n.Load())
				}
				if low != last {
					last = low
					_ = pnc.Publish(progressSubject, strconv.AppendInt(nil, low, 10))
				}
			}
		})
	}
	cpu0, waits0 := usage()
	fmt.Println("ready")
	total := func() int {
		mu.Lock()
		defer mu.Unlock()
		gather()
		t := 0
		for _, r := range reps {
			t += r.Received
		}
		return t
	}
	all := 0
	for _, m := range modes {
		all += want * width(m)
	}
	last, idleSince := -1, time.Now()
	for {
		time.Sleep(2 * time.Millisecond)
		got := total()
		if got >= all {
			break
		}
		if got != last {
			last, idleSince = got, time.Now()
		} else if time.Since(idleSince) > 2*time.Second {
			break
		}
	}
	cpu1, waits1 := usage()
	mu.Lock()
	gather()
	for i := range reps {
		reps[i].CPU, reps[i].Waits = cpu1-cpu0, waits1-waits0
		if counters[i] == nil {
			reps[i].MinPer = reps[i].Received
		}
		lat := reps[i].Lat
		slices.Sort(lat)
		if len(lat) > 0 {
			reps[i].P50 = lat[len(lat)/2]
			reps[i].P99 = lat[len(lat)*99/100]
		}
	}
	data, _ := json.Marshal(reps)
	mu.Unlock()
	stopProfile() // before the result: the parent kills the child soon after
	fmt.Printf("result %s\n", data)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	return nil
}
