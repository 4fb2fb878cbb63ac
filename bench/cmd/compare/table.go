package main

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// A target is what herald has to reach on one row.
type target struct {
	ratioMin  float64 // k8s/herald must be at least this (0: no ratio target)
	heraldMax float64 // herald's value must be at most this (NaN: no such target)
}

func ratioAtLeast(x float64) *target { return &target{ratioMin: x, heraldMax: math.NaN()} }
func heraldAtMost(x float64) *target { return &target{heraldMax: x} }

func (t *target) String() string {
	switch {
	case t == nil:
		return ""
	case t.ratioMin > 0:
		return fmt.Sprintf("≥ %g×", t.ratioMin)
	case t.heraldMax == 0:
		return "0"
	default:
		return fmt.Sprintf("≤ %g", t.heraldMax)
	}
}

func (t *target) met(k8s, herald, ratio float64) bool {
	if t.ratioMin > 0 {
		return ratio >= t.ratioMin
	}
	return herald <= t.heraldMax
}

// A row compares one measurement. units are summed (heap + stack).
type row struct {
	section string // starts a new group when set
	label   string
	k8s     string // benchmark names, as results keys them
	herald  string
	units   []string
	target  *target
	noRatio bool // a ratio of two near-zero figures would mean nothing

	sectionOf string // the group's title, set by buildTable
	// filled in by buildTable
	kv, hv, ratio float64
	ok            bool // both values present
}

type table struct{ rows []*row }

// fanoutTargets are issue 27's: C() 2× Kubernetes at 1 watcher and 4× from
// 10 up; All() 5× at 1 watcher and 20× from 10 up.
func fanoutTargets(n int) (c, all float64) {
	if n == 1 {
		return 2, 5
	}
	return 4, 20
}

