// Command compare runs herald's side-by-side benchmarks against the
// Kubernetes machinery, interleaved, and reports medians.
//
// It builds the test binaries of package bench (broadcast against
// k8s.io/apimachinery/pkg/watch) and, when present, bench/eventsbench (events
// against k8s.io/client-go/tools/record), then runs each workload once per
// system per round, alternating which system goes first, for -count rounds.
// So drift on the machine (another job, thermal state) hits both systems
// alike. It prints one table (workload, k8s, herald, ratio k8s/herald, target,
// pass/fail), and writes:
//
//	out/raw.txt             every benchmark line, benchstat-compatible
//	out/results.md          the table as Markdown (copied to ../docs/bench-results.md)
//	out/bench-fanout.png    ns per event against watcher count (copied to ../docs/bench-fanout.png)
//
// Run it from the bench directory:
//
//	go run ./cmd/compare                      # -count 5 -benchtime 1s
//	go run ./cmd/compare -count 3 -benchtime 100ms
//	go run ./cmd/compare -smoke               # every benchmark once; fails if any is broken
//	go run ./cmd/compare -from a.txt,b.txt    # no run: the table from earlier raw outputs, rounds pooled
//
// With -smoke nothing is copied to ../docs. Exit status: 1 if a build or a
// benchmark failed or a result is missing; with -strict also if a target is
// missed.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// A job is one workload: a Benchmark function whose first-level
// sub-benchmarks are the systems compared.
type job struct {
	pkg       string   // package directory, relative to bench/
	bench     string   // Benchmark function name without "Benchmark"
	systems   []string // first-level sub-benchmark names
	benchtime string   // overrides -benchtime when set (memory workloads run once)
	env       []string // extra environment, e.g. knobs that smoke mode turns down
}

var jobs = []job{
	{pkg: ".", bench: "Fanout", systems: []string{"k8s", "herald-C", "herald-All", "floor-iter", "floor-chan", "floor-ring", "floor-ring-claim"}},
	{pkg: ".", bench: "PeerFanout", systems: peerNames},
	{pkg: ".", bench: "PublishIdle", systems: []string{"k8s", "herald", "floor-mutex"}},
	{pkg: ".", bench: "Churn", systems: []string{"k8s", "herald"}},
	{pkg: ".", bench: "IdleWatcher", systems: []string{"k8s", "herald", "herald-C"}, benchtime: "1x"},
	{pkg: ".", bench: "Lossy", systems: []string{"k8s", "herald-C"}},
	{pkg: ".", bench: "Latency", systems: []string{"k8s", "herald-C", "herald-All", "floor-ring", "floor-ring-claim", "floor-ring-lockfree"}},
	{pkg: ".", bench: "PeerLatency", systems: append(peerNames[:len(peerNames):len(peerNames)], "pump")},
	{pkg: "./eventsbench", bench: "Correlator", systems: []string{"k8s", "herald", "k8s-repeats40", "herald-repeats40"}},
	{pkg: "./eventsbench", bench: "Pipeline", systems: []string{"k8s", "herald", "floor", "k8s-repeats40", "herald-repeats40"}},
	{pkg: ".", bench: "Resume", systems: []string{"herald"}},
}

// peerNames are the peer libraries of BenchmarkPeerFanout and
// BenchmarkPeerLatency (bench/peers_test.go).
var peerNames = []string{"chan", "cskr-pubsub", "moby-pubsub", "eventbus", "watermill"}

type config struct {
	count     int
	benchtime string
	smoke     bool
	strict    bool
	outDir    string
	docsDir   string
	only      *regexp.Regexp
	timeout   time.Duration
	from      string
}

func main() {
	var c config
	var only string
	flag.IntVar(&c.count, "count", 5, "rounds; each runs every workload once per system")
	flag.StringVar(&c.benchtime, "benchtime", "1s", "go test -benchtime for the timed workloads")
	flag.BoolVar(&c.smoke, "smoke", false, "CI mode: -count 1 -benchtime 1x, fail on anything broken, leave ../docs alone")
	flag.BoolVar(&c.strict, "strict", false, "also exit 1 when a target is missed")
	flag.StringVar(&c.outDir, "out", "out", "directory for raw output, table and chart")
	flag.StringVar(&c.docsDir, "docs", "../docs", "where the table and the chart are copied (empty: nowhere)")
	flag.StringVar(&only, "run", "", "only the workloads whose name matches this regexp (e.g. 'Fanout|Churn')")
	flag.DurationVar(&c.timeout, "timeout", 10*time.Minute, "limit for one test binary run")
	flag.StringVar(&c.from, "from", "", "run nothing: make the table and chart from these raw outputs, comma-separated (e.g. out/raw.txt); the rounds of several runs are pooled")
	flag.Parse()
	if c.smoke {
		c.count, c.benchtime, c.docsDir = 1, "1x", ""
	}
	if only != "" {
		re, err := regexp.Compile(only)
		if err != nil {
			fatalf("-run: %v", err)
		}
		c.only = re
	}
	if err := run(c); err != nil {
		fatalf("%v", err)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "compare: "+format+"\n", args...)
	os.Exit(1)
}

