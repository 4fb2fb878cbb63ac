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

// roundSums is, per round, the sum of name's values in units: the runs of
// one round are the i-th value of every name, since each round runs every
// workload once per system. ok is false when a unit is missing or the
// units' run counts differ (a run failed).
func (r *results) roundSums(name string, units []string) ([]float64, bool) {
	var sums []float64
	for i, u := range units {
		xs := r.values[name][u]
		if len(xs) == 0 || (i > 0 && len(xs) != len(sums)) {
			return nil, false
		}
		if i == 0 {
			sums = make([]float64, len(xs))
		}
		for j, x := range xs {
			sums[j] += x
		}
	}
	return sums, len(sums) > 0
}

// medianRatio is the median over rounds of k/h, each round's pair measured
// minutes apart at most, so that a noisy stretch of the machine moves both
// sides of a ratio together. ok is false when the two have different run
// counts (a run of one side failed): the caller then divides medians.
func (r *results) medianRatio(k, h string, units []string) (float64, bool) {
	ks, kok := r.roundSums(k, units)
	hs, hok := r.roundSums(h, units)
	if !kok || !hok || len(ks) != len(hs) {
		return 0, false
	}
	ratios := make([]float64, 0, len(ks))
	for i := range ks {
		if hs[i] == 0 {
			return 0, false
		}
		ratios = append(ratios, ks[i]/hs[i])
	}
	return stats.Median(ratios), true
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