func tableRows() []*row {
	var rs []*row
	add := func(r *row) { rs = append(rs, r) }
	u := func(units ...string) []string { return units }

	for i, n := range []int{1, 10, 100, 1000} {
		tc, ta := fanoutTargets(n)
		sec := ""
		if i == 0 {
			sec = "1. Lossless fan-out (Block / WaitIfChannelFull), queue 1000: time per published event until every watcher has it"
		}
		k := fmt.Sprintf("Fanout/k8s/watchers=%d", n)
		add(&row{section: sec, label: fmt.Sprintf("%d watcher(s), C()", n), k8s: k,
			herald: fmt.Sprintf("Fanout/herald-C/watchers=%d", n), units: u("ns/op"), target: ratioAtLeast(tc)})
		add(&row{label: fmt.Sprintf("%d watcher(s), All()", n), k8s: k,
			herald: fmt.Sprintf("Fanout/herald-All/watchers=%d", n), units: u("ns/op"), target: ratioAtLeast(ta)})
		// The floors: k8s/floor is the most any library read that way can reach.
		add(&row{label: fmt.Sprintf("%d watcher(s), floor of C(): a channel each, filled by its own goroutine", n), k8s: k,
			herald: fmt.Sprintf("Fanout/floor-chan/watchers=%d", n), units: u("ns/op")})
		add(&row{label: fmt.Sprintf("%d watcher(s), a channel each, written by the publisher (chan, the design of C())", n), k8s: k,
			herald: fmt.Sprintf("PeerFanout/chan/watchers=%d", n), units: u("ns/op")})
		add(&row{label: fmt.Sprintf("%d watcher(s), floor of All(): the readers' loop and check alone", n), k8s: k,
			herald: fmt.Sprintf("Fanout/floor-iter/watchers=%d", n), units: u("ns/op")})
		add(&row{label: fmt.Sprintf("%d watcher(s), floor of All()'s design: a ring under one mutex, readers with no lock", n), k8s: k,
			herald: fmt.Sprintf("Fanout/floor-ring/watchers=%d", n), units: u("ns/op")})
		add(&row{label: fmt.Sprintf("%d watcher(s), the same with All()'s claim: a mutex per batch, a CAS per value (guarantee 3)", n), k8s: k,
			herald: fmt.Sprintf("Fanout/floor-ring-claim/watchers=%d", n), units: u("ns/op")})
	}
	add(&row{label: "allocations per published event, 100 watchers, C()", k8s: "Fanout/k8s/watchers=100",
		herald: "Fanout/herald-C/watchers=100", units: u("allocs/op"), target: heraldAtMost(0)})
	add(&row{label: "allocations per published event, 1000 watchers, All()", k8s: "Fanout/k8s/watchers=1000",
		herald: "Fanout/herald-All/watchers=1000", units: u("allocs/op"), target: heraldAtMost(0)})

	// The peer libraries, each in its lossless mode (bench/peers_test.go):
	// the left column is the peer, the ratio peer/herald.
	for i, n := range []int{1, 10, 100, 1000} {
		for j, p := range peerNames {
			sec := ""
			if i == 0 && j == 0 {
				sec = "1b. Lossless fan-out against the peer libraries (left column: the peer; target: All() ahead of every peer)"
			}
			add(&row{section: sec, label: fmt.Sprintf("%d watcher(s), All() against %s", n, p),
				k8s: fmt.Sprintf("PeerFanout/%s/watchers=%d", p, n), herald: fmt.Sprintf("Fanout/herald-All/watchers=%d", n),
				units: u("ns/op"), target: ratioAtLeast(1)})
		}
	}

	add(&row{section: "2. Publish with no watchers (k8s: Action)", label: "time per Publish",
		k8s: "PublishIdle/k8s", herald: "PublishIdle/herald", units: u("ns/op"), target: ratioAtLeast(5)})
	add(&row{label: "floor of a Publish under one mutex: lock, store, unlock", k8s: "PublishIdle/k8s",
		herald: "PublishIdle/floor-mutex", units: u("ns/op")})
	add(&row{label: "allocations per Publish", k8s: "PublishIdle/k8s", herald: "PublishIdle/herald",
		units: u("allocs/op"), target: heraldAtMost(0)})

	add(&row{section: "3. Watch() + Stop() while a publisher runs flat out", label: "time per Watch+Stop",
		k8s: "Churn/k8s", herald: "Churn/herald", units: u("ns/op"), target: ratioAtLeast(5)})
	add(&row{label: "allocations per Watch+Stop", k8s: "Churn/k8s", herald: "Churn/herald",
		units: u("allocs/op"), target: heraldAtMost(4)})
	add(&row{label: "the publisher meanwhile, time per Publish",
		k8s: "Churn/k8s", herald: "Churn/herald", units: u("publish-ns")})

	add(&row{section: "4. Idle watcher, queue 1000 (MemStats after GC, per watcher)", label: "heap, after Watch()",
		k8s: "IdleWatcher/k8s", herald: "IdleWatcher/herald", units: u("heap-B/watcher"), target: ratioAtLeast(10)})
	// After C() the watcher's queue is a channel of its queue length, as
	// Kubernetes' is (API.md, "C() is the watcher's queue"): no target.
	add(&row{label: "heap, after C() (the channel is the queue, as in Kubernetes)", k8s: "IdleWatcher/k8s", herald: "IdleWatcher/herald-C",
		units: u("heap-B/watcher")})
	add(&row{label: "goroutine stacks, after Watch()", k8s: "IdleWatcher/k8s", herald: "IdleWatcher/herald",
		units: u("stack-B/watcher"), noRatio: true})
	add(&row{label: "goroutine stacks, after C()", k8s: "IdleWatcher/k8s", herald: "IdleWatcher/herald-C",
		units: u("stack-B/watcher"), noRatio: true})
	add(&row{label: "heap + stacks, after C()", k8s: "IdleWatcher/k8s", herald: "IdleWatcher/herald-C",
		units: u("heap-B/watcher", "stack-B/watcher")})
	add(&row{label: "goroutines per watcher, after C()", k8s: "IdleWatcher/k8s", herald: "IdleWatcher/herald-C",
		units: u("goroutines/watcher"), noRatio: true})

	add(&row{section: "5. Lossy fan-out (Drop / DropIfChannelFull): 100 watchers, 10 never read", label: "publisher, time per Publish",
		k8s: "Lossy/k8s", herald: "Lossy/herald-C", units: u("ns/op")})
	add(&row{label: "fast watchers: share of values delivered (median watcher; higher is better)",
		k8s: "Lossy/k8s", herald: "Lossy/herald-C", units: u("fast-delivered-%")})
	add(&row{label: "fast watchers: values received per second (median watcher; higher is better)",
		k8s: "Lossy/k8s", herald: "Lossy/herald-C", units: u("fast-values/s")})
	add(&row{label: "values a never-reading watcher holds at the end",
		k8s: "Lossy/k8s", herald: "Lossy/herald-C", units: u("slow-held"), noRatio: true})

	for i, n := range []int{1, 100, 1000} {
		sec := ""
		if i == 0 {
			sec = "6. Delivery latency, Publish to receipt, one value in flight (target: at least as fast as k8s)"
		}
		k := fmt.Sprintf("Latency/k8s/watchers=%d", n)
		hc, ha := fmt.Sprintf("Latency/herald-C/watchers=%d", n), fmt.Sprintf("Latency/herald-All/watchers=%d", n)
		add(&row{section: sec, label: fmt.Sprintf("%d watcher(s), p50, C()", n), k8s: k, herald: hc, units: u("p50-ns"), target: ratioAtLeast(1)})
		add(&row{label: fmt.Sprintf("%d watcher(s), p99, C()", n), k8s: k, herald: hc, units: u("p99-ns"), target: ratioAtLeast(1)})
		add(&row{label: fmt.Sprintf("%d watcher(s), p50, All()", n), k8s: k, herald: ha, units: u("p50-ns"), target: ratioAtLeast(1)})
		add(&row{label: fmt.Sprintf("%d watcher(s), p99, All()", n), k8s: k, herald: ha, units: u("p99-ns"), target: ratioAtLeast(1)})
	}
	add(&row{label: "round trip until all 100 have it, C()", k8s: "Latency/k8s/watchers=100", herald: "Latency/herald-C/watchers=100", units: u("ns/op")})
	// The design C() did not take, measured: a pump goroutine per watcher
	// (bench/peers_test.go, pumpModel). Its throughput is the floor-chan
	// rows of workload 1; here, its one-value latency against a channel per
	// subscriber written by the publisher (left column), which C() is.
	for _, n := range []int{100, 1000} {
		for _, q := range []string{"p50-ns", "p99-ns"} {
			add(&row{label: fmt.Sprintf("%d watchers, %s, a pump goroutine per watcher (the design C() did not take) against chan", n, q[:3]),
				k8s: fmt.Sprintf("PeerLatency/chan/watchers=%d", n), herald: fmt.Sprintf("PeerLatency/pump/watchers=%d", n), units: u(q)})
			add(&row{label: fmt.Sprintf("%d watchers, %s, floor of All(): a ring read with no lock, a wake channel per reader, against chan", n, q[:3]),
				k8s: fmt.Sprintf("PeerLatency/chan/watchers=%d", n), herald: fmt.Sprintf("Latency/floor-ring/watchers=%d", n), units: u(q)})
			add(&row{label: fmt.Sprintf("%d watchers, %s, the same floor with All()'s claim (a mutex per batch, a CAS per value) against chan", n, q[:3]),
				k8s: fmt.Sprintf("PeerLatency/chan/watchers=%d", n), herald: fmt.Sprintf("Latency/floor-ring-claim/watchers=%d", n), units: u(q)})
			add(&row{label: fmt.Sprintf("%d watchers, %s, the same floor parking with no lock (a CAS stack) against chan", n, q[:3]),
				k8s: fmt.Sprintf("PeerLatency/chan/watchers=%d", n), herald: fmt.Sprintf("Latency/floor-ring-lockfree/watchers=%d", n), units: u(q)})
		}
	}

	// Latency against the peers: C() and All() against each peer at 100 and
	// 1000 watchers (left column: the peer). Target: at least as fast as
	// every peer; against the hand-written channel, within 10% (ratio 0.9).
	for i, n := range []int{100, 1000} {
		for j, p := range peerNames {
			sec := ""
			if i == 0 && j == 0 {
				sec = "6b. Latency against the peer libraries, one value in flight (left column: the peer; target: at least as fast as every peer, within 10% of chan)"
			}
			want := 1.0
			if p == "chan" {
				want = 0.9
			}
			pk := fmt.Sprintf("PeerLatency/%s/watchers=%d", p, n)
			for _, path := range []string{"C", "All"} {
				hk := fmt.Sprintf("Latency/herald-%s/watchers=%d", path, n)
				for _, q := range []string{"p50-ns", "p99-ns"} {
					add(&row{section: sec, label: fmt.Sprintf("%d watchers, %s, %s() against %s", n, q[:3], path, p),
						k8s: pk, herald: hk, units: u(q), target: ratioAtLeast(want)})
					sec = ""
				}
			}
		}
	}

	add(&row{section: "7. Correlator on the mixed stream (1000 objects, 83% exact repeats, message variants: client-go makes 207 allocations per event on it, as on the reference stream)", label: "time per event",
		k8s: "Correlator/k8s", herald: "Correlator/herald", units: u("ns/op"), target: ratioAtLeast(50)})
	add(&row{label: "allocations per event", k8s: "Correlator/k8s", herald: "Correlator/herald",
		units: u("allocs/op"), target: heraldAtMost(3)})
	add(&row{label: "decisions on one pass: patched", k8s: "Correlator/k8s", herald: "Correlator/herald",
		units: u("patched-%"), noRatio: true})
	add(&row{label: "decisions on one pass: aggregated (herald keeps aggregating by design)", k8s: "Correlator/k8s", herald: "Correlator/herald",
		units: u("aggregated-%"), noRatio: true})
	add(&row{label: "decisions on one pass: skipped by the spam filter", k8s: "Correlator/k8s", herald: "Correlator/herald",
		units: u("skipped-%"), noRatio: true})
	add(&row{label: "the earlier stream, 40% exact repeats (client-go: 154 allocations per event): time per event",
		k8s: "Correlator/k8s-repeats40", herald: "Correlator/herald-repeats40", units: u("ns/op")})
	add(&row{label: "the earlier stream: allocations per event",
		k8s: "Correlator/k8s-repeats40", herald: "Correlator/herald-repeats40", units: u("allocs/op")})
	add(&row{section: "8. Whole pipeline: Recorder.Event/Eventf → broadcaster → correlator → no-op sink, on the stream of 7", label: "time per event",
		k8s: "Pipeline/k8s", herald: "Pipeline/herald", units: u("ns/op"), target: ratioAtLeast(30)})
	add(&row{label: "time per event, floor: the same harness without a correlator (every event allocated, published and handed to the sink)",
		k8s: "Pipeline/k8s", herald: "Pipeline/floor", units: u("ns/op")})
	add(&row{label: "allocations per event", k8s: "Pipeline/k8s", herald: "Pipeline/herald",
		units: u("allocs/op")})
	add(&row{label: "events that reached the sink", k8s: "Pipeline/k8s", herald: "Pipeline/herald",
		units: u("written-%"), noRatio: true})
	add(&row{label: "the earlier stream, 40% exact repeats: time per event",
		k8s: "Pipeline/k8s-repeats40", herald: "Pipeline/herald-repeats40", units: u("ns/op")})
	add(&row{label: "the earlier stream: events that reached the sink",
		k8s: "Pipeline/k8s-repeats40", herald: "Pipeline/herald-repeats40", units: u("written-%"), noRatio: true})

	// Workload 9 has no Kubernetes side: its k8s column holds herald's
	// own baseline, named in each label. History may cost at most 20 %
	// more than none: baseline/with history at least 1/1.2.
	const hist = "Resume/herald/publish/watchers=%d/history=%d"
	add(&row{section: "9. Resume, herald alone (Kubernetes' watch.Broadcaster keeps no history): the k8s column holds herald's own baseline, named in each row",
		label: "Publish, one full Drop watcher: without history, then WithHistory(1000)",
		k8s:   fmt.Sprintf(hist, 1, 0), herald: fmt.Sprintf(hist, 1, 1000), units: u("ns/op"), target: ratioAtLeast(0.83)})
	add(&row{label: "Publish, no watcher: without history, then WithHistory(1000)",
		k8s: fmt.Sprintf(hist, 0, 0), herald: fmt.Sprintf(hist, 0, 1000), units: u("ns/op"), target: ratioAtLeast(0.83)})
	add(&row{label: "allocations per Publish with history, one watcher",
		k8s: fmt.Sprintf(hist, 1, 0), herald: fmt.Sprintf(hist, 1, 1000), units: u("allocs/op"), target: heraldAtMost(0)})
	add(&row{label: "allocations per Publish with history, no watcher",
		k8s: fmt.Sprintf(hist, 0, 0), herald: fmt.Sprintf(hist, 0, 1000), units: u("allocs/op"), target: heraldAtMost(0)})
	add(&row{label: "Watch()+Stop(), then WatchFrom(1) replaying 1000 kept values + Stop()",
		k8s: "Resume/herald/watch/replay=false", herald: "Resume/herald/watch/replay=true", units: u("ns/op")})
	add(&row{label: "reading 10 000 values through Seq, per value: queued live, then replayed by WatchFrom after an eviction",
		k8s: "Resume/herald/read/live", herald: "Resume/herald/read/catch-up", units: u("ns/value")})
	return rs
}