func run(c config) error {
	if err := checkDir(); err != nil {
		return err
	}
	if err := os.MkdirAll(c.outDir, 0o755); err != nil {
		return err
	}
	if c.from != "" {
		return fromRaw(c)
	}
	start := time.Now()

	// Build one test binary per package, so that every run measures the same
	// code and no run pays for compilation. A package that does not build
	// is reported, and its workloads are skipped; the run then fails at the
	// end, after the rest has been measured.
	bins := map[string]string{}
	var failures []string
	var selected []job
	for _, j := range jobs {
		if c.only != nil && !c.only.MatchString(j.bench) {
			continue
		}
		if _, ok := bins[j.pkg]; !ok {
			bins[j.pkg] = ""
			if _, err := os.Stat(j.pkg); err != nil {
				fmt.Fprintf(os.Stderr, "compare: %s: no such package yet, its workloads are skipped\n", j.pkg)
			} else if bin, err := build(c, j.pkg); err != nil {
				failures = append(failures, err.Error())
			} else {
				bins[j.pkg] = bin
			}
		}
		if bins[j.pkg] != "" {
			selected = append(selected, j)
		}
	}

	raw, err := os.Create(filepath.Join(c.outDir, "raw.txt"))
	if err != nil {
		return err
	}
	defer raw.Close()
	// A benchfmt configuration line, so that -from can say how the runs were made.
	fmt.Fprintf(raw, "compare-run: %s\n", runDescription(c))
	res := newResults()
	for round := range c.count {
		for _, j := range selected {
			// Rotate the order of the systems each round, so that none is
			// always first (warm caches, fresh heap) or always last.
			n := len(j.systems)
			for k := range n {
				sys := j.systems[(k+round)%n]
				fmt.Fprintf(os.Stderr, "round %d/%d  %-12s %-10s ", round+1, c.count, j.bench, sys)
				t0 := time.Now()
				out, err := runOne(c, bins[j.pkg], j, sys)
				raw.Write(out)
				got := res.add(out)
				fmt.Fprintf(os.Stderr, "%6.1fs  %d results\n", time.Since(t0).Seconds(), got)
				if err != nil || got == 0 {
					if err == nil {
						err = errors.New("no benchmark result")
					}
					failures = append(failures, fmt.Sprintf("%s/%s: %v\n%s", j.bench, sys, err, tail(out, 40)))
				}
			}
		}
	}
	// The table has a row for every workload asked for, so that one that
	// could not run shows as n/a; -run leaves the others out.
	err = report(c, res, asked(c), environment(c, time.Since(start)))
	if len(failures) > 0 {
		for _, f := range failures {
			fmt.Fprintln(os.Stderr, "FAIL", f)
		}
		return fmt.Errorf("%d build(s) or benchmark run(s) failed; output in %s", len(failures), raw.Name())
	}
	return err
}

// fromRaw makes the table and the chart from the raw outputs of earlier
// runs (c.from, comma-separated). The rounds of every run are pooled: each
// ratio is then the median of the ratios of all their rounds.
func fromRaw(c config) error {
	res := newResults()
	var runs []string
	for _, f := range strings.Split(c.from, ",") {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		delete(res.config, "compare-run") // so that it is this file's, if it has one
		if res.add(b) == 0 {
			return fmt.Errorf("%s: no benchmark result", f)
		}
		desc := res.config["compare-run"]
		if desc == "" {
			desc = "a run"
		}
		runs = append(runs, fmt.Sprintf("%s (%s)", f, desc))
	}
	env := fmt.Sprintf("%s; from %s", runtime.Version(), runs[0])
	if len(runs) > 1 {
		env = fmt.Sprintf("%s; the rounds of %d runs pooled: %s", runtime.Version(), len(runs), strings.Join(runs, "; "))
	}
	return report(c, res, asked(c), env)
}

