package main

import (
	"bytes"

	"golang.org/x/exp/stats"
	"golang.org/x/perf/benchfmt"
)

// results holds every measurement by benchmark name (without the
// "Benchmark" prefix and the -GOMAXPROCS suffix) and unit, in the units the
// benchmarks print (ns/op, B/op, allocs/op and the custom ones).
type results struct {
	values map[string]map[string][]float64
	config map[string]string // file configuration: goos, goarch, cpu, pkg
}

func newResults() *results {
	return &results{values: map[string]map[string][]float64{}, config: map[string]string{}}
}

// add parses go test -bench output and returns how many results it held.
func (r *results) add(out []byte) int {
	n := 0
	rd := benchfmt.NewReader(bytes.NewReader(out), "bench")
	for rd.Scan() {
		res, ok := rd.Result().(*benchfmt.Result)
		if !ok {
			continue
		}
		for _, c := range res.Config {
			if c.File {
				r.config[c.Key] = string(c.Value)
			}
		}
		name := string(trimProcs(res.Name))
		m := r.values[name]
		if m == nil {
			m = map[string][]float64{}
			r.values[name] = m
		}
		for _, v := range res.Values {
			val, unit := v.Value, v.Unit
			if v.OrigUnit != "" { // benchfmt tidies ns/op into sec/op; keep what was printed
				val, unit = v.OrigValue, v.OrigUnit
			}
			m[unit] = append(m[unit], val)
		}
		n++
	}
	return n
}

// trimProcs drops the "-2" that go test appends for GOMAXPROCS.
func trimProcs(name benchfmt.Name) []byte {
	base, parts := name.Parts()
	out := append([]byte(nil), base...)
	for _, p := range parts {
		if len(p) > 0 && p[0] == '-' {
			continue
		}
		out = append(out, p...)
	}
	return out
}

// median of the runs of name in unit; ok is false when there are none.
func (r *results) median(name, unit string) (float64, bool) {
	xs := r.values[name][unit]
	if len(xs) == 0 {
		return 0, false
	}
	return stats.Median(xs), true
}

// spread is the lowest and highest run, for the Markdown notes.
func (r *results) spread(name, unit string) (lo, hi float64, n int) {
	xs := r.values[name][unit]
	if len(xs) == 0 {
		return 0, 0, 0
	}
	q := stats.Quantiles(xs, 0.0, 1.0)
	return q[0], q[1], len(xs)
}