// buildTable fills in the rows of the workloads in benches (nil: all).
func buildTable(res *results, benches map[string]bool) *table {
	t := &table{}
	section := ""
	for _, r := range tableRows() {
		if r.section != "" {
			section = r.section
		}
		if benches != nil && !benches[strings.SplitN(r.k8s, "/", 2)[0]] {
			continue
		}
		if r.section == "" && (len(t.rows) == 0 || t.rows[len(t.rows)-1].sectionOf != section) {
			r.section = section // the first row shown of its group carries the title
		}
		r.sectionOf = section
		kv, kok := sumMedians(res, r.k8s, r.units)
		hv, hok := sumMedians(res, r.herald, r.units)
		r.kv, r.hv, r.ok = kv, hv, kok && hok
		mr, mok := res.medianRatio(r.k8s, r.herald, r.units)
		switch {
		case mok:
			r.ratio = mr
		case hv != 0:
			r.ratio = kv / hv
		case kv != 0:
			r.ratio = math.Inf(1)
		default:
			r.ratio = math.NaN()
		}
		t.rows = append(t.rows, r)
	}
	return t
}

func sumMedians(res *results, name string, units []string) (float64, bool) {
	sum := 0.0
	for _, u := range units {
		v, ok := res.median(name, u)
		if !ok {
			return 0, false
		}
		sum += v
	}
	return sum, true
}