// asked returns the workloads -run selects, nil for all of them.
func asked(c config) map[string]bool {
	if c.only == nil {
		return nil
	}
	benches := map[string]bool{}
	for _, j := range jobs {
		if c.only.MatchString(j.bench) {
			benches[j.bench] = true
		}
	}
	return benches
}

// report prints the table and writes the Markdown and the chart.
func report(c config, res *results, benches map[string]bool, env string) error {
	tbl := buildTable(res, benches)
	fmt.Println()
	fmt.Print(tbl.text())
	fmt.Println()
	fmt.Println(env)

	md := tbl.markdown(env)
	mdPath := filepath.Join(c.outDir, "results.md")
	if err := os.WriteFile(mdPath, []byte(md), 0o644); err != nil {
		return err
	}
	pngPath := filepath.Join(c.outDir, "bench-fanout.png")
	if benches == nil || benches["Fanout"] {
		if err := fanoutChart(res, pngPath); err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		fmt.Printf("wrote %s, %s\n", mdPath, pngPath)
	} else {
		fmt.Printf("wrote %s (no chart: -run left out Fanout)\n", mdPath)
	}
	if c.docsDir != "" && c.only == nil {
		for src, dst := range map[string]string{mdPath: "bench-results.md", pngPath: "bench-fanout.png"} {
			if err := copyFile(src, filepath.Join(c.docsDir, dst)); err != nil {
				return err
			}
			fmt.Printf("copied %s to %s\n", src, filepath.Join(c.docsDir, dst))
		}
	}

	if missing := tbl.missing(); len(missing) > 0 {
		return fmt.Errorf("results missing for: %s", strings.Join(missing, "; "))
	}
	if c.strict {
		if failed := tbl.failedTargets(); len(failed) > 0 {
			return fmt.Errorf("targets missed: %s", strings.Join(failed, "; "))
		}
	}
	return nil
}

// checkDir makes sure compare runs in the bench module, whose relative paths
// it uses.
func checkDir() error {
	b, err := os.ReadFile("go.mod")
	if err != nil || !bytes.Contains(b, []byte("module github.com/heraldgo/herald/bench\n")) {
		return errors.New("run me from herald's bench directory: cd bench && go run ./cmd/compare")
	}
	return nil
}

func build(c config, pkg string) (string, error) {
	name := strings.Trim(strings.ReplaceAll(pkg, "/", "_"), "._")
	if name == "" {
		name = "bench"
	}
	bin, err := filepath.Abs(filepath.Join(c.outDir, name+".test"))
	if err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "building %s\n", pkg)
	cmd := exec.Command("go", "test", "-c", "-o", bin, pkg)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build: go test -c %s: %w", pkg, err)
	}
	return bin, nil
}

func runOne(c config, bin string, j job, sys string) ([]byte, error) {
	benchtime := c.benchtime
	if j.benchtime != "" {
		benchtime = j.benchtime
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin,
		"-test.run", "^$",
		"-test.bench", fmt.Sprintf("^Benchmark%s$/^%s$", j.bench, regexp.QuoteMeta(sys)),
		"-test.benchmem",
		"-test.count", "1",
		"-test.benchtime", benchtime,
		"-test.timeout", c.timeout.String(),
	)
	cmd.Dir = j.pkg
	cmd.Env = append(os.Environ(), j.env...)
	if c.smoke {
		// Fewer idle watchers: the smoke run checks that the workload works,
		// not what it costs.
		cmd.Env = append(cmd.Env, "HERALD_BENCH_IDLE=500")
	}
	// stdout and stderr apart: go test prints a benchmark's name before it
	// runs and its figures after, so a log line on stderr could otherwise
	// land inside the result line.
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err == nil && bytes.Contains(stdout.Bytes(), []byte("\nFAIL")) {
		err = errors.New("benchmark reported FAIL")
	}
	if err != nil {
		stdout.WriteString("\n--- stderr:\n")
		stdout.Write(stderr.Bytes())
	}
	return stdout.Bytes(), err
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func environment(c config, took time.Duration) string {
	return fmt.Sprintf("%s; %s in all", runDescription(c), took.Round(time.Second))
}

func runDescription(c config) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %s/%s, %d cores (GOMAXPROCS %d), %s; medians of %d interleaved runs, -benchtime %s",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), cpu,
		c.count, c.benchtime)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
