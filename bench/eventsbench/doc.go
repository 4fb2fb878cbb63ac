// Package eventsbench measures herald's events package against client-go's
// tools/record on one mixed stream of events (eventstream.MixedStream, the
// stream herald's own benchmarks use): the correlator alone
// (BenchmarkCorrelator) and the whole pipeline from Recorder to a no-op sink
// (BenchmarkPipeline). Run it through bench/cmd/compare.
package eventsbench