func (r *row) result() string {
	switch {
	case !r.ok:
		return "n/a"
	case r.target == nil:
		return ""
	case r.target.met(r.kv, r.hv, r.ratio):
		return "pass"
	default:
		return "FAIL"
	}
}

func (r *row) cells() []string {
	if !r.ok {
		return []string{r.label, "n/a", "n/a", "", r.target.String(), r.result()}
	}
	unit := r.units[0]
	ratio := formatRatio(r.ratio)
	if r.noRatio {
		ratio = ""
	}
	return []string{r.label, format(r.kv, unit), format(r.hv, unit), ratio, r.target.String(), r.result()}
}

func format(v float64, unit string) string {
	switch unit {
	case "ns/op", "p50-ns", "p99-ns", "publish-ns", "ns/value":
		switch {
		case v < 1e3:
			return fmt.Sprintf("%.0f ns", v)
		case v < 1e4:
			return fmt.Sprintf("%.2f µs", v/1e3)
		case v < 1e6:
			return fmt.Sprintf("%.1f µs", v/1e3)
		default:
			return fmt.Sprintf("%.2f ms", v/1e6)
		}
	case "heap-B/watcher", "stack-B/watcher":
		if v < 1e3 {
			return fmt.Sprintf("%.0f B", v)
		}
		return fmt.Sprintf("%.1f kB", v/1e3)
	case "fast-delivered-%", "patched-%", "aggregated-%", "skipped-%", "written-%":
		return fmt.Sprintf("%.1f %%", v)
	case "goroutines/watcher":
		return trimFloat(v, 2)
	case "fast-values/s":
		switch {
		case v >= 1e6:
			return fmt.Sprintf("%.2f M/s", v/1e6)
		case v >= 1e3:
			return fmt.Sprintf("%.0f k/s", v/1e3)
		}
		return fmt.Sprintf("%.0f /s", v)
	default: // allocs/op, slow-held
		return trimFloat(v, 1)
	}
}

func trimFloat(v float64, prec int) string {
	s := fmt.Sprintf("%.*f", prec, v)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func formatRatio(x float64) string {
	switch {
	case math.IsNaN(x):
		return "—"
	case math.IsInf(x, 1):
		return "∞"
	case x >= 10:
		return fmt.Sprintf("%.0f×", x)
	default:
		return fmt.Sprintf("%.2f×", x)
	}
}

var header = []string{"workload", "k8s", "herald", "k8s/herald", "target", "result"}

// text renders the table for a terminal; section titles stand on lines of
// their own so that they do not widen the first column.
func (t *table) text() string {
	rows := [][]string{header}
	for _, r := range t.rows {
		c := r.cells()
		c[0] = "  " + c[0]
		rows = append(rows, c)
	}
	width := make([]int, len(header))
	for _, c := range rows {
		for i, s := range c {
			width[i] = max(width[i], utf8.RuneCountInString(s))
		}
	}
	var b strings.Builder
	line := func(c []string) {
		var l strings.Builder
		for i, s := range c {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(s))
			if i > 0 && i < 4 { // numbers and ratios right-aligned
				l.WriteString(pad + s)
			} else {
				l.WriteString(s + pad)
			}
			l.WriteString("  ")
		}
		b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
	}
	line(rows[0])
	for i, r := range t.rows {
		if r.section != "" {
			b.WriteString(r.section + "\n")
		}
		line(rows[i+1])
	}
	return b.String()
}

// markdown renders the table and its notes for docs/bench-results.md.
func (t *table) markdown(env string) string {
	var b strings.Builder
	b.WriteString("<!-- Generated by `cd bench && go run ./cmd/compare`; do not edit by hand. -->\n")
	b.WriteString("# herald against Kubernetes' event machinery\n\n")
	b.WriteString("Both systems run the same workloads, interleaved in one run, carrying the same element type ")
	b.WriteString("(`watch.Event{Type, Object}`): k8s.io/apimachinery `watch.Broadcaster` v0.37.2 ")
	b.WriteString("(`NewLongQueueBroadcaster`, as client-go's event recording uses; `NewBroadcaster` for workload 3, where it is the faster) against `broadcast.Broadcaster[watch.Event]`, ")
	b.WriteString("and client-go `record` against herald's `events`. Every value is the median of the runs; each ratio is the median of the rounds' ratios (each round runs both sides, minutes apart at most), so it may differ from the quotient of the two medians shown; ")
	b.WriteString("the ratio is k8s/herald, so above 1× herald is cheaper (for the rows marked \"higher is better\" it is the other way round).\n\n")
	fmt.Fprintf(&b, "%s.\n\n", env)
	fmt.Fprintf(&b, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat(" --- |", len(header)))
	for _, r := range t.rows {
		if r.section != "" {
			fmt.Fprintf(&b, "| **%s** | | | | | |\n", r.section)
		}
		c := r.cells()
		if c[5] == "FAIL" {
			c[5] = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s |\n", strings.Join(c, " | "))
	}
	b.WriteString(`
How each workload is measured (bench/*_test.go):

1. One publisher, N watchers each draining in its own goroutine and checking order; the clock stops when every watcher has every value. herald is read once through ` + "`C()`" + ` and once through ` + "`All()`" + `; k8s through ` + "`ResultChan()`" + `. The clock starts once a warm-up value has reached every watcher and stops before the watchers are stopped; allocations count the whole process in between. The floor rows run the same reader loops and per-value check with no broadcaster, on values from memory: through an iterator (the floor of ` + "`All()`" + `), or through a channel of 63 values filled by a goroutine of its own (the floor of a channel per watcher, as ` + "`C()`" + `); their k8s/floor ratio is the most that any library read that way could reach against k8s in the same run. The floor-ring rows are the floor of ` + "`All()`" + `'s design (bench/floorring_test.go): a shared ring written under one mutex, readers yielding from it with no lock and parking on a wake channel each, the publisher waiting for the slowest before lapping; floor-ring-claim adds what an ` + "`All()`" + ` loop does for guarantee 3 (a copy under a mutex of the reader's own per batch, a CAS per value).
2. ` + "`Publish`" + ` / ` + "`Action`" + ` in a ` + "`b.Loop`" + ` with nothing registered.
3. ` + "`Watch()`" + ` then ` + "`Stop()`" + ` in a ` + "`b.Loop`" + ` while another goroutine publishes flat out; allocations count the publisher too (it allocates nothing on either side).
4. 5000 watchers registered, nothing published; heap is ` + "`MemStats.HeapAlloc`" + ` after two GCs, before minus after, per watcher; goroutine stacks (` + "`StackInuse`" + `) are shown apart because HeapAlloc does not include them. herald is measured right after ` + "`Watch()`" + ` and again after ` + "`C()`" + ` on every watcher.
5. Time per publish for the publisher alone; then Shutdown, and every fast watcher drains its stream to the end. The values per second are the median fast watcher's, from the first publish until it has drained.
6. One value in flight, at 1, 100 and 1000 watchers: Publish, then wait until every watcher has it; each watcher records the time from just before Publish to its receipt (up to 2 000 000 samples over all watchers), p50/p99 over all of them. The pump rows measure the design ` + "`C()`" + ` did not take, a goroutine per watcher filling the watcher's channel (the publisher wakes the pump, the pump wakes the reader: bench/peers_test.go, pumpModel), against a channel per subscriber written by the publisher, which is what ` + "`C()`" + ` is; the floor-ring rows, the floor of ` + "`All()`" + `'s design (a shared ring written under one mutex, read with no lock, a wake channel per reader, no policies or claims: bench/latency_test.go), the floor-ring-claim rows, that floor with ` + "`All()`" + `'s claim (a mutex per batch, a CAS per value, as for workload 1), and the floor-ring-lockfree rows, the same floor whose readers park with no lock (a stack pushed with a CAS, taken whole by the publisher); the workload 1 rows "a channel each, written by the publisher" are that channel's throughput (BenchmarkPeerFanout/chan).
7. bench/eventsbench: the same mixed stream (` + "`eventstream.MixedStream(10000, 1)`" + `: 1000 objects, half the events about a hot hundred, several sources, reasons with 1 to 15 message variants, 83% exact repeats: the share at which client-go's correlator makes the 207 allocations per event of client-go's reference figures for its stream, chosen with client-go alone and checked by ` + "`TestStreamMatchesAnchor`" + `; the rows \"the earlier stream\" use 40%, the share of the figures published before that calibration) through client-go's ` + "`EventCorrelator`" + ` and herald's ` + "`Correlator`" + `, default options, ` + "`UpdateState`" + ` after each written event; a fresh correlator every 10 000 events, so that the spam filter's state does not depend on the run's length (one correlator for the whole run would measure mostly skipped events, cheap for herald and not for client-go, in a proportion set by b.N); real clock on both sides (a pass takes well under the spam filter's refill and the aggregation window, so the decisions match); ` + "`runtime.GC()`" + ` before the timed run and, untimed, before each pass on both sides, so that one pass's garbage (the correlator dropped at its end) is not the next pass's work: with it the figures depend on the workload, not on where the GC pacer happened to be (set HERALD_BENCH_NOPASSGC=1 to compare). The decision shares are over one such pass; aggregation differs on purpose (once a group aggregates, herald aggregates every similar event until the group is quiet, where client-go forgets a random message).
8. The same stream through ` + "`Recorder.Event`" + ` (even events) and ` + "`Eventf(\"%s\", message)`" + ` (odd ones), one recorder per source, → broadcaster → sink writer with its correlator → a no-op sink, in batches of 500 events followed by a sentinel event the recorder waits for (both recorders drop when their queue of 1000 is full; this keeps both lossless); a fresh pipeline every 10 000 events, set up untimed after a ` + "`runtime.GC()`" + `, on both sides. herald's broadcaster logs to a discarding slog handler. The floor row is the same harness without a correlator: each event is allocated (the sink's own copy, guarantee 6) with its timestamps, formatted by Eventf's Sprintf, published through herald's broadcast ring and handed to the sink; no names, no counters. herald's pipeline can go below it, because events the spam filter skips never reach the sink and their memory is reused.

9. ` + "`BenchmarkResume`" + ` (bench/resume_test.go), herald alone: ` + "`Publish`" + ` in a ` + "`b.Loop`" + ` on a broadcaster with ` + "`WithHistory(1000)`" + ` against one without, with no watcher (a publish then only counts, or with history writes the slot: one more atomic operation, see bench-resume.md) and with one full Drop watcher of queue 10 nobody reads (every publish takes the lock and drops for it); ` + "`WatchFrom(1)`" + ` on 1000 kept values then ` + "`Stop`" + `, against ` + "`Watch`" + ` then ` + "`Stop`" + `; then 10 000 values read through ` + "`Seq`" + ` in rounds, timed per value: queued for a Block watcher of queue 10 000 as they were published, against replayed by ` + "`WatchFrom`" + ` once an Evict watcher of queue 100 was evicted by them (the publishing and the eviction untimed).

Raw output (benchstat-compatible) is in bench/out/raw.txt after a run; a table made with -from names the raw files it pools above (the published ones are kept in docs/bench-raw/). More on resume, history and eviction, from the broadcast package's own benchmarks: [bench-resume.md](bench-resume.md).
`)
	return b.String()
}

// missing lists the rows without a result on both sides.
func (t *table) missing() []string {
	var m []string
	for _, r := range t.rows {
		if !r.ok {
			m = append(m, r.label+" ("+r.k8s+" / "+r.herald+")")
		}
	}
	return m
}

func (t *table) failedTargets() []string {
	var f []string
	for _, r := range t.rows {
		if r.result() == "FAIL" {
			f = append(f, r.label)
		}
	}
	return f
}
